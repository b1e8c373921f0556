"""The built site reads well offline and online: checked over the HTML of a real `mkdocs build --strict`.

- Pages are files (`use_directory_urls: false`): every link and every script, stylesheet and image a
  page names is relative and resolves to a file of the site, so the site works opened from disk.
- No external requests: no script, stylesheet, font, image or frame from another host; no web fonts
  (`theme.font: false`); the repository link does not fetch the repository's counts.
- Math is rendered by a renderer shipped with the site: KaTeX's script, auto-render, stylesheet and every
  font its stylesheet names are files of the site, and the pages with math load them.
- Every page has one H1, and a page of the navigation has the H1 of its nav title; the navigation holds
  Home, Install, Getting started, Your own data, ..., FAQ, Changelog, and not the run data (results-data/),
  which its results page links; every nav page links its neighbours (previous / next).
- The 404 page's links are relative too (MkDocs makes them root-absolute; docs_hooks/error_page.py).
- Search works from disk: the Material theme's offline plugin writes the index as a script
  (search/search_index.js) and every page loads the Web Worker shim it needs from the site
  (assets/iframe-worker/shim.js, not from a CDN); in headless Chromium, a page opened from a `file://`
  address with `?q=` shows results that link pages holding the word (skipped, saying why, where Chromium
  is not installed: `apt-get install chromium`; `.ci/run` installs it).
- `make docs` in a fresh copy of the tree builds the site in an environment with the docs extra alone
  (no torch, no vlgap).
"""
from __future__ import annotations

import html
import importlib.util
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
KATEX = ("assets/katex/katex.min.js", "assets/katex/contrib/auto-render.min.js", "assets/katex/katex.min.css",
         "assets/math.js")
SHIM = "assets/iframe-worker/shim.js"  # the search worker of a page opened from disk (mkdocs.yml extra.polyfills)
NAV_HEAD = ["Home", "Install", "Getting started", "Your own data"]
NAV_TAIL = ["FAQ", "Changelog"]


def nav_pages(nav, out=None) -> list[tuple[str, str]]:
    """(title, docs-relative file) of every page of a mkdocs nav, in order."""
    out = [] if out is None else out
    for entry in nav:
        (title, value), = entry.items()
        if isinstance(value, list):
            nav_pages(value, out)
        else:
            out.append((title, value))
    return out


