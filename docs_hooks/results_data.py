"""MkDocs hook: the run data under results/ (beside docs/, not in it) in the built site, linked as on GitHub.

A results page links its data where it lies in the repository, e.g. docs/results/wsv-experiment.md links
``../../results/wsv/summary.md``: that link works when reading the repository (GitHub), but points outside
docs_dir for MkDocs. This hook adds every file under results/ to the build under ``results-data/`` (a
Markdown file becomes a page outside the navigation, any other file is copied as it is) and rewrites each
relative link or image of a page whose target lies under results/ (or, from a page of results/, under
docs/) to where that file is in the site, so ``mkdocs build --strict`` checks it like any other link.
Registered in mkdocs.yml (``hooks:``).
"""
from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, InclusionLevel

RESULTS = "results"  # the folder at the repository root
SITE_PREFIX = "results-data"  # where its files go in the site (docs/results/ holds the results pages)

_LINK = re.compile(r"(\]\()(<?)([^)\s>]+)(>?)((?:\s+\"[^\"]*\")?\))")


def _root(config) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def on_files(files, config):
    root = _root(config)
    data = root / RESULTS
    if not data.is_dir():
        return files
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        rel = path.relative_to(data).as_posix()
        files.append(File.generated(config, f"{SITE_PREFIX}/{rel}", abs_src_path=str(path),
                                    inclusion=InclusionLevel.NOT_IN_NAV))
    return files


def _repo_path(src_uri: str) -> str:
    """Where a page of the site lies in the repository."""
    if src_uri.startswith(SITE_PREFIX + "/"):
        return f"{RESULTS}/{src_uri[len(SITE_PREFIX) + 1:]}"
    return f"docs/{src_uri}"


def _site_uri(repo_path: str) -> str | None:
    """Where a repository file lies in the site (None: not in the site)."""
    if repo_path.startswith(RESULTS + "/"):
        return f"{SITE_PREFIX}/{repo_path[len(RESULTS) + 1:]}"
    if repo_path.startswith("docs/"):
        return repo_path[len("docs/"):]
    return None


def map_link(page_src_uri: str, target: str) -> str:
    """The link ``target`` of the page ``page_src_uri`` as the site needs it (unchanged unless it crosses
    between docs/ and results/)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:|^/|^#", target):
        return target
    path, hash_, fragment = target.partition("#")
    here = posixpath.dirname(_repo_path(page_src_uri))
    resolved = posixpath.normpath(posixpath.join(here, path))
    site = _site_uri(resolved)
    if site is None or site == posixpath.normpath(posixpath.join(posixpath.dirname(page_src_uri), path)):
        return target
    new = posixpath.relpath(site, posixpath.dirname(page_src_uri) or ".")
    return new + hash_ + fragment


def on_page_markdown(markdown, page, config, files):
    src = page.file.src_uri
    return _LINK.sub(lambda m: m.group(1) + m.group(2) + map_link(src, m.group(3)) + m.group(4) + m.group(5),
                     markdown)
