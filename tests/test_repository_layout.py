"""The tree says what each thing is (issue 31): docs/ is the manual only, run data lives in results/<experiment>/
and is linked from the site, research scripts live in experiments/. These tests look at names, sizes and links;
they read no run data."""
from __future__ import annotations

import posixpath
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RESULTS = ROOT / "results"
EXPERIMENTS = ROOT / "experiments"

#: Suffixes of run data (cells, summaries, arrays, tables); none may lie under docs/.
RUN_DATA = {".json", ".jsonl", ".csv", ".tsv", ".npz", ".npy", ".parquet", ".pt", ".safetensors"}
#: Run-data files the manual's own examples need under docs/ (none today; name each one here).
DOCS_DATA_ALLOWED: set[str] = set()
#: the manual's own pages (Markdown and its figures) and the site's vendored assets (KaTeX, the offline
#: search shim under docs/assets/), bounded apart: pages grow with the manual, assets only with a new library
DOCS_MAX_BYTES = 650_000
ASSETS_MAX_BYTES = 650_000

_LINK = re.compile(r"\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _links(page: Path) -> list[str]:
    """Relative link targets of a Markdown page, resolved to repository paths (no fragment)."""
    here = page.parent.relative_to(ROOT).as_posix()
    out = []
    for target in _LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:|^/|^#", target):
            continue
        out.append(posixpath.normpath(posixpath.join(here, target.split("#")[0])))
    return out


def test_docs_is_the_manual_only():
    files = _files(DOCS)
    assets = DOCS / "assets"
    size = sum(p.stat().st_size for p in files if assets not in p.parents)
    assert size < DOCS_MAX_BYTES, f"docs/ pages hold {size:,} bytes (at most {DOCS_MAX_BYTES:,}): run data goes in results/"
    vendored = sum(p.stat().st_size for p in files if assets in p.parents)
    assert vendored < ASSETS_MAX_BYTES, f"docs/assets/ holds {vendored:,} bytes (at most {ASSETS_MAX_BYTES:,})"
    scripts = [p.relative_to(ROOT).as_posix() for p in files if p.suffix == ".py"]
    assert not scripts, f"scripts under docs/ (move them to experiments/): {scripts}"
    data = [p.relative_to(ROOT).as_posix() for p in files if p.suffix in RUN_DATA]
    assert set(data) <= DOCS_DATA_ALLOWED, \
        f"run data under docs/ (move it to results/<experiment>/): {sorted(set(data) - DOCS_DATA_ALLOWED)}"


def test_every_results_folder_is_linked_from_the_manual_and_every_link_into_results_exists():
    pages = sorted(DOCS.rglob("*.md"))
    links = [(page, link) for page in pages for link in _links(page)]
    into = [(page, link) for page, link in links if link.startswith("results/")]
    missing = [f"{page.relative_to(ROOT)} -> {link}" for page, link in into if not (ROOT / link).exists()]
    assert not missing, f"links into results/ to nothing: {missing}"
    linked = {link.split("/")[1] for _, link in into if "/" in link}
    folders = sorted(p.name for p in RESULTS.iterdir() if p.is_dir()) if RESULTS.is_dir() else []
    unlinked = [f for f in folders if f not in linked]
    assert not unlinked, f"results/ folders no page of docs/ links (link each from its results page): {unlinked}"
    loose = [p.name for p in RESULTS.iterdir() if p.is_file()] if RESULTS.is_dir() else []
    assert not loose, f"files directly under results/ (each run's data goes in results/<experiment>/): {loose}"


def test_links_within_docs_reach_existing_files():
    """No page links a file that is not there (e.g. a folder of the old layout: docs/<run>/, docs/figures/)."""
    stale = [f"{page.relative_to(ROOT)} -> {link}" for page in sorted(DOCS.rglob("*.md")) for link in _links(page)
             if link.startswith("docs/") and not (ROOT / link).exists()]
    assert not stale, f"links to files that are not there: {stale}"


def test_experiments_readme_names_every_script():
    readme = (EXPERIMENTS / "README.md").read_text(encoding="utf-8")
    scripts = sorted(p.name for p in EXPERIMENTS.glob("*.py"))
    assert scripts, "experiments/ holds no script"
    unnamed = [s for s in scripts if f"`{s}`" not in readme]
    assert not unnamed, f"experiments/README.md says nothing of {unnamed}"


def test_benchmarks_md_names_every_benchmark():
    """benchmarks/ holds benchmarks only, and docs/benchmarks.md is their register (what each compares, its
    numbers or where they are); research scripts go in experiments/."""
    page = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    unnamed = [p.name for p in sorted((ROOT / "benchmarks").glob("*.py")) if f"benchmarks/{p.name}" not in page]
    assert not unnamed, f"docs/benchmarks.md says nothing of {unnamed}"
