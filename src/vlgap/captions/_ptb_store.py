"""The PTB scanner's compiled patterns, kept on disk between processes (as the jar ships its scanner
compiled: JFlex builds the DFA once, when the jar is made).

The rules of _ptb_rules are regexes over the jar's large Unicode classes. Parsing and analysing
them, compiling their `re` programs and the few POSIX (`regex`) patterns costs 60-70 ms in every
new process: more than tokenising thousands of captions once the rules are compiled. So each
compiled pattern is kept here, by the exact text of its source:

- a `re` pattern as the program the standard library's compiler hands `_sre.compile` (flags, code,
  groups): rebuilt in microseconds, `_sre` validating the code as it does for every compile;
- a POSIX pattern as the `regex` module pickles its patterns (its compiled code, not its source);
- a rule's analysis (`_ptb_rules.Rule`: the characters a match can start with, its widths, ...).

A changed rule has another source text, so it is a new entry, never a wrong one. The file lives under
the cache root (`lexer/`), one per Python version, `_sre` code format (`_sre.MAGIC`), `regex`
version and version of the code that parses, analyses and compiles the rules (a digest of
_ptb_rules, _ptb_regex and this module); it is written and read by the reuse rule (`vlgap.reuse`:
sealed, checksum verified, a damaged file reported and rebuilt), under the folder's lock so that
concurrent processes merge their entries, after a tokenisation that compiled something new (`save`).
Anything unexpected (a value that does not pickle, a stored program this Python refuses, an
unreadable or unwritable cache) falls back to compiling as before, with the same results; the first
tokenisation on a machine pays the compiles once (the benchmark reports both).
"""
from __future__ import annotations

import hashlib
import io
import pickle
import platform
import sys
import threading
from array import array
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import _sre
import regex
from re import _constants as sre_c

from vlgap import reuse
from vlgap.captions._ptb_regex import _compile_parsed, program
from vlgap.io_utils import cache_root, folder_lock

FORMAT = 1
FOLDER = "lexer"


def _sre_constant(name: str):
    """An sre constant (LITERAL, IN, ...) by name: how the store pickles them (sre's own refuse)."""
    return getattr(sre_c, name)


def _reduce_constant(c) -> tuple:
    if getattr(sre_c, c.name, None) is not c:  # pragma: no cover - a constant not named in sre_c
        raise pickle.PicklingError(f"sre constant {c.name} is not re._constants.{c.name}")
    return _sre_constant, (c.name,)


def _stored(prog: tuple) -> tuple:
    """A `program` as stored: its code as the bytes of an array of `_sre.CODESIZE`-byte words
    (unpickled ten times faster than a list of ints)."""
    flags, code, groups, groupindex, indexgroup = prog
    if _CODE_TYPE is None:  # pragma: no cover - no array type of the code's word size
        raise TypeError(f"no array type of {_sre.CODESIZE} bytes")
    return flags, array(_CODE_TYPE, code).tobytes(), groups, groupindex, indexgroup


def from_stored(stored: tuple):
    """The compiled pattern of a stored `program` (the code is validated by `_sre`, as on every compile)."""
    flags, code_bytes, groups, groupindex, indexgroup = stored
    code = array(_CODE_TYPE)
    code.frombytes(code_bytes)
    return _sre.compile(None, flags, code.tolist(), groups, groupindex, indexgroup)


_CODE_TYPE = next((t for t in "IL" if array(t).itemsize == _sre.CODESIZE), None)  # (None: nothing is stored)