class _Page(HTMLParser):
    """What a check needs from one HTML page: its references, H1 texts, footer links, scripts."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.refs: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.tags: set[str] = set()
        self.h1: list[str] = []
        self._in_h1 = 0
        self._h1_skip = 0
        self.classes: list[tuple[str, str, dict]] = []  # (tag, class, attrs) of elements with a class
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        for key in ("href", "src", "poster", "data"):
            if a.get(key) is not None:
                self.refs.append((tag, key, a[key]))
        if a.get("srcset"):
            for part in a["srcset"].split(","):
                if part.strip():
                    self.refs.append((tag, "srcset", part.strip().split()[0]))
        if a.get("class"):
            self.classes.append((tag, a["class"], a))
        if tag == "h1":
            self._in_h1 += 1
            self.h1.append("")
        elif self._in_h1 and tag == "a" and "headerlink" in (a.get("class") or ""):
            self._h1_skip += 1
        if tag == "style":
            self._in_style = True
            self.styles.append("")

    def handle_endtag(self, tag):
        if tag == "h1" and self._in_h1:
            self._in_h1 -= 1
        elif tag == "a" and self._h1_skip:
            self._h1_skip -= 1
        elif tag == "style":
            self._in_style = False

    def handle_data(self, data):
        if self._in_h1 and not self._h1_skip:
            self.h1[-1] += data
        if self._in_style:
            self.styles[-1] += data


def parse(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text(encoding="utf-8"))
    p.h1 = [" ".join(h.split()) for h in p.h1]
    return p


# Elements a page may hold; any other start tag is text a docstring or page left unescaped (`<style>` in
# a docstring once swallowed the rest of an API page as CSS). Escape such text or put it in backticks.
HTML_TAGS = set("""a abbr address area article aside audio b base bdi bdo blockquote body br button canvas caption
cite code col colgroup data datalist dd del details dfn dialog div dl dt em embed fieldset figcaption figure footer
form h1 h2 h3 h4 h5 h6 head header hgroup hr html i iframe img input ins kbd label legend li link main map mark menu
meta meter nav noscript object ol optgroup option output p param picture pre progress q rp rt ruby s samp script
search section select slot small source span strong style sub summary sup table tbody td template textarea tfoot th
thead time title tr track u ul var video wbr svg path g circle rect line polyline polygon ellipse use defs symbol
desc text tspan clippath lineargradient radialgradient stop mask""".split())

_EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.I)
_CSS_URL = re.compile(r"url\(\s*['\"]?([^'\")]+)['\"]?\s*\)|@import\s+['\"]([^'\"]+)['\"]")


def _resolves(site: Path, page: Path, target: str) -> Path | None:
    """The file a relative reference of `page` points at (None: it does not exist in the site)."""
    path = unquote(urlsplit(target).path)
    if not path:
        return page
    full = Path(posixpath.normpath(posixpath.join(page.parent.as_posix(), path)))
    return full if full.is_file() and site.resolve() in full.resolve().parents else None


def check_site(site: Path, config: dict) -> list[str]:
    """Every problem of the built site `site` (empty: it reads well offline and online)."""
    problems: list[str] = []
    nav = nav_pages(config["nav"])
    files = [f for _, f in nav]
    top = [next(iter(e)) for e in config["nav"]]
    order = [*NAV_HEAD, "Guides", "Results", "API reference", *NAV_TAIL]
    if [t for t in top if t in order] != order or top[:len(NAV_HEAD)] != NAV_HEAD or top[-1] not in ("Changelog", "Cite"):
        problems.append(f"navigation {top}: expected {order} in this order (and Cite at the end at most)")
    if any(f.startswith("results-data/") or "Raw" in t for t, f in nav):
        problems.append("run data (results-data/) is in the navigation: link it from its results page instead")
    if config.get("use_directory_urls") is not False:
        problems.append("use_directory_urls is not false: pages opened from disk would show folder listings")
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in config.get("plugins") or []]
    if "offline" not in plugins:
        problems.append("the offline plugin is not enabled: search does not work from disk")
    shims = [u for u in (config.get("extra") or {}).get("polyfills") or [] if "iframe-worker" in u]
    if not shims or any(_EXTERNAL.match(u) or not (site / u).is_file() for u in shims):
        problems.append(f"extra.polyfills {shims}: the iframe-worker shim must be a file of the site (the offline "
                        "plugin otherwise loads it from a CDN)")
    if not (site / "search" / "search_index.js").is_file():
        problems.append("search/search_index.js: the search index is not in the site as a script (offline plugin)")
    if (config.get("theme") or {}).get("font") is not False:
        problems.append("theme.font is not false: the theme fetches web fonts")
    for rel in KATEX:
        if not (site / rel).is_file():
            problems.append(f"{rel}: the math renderer is not in the site")
    css = site / "assets/katex/katex.min.css"
    if css.is_file():
        for m in _CSS_URL.finditer(css.read_text(encoding="utf-8")):
            ref = m.group(1) or m.group(2)
            if _EXTERNAL.match(ref) or not (css.parent / ref).is_file():
                problems.append(f"katex.min.css names {ref}, which is not a file of the site")
    for sheet in sorted(site.rglob("*.css")):  # every shipped stylesheet: nothing from another host
        for m in _CSS_URL.finditer(sheet.read_text(encoding="utf-8", errors="replace")):
            ref = m.group(1) or m.group(2)
            if _EXTERNAL.match(ref):
                problems.append(f"{sheet.relative_to(site)} loads {ref} from another host")

    pages = sorted(site.rglob("*.html"))  # 404.html included: its links are relative too
    by_file = {f: t for t, f in nav}
    n_math = 0
    for page in pages:
        rel = page.relative_to(site).as_posix()
        doc = parse(page)
        if len(doc.h1) != 1:
            problems.append(f"{rel}: {len(doc.h1)} H1 headings {doc.h1}, expected one")
        src = rel.removesuffix(".html") + ".md"
        if src in by_file and doc.h1 and doc.h1[0] != by_file[src]:
            problems.append(f"{rel}: H1 {doc.h1[0]!r} differs from its nav title {by_file[src]!r}")
        unknown = sorted(doc.tags - HTML_TAGS)
        if unknown:
            problems.append(f"{rel}: text read as HTML elements {['<' + u + '>' for u in unknown]}: escape it "
                            "(backticks in Markdown and docstrings)")
        for tag, attr, value in doc.refs:
            value = html.unescape(value)
            if value.startswith(("#", "mailto:", "data:", "javascript:")):
                continue
            if _EXTERNAL.match(value):
                if not (tag == "a" and attr == "href"):
                    problems.append(f"{rel}: <{tag} {attr}={value}> loads from another host")
                continue
            if value.startswith("/"):
                problems.append(f"{rel}: <{tag} {attr}={value}> is an absolute link (not relative)")
            elif urlsplit(value).path.endswith("/"):
                problems.append(f"{rel}: <{tag} {attr}={value}> links a folder (a listing from disk), not a page")
            elif _resolves(site, page, value) is None:
                problems.append(f"{rel}: <{tag} {attr}={value}> resolves to no file of the site")
        for style in doc.styles:
            for m in _CSS_URL.finditer(style):
                if _EXTERNAL.match(m.group(1) or m.group(2)):
                    problems.append(f"{rel}: an inline style loads {m.group(1) or m.group(2)} from another host")
        text = page.read_text(encoding="utf-8")
        if re.search(r"fonts\.(googleapis|gstatic)\.com", text):
            problems.append(f"{rel}: names a web font service")
        if 'data-md-component="source"' in text:
            problems.append(f"{rel}: the repository link fetches the repository's counts from its host")
        if config.get("repo_url") and not any(c == "md-source" and a.get("href") == config["repo_url"]
                                              for _, c, a in doc.classes):
            problems.append(f"{rel}: no repository link ({config['repo_url']})")
        scripts = {(_resolves(site, page, v) or Path("/-")).resolve() for t, k, v in doc.refs
                   if t == "script" and not _EXTERNAL.match(v)}
        if (site / SHIM).resolve() not in scripts:
            problems.append(f"{rel}: does not load {SHIM} (search from disk)")
        if any("arithmatex" in c.split() for _, c, _ in doc.classes):
            n_math += 1
            missing = [r for r in KATEX if r.endswith(".js") and (site / r).resolve() not in scripts]
            if missing:
                problems.append(f"{rel}: has math but does not load {missing}")
        if src in by_file:
            i = files.index(src)
            footer = {c for _, c, _ in doc.classes}
            want = [("md-footer__link--prev", i > 0), ("md-footer__link--next", i < len(nav) - 1)]
            for cls, expected in want:
                if expected and not any(cls in c for c in footer):
                    problems.append(f"{rel}: no {cls.rsplit('--', 1)[1]} link in its footer")
    if n_math == 0:
        problems.append("no page has rendered math (pymdownx.arithmatex)")
    for _t, f in nav:
        if not (site / (f.removesuffix(".md") + ".html")).is_file():
            problems.append(f"{f}: in the nav but not built")
    return problems


def _mkdocs() -> list[str] | None:
    if importlib.util.find_spec("mkdocs") is not None and importlib.util.find_spec("mkdocstrings_handlers") is not None:
        return [sys.executable, "-m", "mkdocs"]
    exe = os.environ.get("VLGAP_MKDOCS")
    return [exe] if exe else None


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    cmd = _mkdocs()
    if cmd is None:
        pytest.skip("mkdocs with mkdocstrings is not installed here: pip install -e '.[docs]' (`make setup`) or set "
                    "VLGAP_MKDOCS to an mkdocs executable")
    site = tmp_path_factory.mktemp("site") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([*cmd, "build", "--strict", "--site-dir", str(site)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return site


def _config() -> dict:
    # mkdocs.yml may hold !ENV or python tags; none are needed for these keys
    class _Loader(yaml.SafeLoader):
        pass
    _Loader.add_multi_constructor("", lambda loader, tag, node: None)
    return yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)


@pytest.mark.slow  # one strict build: ~15 s
def test_built_site_reads_offline_and_online(built_site):
    problems = check_site(built_site, _config())
    assert not problems, "the built site:\n" + "\n".join(problems[:60]) + (
        f"\n... {len(problems) - 60} more" if len(problems) > 60 else "")


@pytest.mark.slow
def test_the_site_check_finds_what_it_checks(built_site, tmp_path):
    """The check fails on a site with an external script, a web font, a broken or absolute link, a folder link,
    two H1s, an H1 unlike its nav title, a missing math renderer, run data in the navigation, a root-absolute
    link on the 404 page, no offline plugin, a search shim from a CDN or not loaded, no search index script."""
    config = _config()
    assert check_site(built_site, config) == []
    site = tmp_path / "site"
    shutil.copytree(built_site, site)
    probe = site / "probe.html"
    text = probe.read_text(encoding="utf-8")
    text = text.replace("</head>", '<script src="https://cdn.example.org/x.js"></script>'
                                   '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">'
                                   "</head>", 1)
    text = text.replace("</article>", '<a href="nowhere.html">x</a><a href="/gap.html">y</a><a href="results/">z</a>'
                                      "<h1>Second</h1><hub id or folder></article>", 1)
    probe.write_text(text, encoding="utf-8")
    gap = site / "gap.html"
    gap.write_text(re.sub(r"<h1[^>]*>.*?</h1>", "<h1>Another title</h1>", gap.read_text(encoding="utf-8"), count=1,
                          flags=re.S), encoding="utf-8")
    (site / "assets/katex/katex.min.js").unlink()
    error_page = site / "404.html"
    error_page.write_text(error_page.read_text(encoding="utf-8").replace('href="./install.html"', 'href="/install.html"'),
                          encoding="utf-8")
    (site / "search" / "search_index.js").unlink()
    cli = site / "cluster.html"
    cli.write_text(re.sub(r'<script src="[^"]*iframe-worker/shim\.js"></script>', "", cli.read_text(encoding="utf-8")),
                   encoding="utf-8")
    bad = dict(config)
    bad["nav"] = [*config["nav"], {"Raw: WSV": "results-data/wsv/summary.md"}]
    bad["plugins"] = [p for p in config["plugins"] if p != "offline"]
    bad["extra"] = {"polyfills": ["https://unpkg.com/iframe-worker/shim"]}
    found = "\n".join(check_site(site, bad))
    for expected in ["cdn.example.org/x.js> loads from another host", "names a web font service",
                     "nowhere.html> resolves to no file", "/gap.html> is an absolute link", "results/> links a folder",
                     "probe.html: 2 H1 headings", "text read as HTML elements ['<hub>']", "gap.html: H1 'Another title' differs",
                     "katex.min.js: the math renderer is not in the site", "run data (results-data/) is in the navigation",
                     "404.html: <a href=/install.html> is an absolute link", "the offline plugin is not enabled",
                     "the iframe-worker shim must be a file of the site", "search/search_index.js: the search index",
                     f"cluster.html: does not load {SHIM}"]:
        assert expected in found, (expected, found)


# ---- search from disk, in a browser ----------------------------------------------------------------------
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
#: a headless browser that asks nothing of the network (this machine's is closed) and keeps no profile
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-quic", "--disable-extensions"]
_RESULT = re.compile(r'<li class="md-search-result__item"><a href="([^"]+)"')
_META = re.compile(r'<div class="md-search-result__meta">([^<]*)</div>')


def search_from_disk(site: Path, page: str, query: str) -> tuple[str | None, list[str]]:
    """(the result count line, the result links) that the Material theme's search shows on `page` of the site
    opened from a file:// address with `?q=query`, in headless Chromium. (None, []): search did not answer."""
    url = (site / page).resolve().as_uri() + "?q=" + quote(query)
    meta, links = None, []
    for budget in (15_000, 40_000):  # virtual time for the worker to load the index; more once if it did not answer
        with tempfile.TemporaryDirectory() as profile:
            proc = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                   f"--virtual-time-budget={budget}", "--dump-dom", url],
                                  capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, f"chromium exit {proc.returncode}: {proc.stderr[-2000:]}"
        m = _META.search(proc.stdout)
        meta, links = (m.group(1).strip() if m else None), _RESULT.findall(proc.stdout)
        if links:
            break
    return meta, links


