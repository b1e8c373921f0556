"""No committed text names a path of the machine it was written on.

Every file git tracks (binary files aside) is scanned for absolute filesystem paths under a working,
temporary or home folder: Unix roots such as the work folder, the temp folders, home and root's home,
macOS user and temp folders, mount and scratch folders, Windows user folders, and `file://` URLs of any
of these. Documented commands use relative paths or placeholders instead. Allowed: placeholders (a
segment such as `<you>`, `$USER`, `{user}` or `...` right after the root, `~` and `$HOME`), URLs
(`https://host/tmp/x` is a web address, not a path) and system files (`/dev/null`, `/proc/...`).

The second test shows the scan can fail: a temporary git repository with such a path committed.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Roots of machine-specific folders. Written as words, so that this file names none of the paths itself.
_UNIX_ROOTS = ["work", "tmp", "var/tmp", "var/folders", "private/tmp", "private/var", "home", "root", "Users",
               "mnt", "scratch", "workspace", "workspaces"]
_SEP = "/"
_ROOT_ALT = "|".join(re.escape(r) for r in _UNIX_ROOTS)
# A segment right after the root that is a placeholder, not a name: <you>, $USER, ${USER}, {user}, ...
_PLACEHOLDER = r"(?:<[^>/\s]*>|\$\{?\w+\}?|\{\w*\}|\.\.\.|…|USER|NAME|you|me|user|username)(?=[/\s`'\")\]]|$)"
# The path starts where no word, dot, dash, colon, slash or tilde precedes it (so not inside a URL's host
# part or a relative path), or right after file:// (a URL of a local file is still a machine path).
_UNIX = re.compile(rf"(?:(?<![\w.~:/\\-])|(?<=file://)){_SEP}(?:{_ROOT_ALT})(?=$|[/\s`'\",;:)\]}}]|\.(?:$|\s))"
                   rf"(?!{_SEP}{_PLACEHOLDER})")
_WINDOWS = re.compile(r"(?<![\w])[A-Za-z]:[\\/]+(?:Users|Documents and Settings|Temp|Windows[\\/]+Temp)[\\/]+"
                      r"(?!<|%|\$)", re.IGNORECASE)


def machine_paths(text: str) -> list[tuple[int, str]]:
    """(line number, the line) of every line of `text` that names an absolute machine path."""
    found = []
    for no, line in enumerate(text.splitlines(), 1):
        if _UNIX.search(line) or _WINDOWS.search(line):
            found.append((no, line.strip()))
    return found


def tracked_text_files(repo: Path) -> list[Path]:
    """The files git tracks in `repo` that are text (no NUL byte in their first 8 KiB)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True).stdout
    files = []
    for name in out.decode("utf-8", "surrogateescape").split("\0"):
        path = repo / name
        if name and path.is_file():
            with open(path, "rb") as f:
                if b"\0" not in f.read(8192):
                    files.append(path)
    return files


def scan(repo: Path) -> list[str]:
    """'file:line: text' for every machine path in the tracked text files of `repo`."""
    problems = []
    for path in tracked_text_files(repo):
        text = path.read_bytes().decode("utf-8", "replace")
        for no, line in machine_paths(text):
            problems.append(f"{path.relative_to(repo).as_posix()}:{no}: {line[:160]}")
    return problems


def _git_available() -> bool:
    try:
        return subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip() == "true"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not _git_available(), reason="not a git checkout (a source archive): nothing is tracked")
def test_no_committed_file_names_a_machine_path():
    problems = scan(ROOT)
    assert not problems, ("committed text names absolute paths of a machine (use a relative path or a "
                          "placeholder such as <cache> or ~/):\n" + "\n".join(problems))


def _p(*parts: str) -> str:
    return _SEP + _SEP.join(parts)


@pytest.mark.parametrize("line", [
    f"vlgap demo --out {_p('tmp', 'demo-clean')}",
    f"`VLGAP_CACHE={_p('tmp', 'pooling_cache')} vlgap temporal m.jsonl`",
    f"see {_p('work', 'main', 'docs', 'probe.md')} for details",
    f'"manifest": "{_p("home", "alice", "data", "m.jsonl")}"',
    f"cd {_p('root')} && make",
    f"({_p('Users', 'bob', 'videos')})",
    f"open file://{_p('home', 'alice', 'site', 'index.html')}",
    f"written to {_p('var', 'folders', 'xy', 'T', 'pytest-1')}",
    f"cache: {_p('tmp')}.",
    "C:" + "\\Users\\carol\\vlgap\\runs",
])
def test_the_scan_finds_machine_paths(line):
    assert machine_paths(f"some text\n{line}\n"), line


@pytest.mark.parametrize("line", [
    "vlgap demo --out runs/demo (relative)",
    "cache: ~/.cache/vlgap or $HOME/.cache/vlgap",
    f"mount your data under {_p('home', '<you>', 'data')} or {_p('home', '$USER')}",
    "https://example.org/tmp/file and http://host:8265/home/x",
    "python -c 'import x' > /dev/null; cat /proc/cpuinfo",
    "tests/data/ and results/work/ and docs/tmp/x are relative",
    "a ratio 3/4 and the unit s/item, km/h",
    f"the template {_p('path', 'to', 'videos')}",
])
def test_the_scan_allows_placeholders_urls_and_relative_paths(line):
    assert not machine_paths(line), line


def test_the_scan_fails_when_a_committed_file_gains_a_machine_path(tmp_path):
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    (repo / "page.md").write_text("Run `vlgap demo --out runs/demo`.\n")
    (repo / "data.bin").write_bytes(b"\0" + _p("tmp", "x").encode())  # binary: not scanned
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "clean"], cwd=repo, check=True)
    assert scan(repo) == []
    (repo / "results.json").write_text('{"out": "' + _p("work", "main", "runs", "demo") + '"}\n')
    subprocess.run([*git, "add", "results.json"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "a machine path"], cwd=repo, check=True)
    assert scan(repo) == [f'results.json:1: {{"out": "{_p("work", "main", "runs", "demo")}"}}']