class PatternStore:
    """Compiled patterns and rule analyses by source text, loaded from disk on first use."""

    def __init__(self, folder: str | Path | None = None):
        self.folder = Path(folder) if folder is not None else None  # None: <cache root>/lexer
        self.enabled = True
        self._entries: dict[tuple[str, str], Any] | None = None  # (kind, source) -> stored value
        self._built: dict[tuple[str, str], Any] = {}  # ... -> the pattern made from it in this process
        self._new: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    # -- where ----------------------------------------------------------------------------------
    @staticmethod
    def key() -> dict:
        """What the stored values depend on besides their sources (the reuse key of the file): the
        Python (its compiler), the `regex` version, and the code that parses, analyses and compiles
        the rules (an edit there makes another file)."""
        return {"what": "compiled patterns of vlgap's PTB tokenizer (vlgap.captions._ptb_store)",
                "format": FORMAT, "python": f"{sys.implementation.name} {platform.python_version()}",
                "sre_magic": _sre.MAGIC, "sre_codesize": _sre.CODESIZE, "regex": regex.__version__,
                "code_sha256": _code_digest()}

    def path(self) -> Path:
        folder = self.folder if self.folder is not None else cache_root() / FOLDER
        return folder / f"ptb-{reuse.key_digest(self.key())[:16]}.pickle"

    # -- reading --------------------------------------------------------------------------------
    def _read(self) -> dict:
        path = self.path()
        if not path.parent.is_dir():  # (reading makes no folder)
            return {}
        with folder_lock(path.parent, shared=True):
            return self._read_unlocked(path)

    def entries(self) -> dict:
        if self._entries is None:
            with self._lock:
                if self._entries is None:
                    try:
                        self._entries = self._read() if self.enabled else {}
                    except Exception:  # noqa: BLE001 - an unreadable store is an empty one (compile as before)
                        self._entries = {}
        return self._entries

    def _get(self, kind: str, source: str, make: Callable[[Any], Any], build: Callable[[], Any],
             keep: Callable[[Any], tuple[Any, Any]], finish: Callable[[Any], Any] | None = None) -> Any:
        """The object for (kind, source): made from the stored value (`make`), else built (`build`);
        `keep(built)` gives (the value to store, the object), `finish(built)` the object without
        the store."""
        k = (kind, source)
        hit = self._built.get(k)
        if hit is not None:
            return hit
        stored = self.entries().get(k) if self.enabled else None
        if stored is not None:
            try:
                hit = make(stored)
                self.hits += 1
            except Exception:  # noqa: BLE001 - a stored value this Python cannot use: build it again
                hit = None
        if hit is None:
            built = build()
            self.misses += 1
            if self.enabled:
                try:
                    value, hit = keep(built)
                    self._entries[k] = value
                    self._new.add(k)
                except Exception:  # noqa: BLE001 - not storable here: the store is off, compile as before
                    self.enabled = False
                    hit = None
            if hit is None:
                hit = built if finish is None else finish(built)
        self._built[k] = hit
        return hit

    # -- what the scanner asks for -----------------------------------------------------------------
    def compiled(self, source: str, parse: Callable[[], Any], kind: str = "re") -> Any:
        """The `re` pattern of `source` (compiled from `parse()`, an sre parse tree, on a miss);
        `kind`: another pattern made from the same source (a rule's run of possible characters)."""
        def keep(parsed):
            stored = _stored(program(parsed))
            return stored, from_stored(stored)
        return self._get(kind, source, from_stored, parse, keep, _compile_parsed)

    def posix(self, source: str) -> regex.Pattern:
        """`regex.compile("(?p)" + source)`: POSIX (leftmost-longest) matching."""
        def keep(pattern):
            return pickle.dumps(pattern, protocol=pickle.HIGHEST_PROTOCOL), pattern
        return self._get("posix", source, pickle.loads, lambda: regex.compile("(?p)" + source), keep)

    def analysis(self, source: str, analyse: Callable[[], tuple]) -> tuple:
        """A rule's analysis (`analyse()` on a miss): a tuple of plain values and sre constants."""
        def keep(value):
            return _dumps(value), value
        return self._get("analysis", source, pickle.loads, analyse, keep)

    # -- writing --------------------------------------------------------------------------------
    def save(self) -> None:
        """Write the entries made in this process, merged with what the file holds now (no-op when
        nothing is new). A cache that cannot be written leaves the store as it is (nothing is lost:
        the next process compiles again)."""
        if not self._new or not self.enabled:
            return
        with self._lock:
            new = {k: self._entries[k] for k in self._new}
            self._new = set()
            path = self.path()
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with folder_lock(path.parent):
                    merged = self._read_unlocked(path)
                    merged.update(new)
                    reuse.write_artefact(path, _dumps(merged), self.key(), extra={
                        "how": "written by vlgap's PTB tokenizer after compiling its patterns; delete it to "
                               "recompile (same results)", "entries": len(merged)})
            except Exception:  # noqa: BLE001 - an unwritable cache: compile again next time
                self.enabled = False

    def _read_unlocked(self, path: Path) -> dict:
        data = reuse.read_verified(path, self.key(), what="compiled tokenizer patterns")
        entries = pickle.loads(data) if data else {}
        return entries if isinstance(entries, dict) else {}


@lru_cache(maxsize=None)
def _code_digest() -> str:
    """sha256 of the modules whose code makes the stored values (rules' parse and analysis, compiling)."""
    h = hashlib.sha256()
    for name in ("_ptb_rules.py", "_ptb_regex.py", "_ptb_store.py"):
        h.update((Path(__file__).parent / name).read_bytes())
    return h.hexdigest()[:16]


def _dumps(value: Any) -> bytes:
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    p.dispatch_table = {type(sre_c.LITERAL): _reduce_constant}
    p.dump(value)
    return buf.getvalue()


#: the store the scanner uses (tests point `folder` elsewhere or turn it off)
STORE = PatternStore()