def _needs_chromium():
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it): the search "
                    "from disk is checked in a headless browser")


@pytest.mark.slow  # a browser per query: ~5-20 s each on 2 cores
@pytest.mark.parametrize("page, query", [("index.html", "Fréchet"), ("results/wsv-experiment.html", "polisher"),
                                         ("404.html", "permutation")])
def test_search_answers_from_disk_in_chromium(built_site, page, query):
    _needs_chromium()
    meta, links = search_from_disk(built_site, page, query)
    assert links, f"no search results on {page} opened from disk for {query!r} (count line: {meta!r})"
    assert meta and re.fullmatch(r"[\d,]+ matching documents?", meta), meta
    for link in links:
        target = urlsplit(link)
        assert target.scheme == "file", link
        path = Path(unquote(target.path))
        assert path.is_file() and built_site.resolve() in path.resolve().parents, f"{link}: not a page of the site"
        assert query.lower() in path.read_text(encoding="utf-8").lower(), f"{link} does not hold {query!r}"


@pytest.mark.slow
def test_search_from_disk_needs_the_worker_shim(built_site, tmp_path):
    """The browser check can fail: without the shim the same query on the same page shows nothing."""
    _needs_chromium()
    site = tmp_path / "site"
    shutil.copytree(built_site, site)
    (site / SHIM).unlink()
    meta, links = search_from_disk(site, "index.html", "Fréchet")
    assert links == [], (meta, links)


# ---- make docs needs only the docs extra ------------------------------------------------------------------
def _tree_files() -> list[str] | None:
    """The files a fresh clone of this tree holds (committed ones and new ones git does not ignore)."""
    if shutil.which("git") is None:
        return None
    proc = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                          capture_output=True, text=True, timeout=60)
    return [f for f in proc.stdout.split("\0") if f and (ROOT / f).is_file()] if proc.returncode == 0 else None


@pytest.mark.slow  # a new environment with the docs extra (a few tens of MB of packages) and a strict build: ~1-2 min
def test_make_docs_needs_only_the_docs_extra(tmp_path):
    files = _tree_files()
    if files is None or shutil.which("make") is None:
        pytest.skip("needs git (to list the tree's files) and make")
    tree = tmp_path / "tree"
    for f in files:
        (tree / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, tree / f)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run(["make", "docs", f"PY={sys.executable}"], cwd=tree, capture_output=True, text=True,
                          timeout=900, env=env)
    assert proc.returncode == 0, f"make docs: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert not (tree / ".venv").exists(), "make docs made the full environment"
    python = tree / ".venv-docs" / "bin" / "python"
    for module in ("vlgap", "torch"):
        probe = subprocess.run([str(python), "-c", f"import {module}"], cwd=tmp_path, capture_output=True, env=env)
        assert probe.returncode != 0, f"the docs environment has {module}: it needs only the docs extra"
    assert check_site(tree / "site", _config()) == []
