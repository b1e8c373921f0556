"""What a valid value of a CLI option is: the constraint objects that vlgap.cli.declarations maps every
option of every command to (in the spirit of scikit-learn's `validate_params` and its constraint classes).

Each constraint says three things, once:
- `types`: the Python annotations of the typer parameter it applies to (tests/test_cli_common.py checks that
  a declaration fits its option: a `Count` on an `int`, a path kind on a `Path`);
- `check(value, label, values)`: the value, canonical, or a one-line `VlgapError` naming the option (`label`:
  "--bootstrap", or an argument's "MANIFEST"); `values` holds the command's other values, for a check that
  depends on them (a memory estimate: a batch of `--batch-size` frames at `--image-size` px);
- `invalid(tmp)`: values of each kind this constraint refuses (negative, zero, huge, wrong type, a missing path,
  a file for a folder...), as typed on a command line; `valid(tmp)`: one value it accepts. The common CLI test
  tries every invalid value on every option, so a new option is tested the moment it is declared.

The checks reuse the one vocabulary of messages: vlgap.counts (counts, probabilities, positive numbers,
memory estimates), vlgap.paths (path kinds, UTF-8 input) and the parsers of the API (devices, frame samplings,
temporal pooling...).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from vlgap.errors import VlgapError

#: numbers typed where a count is expected, and text where a number is
WRONG_INT, WRONG_FLOAT = "1.5x", "abc"
#: far past every declared maximum
HUGE = 10 ** 15


def _named(label: str, err: VlgapError) -> VlgapError:
    """`err`, its message starting with the option's label when the parser's message does not name it."""
    msg = str(err)
    return err if msg.startswith(label) or label in msg.split(":")[0] else VlgapError(f"{label}: {msg}")


class Constraint:
    """One option's declaration (see the module docstring)."""

    types: tuple = (str,)

    def check(self, value: Any, label: str, values: dict) -> Any:
        return value

    def check_joint(self, value: Any, label: str, values: dict) -> None:
        """What depends on the command's other values too (a memory estimate), run once every value passed
        `check`, so a bad value is named by its own option first."""

    def invalid(self, tmp: Path) -> list[tuple[str, str]]:
        return []

    def valid(self, tmp: Path) -> str:
        return "x"


@dataclass
class Flag(Constraint):
    """An on/off flag (--json, --force): nothing to check."""

    types: tuple = (bool,)


@dataclass
class Count(Constraint):
    """An integer in [minimum, maximum] (maximum None: unbounded above). `memory(value, values)` returns
    (bytes, what) for a size that multiplies into an allocation; it is checked against
    vlgap.counts.MAX_ALLOCATION_BYTES before the maximum, so the message says how much memory it would take.
    `api`: the API's name of the value, shown beside the flag ("--bootstrap (n_bootstrap)=-1")."""

    minimum: int = 1
    maximum: Optional[int] = None
    api: Optional[str] = None
    memory: Optional[Callable[[int, dict], Optional[tuple[int, str]]]] = None
    custom: Optional[Callable[[int, dict], None]] = None
    types: tuple = (int,)

    def check(self, value, label, values):
        if value is None:
            return None
        from vlgap.counts import check_count

        name = self.api or label.lstrip("-").replace("-", "_")
        default = values.get("_defaults", {}).get(values.get("_name"))
        example = default if isinstance(default, int) and not isinstance(default, bool) and \
            default >= max(self.minimum, 1) else max(self.minimum, 1)
        value = check_count(name, value, self.minimum, flag=label, example=example)
        if self.maximum is not None and value > self.maximum:
            raise VlgapError(f"{label}={value!r}: at most {self.maximum:,}")
        return value

    def check_joint(self, value, label, values):
        if value is None:
            return
        if self.custom is not None:
            self.custom(int(value), values)
        if self.memory is not None:
            from vlgap.counts import check_allocation

            est = self.memory(int(value), values)
            if est is not None:
                check_allocation(label, *est)

    def invalid(self, tmp):
        out = [("negative", str(min(-1, self.minimum - 1)))]
        if self.minimum >= 1:
            out.append(("zero", "0"))
        if self.maximum is not None or self.memory is not None or self.custom is not None:
            out.append(("huge", str(HUGE)))
        out.append(("wrong type", WRONG_INT))
        return out

    def valid(self, tmp):
        return str(max(self.minimum, 1) if self.maximum is None else min(max(self.minimum, 1), self.maximum))


@dataclass
class Real(Constraint):
    """A finite number in (low, high) (`closed`: [low, high]); None: no bound on that side.
    `Real(0, 1)` is a probability; `Real(0)` a positive number (learning rate, temperature)."""

    low: Optional[float] = None
    high: Optional[float] = None
    closed: bool = False
    example: float = 0.5
    types: tuple = (float,)

    def check(self, value, label, values):
        if value is None:
            return None
        from vlgap.counts import check_positive, check_probability

        if self.low == 0 and self.high == 1 and not self.closed:
            return check_probability(label.lstrip("-").replace("-", "_"), value, flag=label, example=self.example)
        if self.low == 0 and self.high is None and not self.closed:
            return check_positive(label.lstrip("-").replace("-", "_"), value, flag=label, example=self.example)
        v = float(value)
        lo_ok = self.low is None or (v >= self.low if self.closed else v > self.low)
        hi_ok = self.high is None or (v <= self.high if self.closed else v < self.high)
        if not (math.isfinite(v) and lo_ok and hi_ok):
            raise VlgapError(f"{label}={value!r}: need a number in {self._range()}, e.g. {self.example:g}")
        return v

    def _range(self) -> str:
        lo = "-inf" if self.low is None else f"{self.low:g}"
        hi = "inf" if self.high is None else f"{self.high:g}"
        return ("[" if self.closed and self.low is not None else "(") + f"{lo}, {hi}" + (
            "]" if self.closed and self.high is not None else ")")

    def invalid(self, tmp):
        out = [("wrong type", WRONG_FLOAT), ("not finite", "nan")]
        if self.low is not None:
            out.append(("negative" if self.low >= 0 else "too small", str(self.low - 1)))
            if not self.closed:
                out.append(("zero" if self.low == 0 else "at the bound", f"{self.low:g}"))
        if self.high is not None:
            out.append(("huge", str(self.high + 1)))
            if not self.closed:
                out.append(("at the bound", f"{self.high:g}"))
        return out

    def valid(self, tmp):
        return f"{self.example:g}"


@dataclass
class Choice(Constraint):
    """One of `values` (a tuple, or a callable returning one, for vocabularies the API holds); `fold`
    canonicalises the text first (case, '_' for '-')."""

    values: Any = ()
    fold: Optional[Callable[[str], str]] = None
    multiple: bool = False  # a comma list of choices
    types: tuple = (str,)

    def options(self) -> tuple:
        return tuple(self.values() if callable(self.values) else self.values)

    def check(self, value, label, values):
        if value is None:
            return None
        allowed = self.options()
        items = [s.strip() for s in str(value).split(",") if s.strip()] if self.multiple else [str(value)]
        bad = [s for s in items if (self.fold(s) if self.fold else s) not in allowed] or ([] if items else [""])
        if bad:
            raise VlgapError(f"{label} {bad[0]!r}: choose " + ("from" if self.multiple else "one of") + " "
                             + " | ".join(allowed))
        folded = [self.fold(s) if self.fold else s for s in items]
        twice = next((s for i, s in enumerate(folded) if s in folded[:i]), None)
        if twice is not None:
            raise VlgapError(f"{label} {value!r}: {twice!r} is given twice; name each once")
        return value

    def invalid(self, tmp):
        out = [("not a choice", "bogus-choice")]
        if self.multiple:
            first = self.options()[0]
            out.append(("repeated", f"{first},{first}"))
        return out

    def valid(self, tmp):
        return self.options()[0]


@dataclass
class Parsed(Constraint):
    """Text the API's own parser reads (`parse(value, label, values)` raises VlgapError on a bad value):
    devices, frame samplings, comma lists of counts, name=value pairs. `bad`: invalid examples
    [(kind, text)]; `good`: one valid text."""

    parse: Callable[[Any, str, dict], Any] = None
    bad: Sequence[tuple[str, str]] = ()
    good: str = "x"
    types: tuple = (str,)

    def check(self, value, label, values):
        if value is None:
            return None
        try:
            self.parse(value, label, values)
        except VlgapError as err:
            raise _named(label, err) from None
        return value

    def invalid(self, tmp):
        return list(self.bad)

    def valid(self, tmp):
        return self.good


@dataclass
class Text(Constraint):
    """Free text the command passes on as it is (an encoder spec, a hub id, a caption template, a URL):
    only an empty value is refused here; what it names is checked by the API that resolves it."""

    empty_ok: bool = False
    types: tuple = (str,)

    def check(self, value, label, values):
        if value is not None and not self.empty_ok and not str(value).strip():
            raise VlgapError(f"{label}: empty; give a value (see --help)")
        return value

    def invalid(self, tmp):
        return [] if self.empty_ok else [("empty", "")]


# ------------------------------------------------------------------------------------------------
# paths
# ------------------------------------------------------------------------------------------------

#: suffixes of files that are not text (features, checkpoints, archives, media)
BINARY_SUFFIXES = frozenset({".npy", ".npz", ".pt", ".pth", ".safetensors", ".bin", ".gguf", ".jar", ".zip", ".gz",
                             ".mp4", ".avi", ".mkv", ".webm", ".png", ".jpg", ".jpeg", ".pkl", ".ckpt"})


def _utf8_bytes(tmp: Path, name: str) -> Path:
    p = tmp / name
    p.write_bytes("first line\ncaf\u00e9\n".encode("latin-1"))
    return p


def _a_folder(tmp: Path) -> Path:
    d = tmp / "a-folder"
    d.mkdir(exist_ok=True)
    return d


def _a_file(tmp: Path, name: str = "a-file.txt") -> Path:
    p = tmp / name
    if not p.exists():
        p.write_text("x\n")
    return p


#: the folder every "read-only" invalid value lies in (the common test makes vlgap.paths see it unwritable,
#: which also holds for root, whom a chmod does not stop)
READ_ONLY = "read-only"


def read_only_folder(tmp: Path) -> Path:
    d = tmp / READ_ONLY
    d.mkdir(exist_ok=True)
    return d


def special_paths(tmp: Path) -> list[tuple[str, str]]:
    """Paths no output may replace (vlgap.io_utils.output_target): a named pipe and a loop of symbolic
    links made in `tmp`, and the full device /dev/full where the system has it (a command that wrote
    there would replace the device with a file: only the door's refusal keeps it)."""
    import os

    out = []
    fifo = tmp / "a-fifo"
    if hasattr(os, "mkfifo"):
        if not fifo.exists():
            os.mkfifo(fifo)
        out.append(("special file", str(fifo)))
    loop = tmp / "a-loop"
    if not loop.is_symlink():
        (tmp / "a-loop-2").symlink_to(loop)
        loop.symlink_to(tmp / "a-loop-2")
    out.append(("symlink loop", str(loop)))
    if Path("/dev/full").exists():
        out.append(("full device", "/dev/full"))
    return out


@dataclass
class InputFile(Constraint):
    """A file that must exist (a folder is "is a folder, expected a file"). `text`: it is read as text, so its
    bytes must be UTF-8 (True), never (False), or unless its suffix is a binary one ("auto": feature files or
    captions). `sample`: the suffix of the valid sample the common test writes."""

    text: Any = True
    sample: str = ".txt"
    sample_text: str = "x\n"
    types: tuple = (Path,)

    def _is_text(self, p: Path) -> bool:
        return self.text is True or (self.text == "auto" and p.suffix.lower() not in BINARY_SUFFIXES)

    def check(self, value, label, values):
        if value is None:
            return None
        from vlgap.paths import input_file, read_text_utf8

        p = input_file(value, label)
        if self._is_text(p):
            read_text_utf8(p, label)
        return value

    def invalid(self, tmp):
        out = [("missing path", str(tmp / "missing" / f"nope{self.sample}")),
               ("a folder for a file", str(_a_folder(tmp))), ("empty path", "")]
        if self.text:
            out.append(("not UTF-8", str(_utf8_bytes(tmp, "latin1" + (self.sample if self.text is True else ".txt")))))
        return out

    def valid(self, tmp):
        p = tmp / f"valid-input{self.sample}"
        p.write_text(self.sample_text)
        return str(p)


@dataclass
class InputFolder(Constraint):
    """A folder that must exist; `writable`: the command writes into it (a run folder it adds sections to)."""

    writable: bool = False
    types: tuple = (Path,)

    def check(self, value, label, values):
        if value is None:
            return None
        from vlgap.paths import input_folder, output_folder

        input_folder(value, label)
        if self.writable:
            output_folder(value, label)
        return value

    def invalid(self, tmp):
        out = [("missing path", str(tmp / "missing-folder")), ("a file for a folder", str(_a_file(tmp))),
               ("empty path", "")]
        if self.writable:
            out.append(("read-only path", str(read_only_folder(tmp))))
        return out

    def valid(self, tmp):
        d = tmp / "valid-folder"
        d.mkdir(exist_ok=True)
        return str(d)


@dataclass
class Output(Constraint):
    """Where a command writes: `kind` "file" or "folder" (or a callable (value, values) -> kind, for
    make-data real's .jsonl file or folder). The path, if it exists, must be of that kind, and it (or the
    nearest folder above it that exists) writable; nothing is created here."""

    kind: Any = "folder"
    types: tuple = (Path, str)

    def check(self, value, label, values):
        if value is None:
            return None
        from vlgap.paths import output_file, output_folder

        kind = self.kind(value, values) if callable(self.kind) else self.kind
        (output_file if kind == "file" else output_folder)(value, label)
        return value

    def invalid(self, tmp):
        kind = "folder" if callable(self.kind) else self.kind
        wrong = ("a folder for a file", str(_a_folder(tmp))) if kind == "file" else \
            ("a file for a folder", str(_a_file(tmp, "a-file.bin")))
        return [wrong, ("read-only path", str(read_only_folder(tmp) / "out")),
                ("below a file", str(_a_file(tmp, "a-file.bin") / "out")), *special_paths(tmp), ("empty path", "")]

    def valid(self, tmp):
        return str(tmp / "new-output")


@dataclass
class NamedFiles(Constraint):
    """Repeatable NAME=FILE values (--human-pred, cape scores' --captions) or, `name_optional`, plain FILEs
    too; each FILE an existing UTF-8 text file."""

    name_optional: bool = False
    types: tuple = (list, tuple)

    def check(self, value, label, values):
        from vlgap.paths import read_text_utf8

        for item in value or ():
            name, sep, file = str(item).rpartition("=")
            if not sep and not self.name_optional:
                raise VlgapError(f"{label} {item!r}: write NAME=FILE, e.g. {label} pe=captions.jsonl")
            read_text_utf8(file if sep else item, label)
        return value

    def invalid(self, tmp):
        return [("missing path", f"a={tmp / 'missing.txt'}"), ("a folder for a file", f"a={_a_folder(tmp)}"),
                ("not UTF-8", f"a={_utf8_bytes(tmp, 'latin1-named.txt')}")]

    def valid(self, tmp):
        return f"a={_a_file(tmp, 'named.csv')}"


@dataclass
class Repeated(Constraint):
    """A repeatable option (`--run A --run B`): each value checked by `each`."""

    each: Constraint = field(default_factory=Constraint)
    types: tuple = (list, tuple)

    def check(self, value, label, values):
        for item in value or ():
            self.each.check(item, label, values)
        return value

    def invalid(self, tmp):
        return self.each.invalid(tmp)

    def valid(self, tmp):
        return self.each.valid(tmp)


@dataclass
class Either(Constraint):
    """A literal word (`words`, e.g. "build") or a value of `other` (e.g. an input file)."""

    words: tuple = ()
    other: Constraint = field(default_factory=Constraint)
    types: tuple = (str, Path)

    def check(self, value, label, values):
        if value is None or str(value) in self.words:
            return value
        return self.other.check(value, label, values)

    def invalid(self, tmp):
        return self.other.invalid(tmp)

    def valid(self, tmp):
        return self.words[0]


def file_or_folder_by_suffix(suffixes: tuple[str, ...], when: Callable[[dict], bool] = lambda values: True):
    """A `kind` for `Output`: a file when the path ends in one of `suffixes` (and `when(values)`), else a folder."""

    def kind(value, values):
        return "file" if when(values) and Path(str(value)).suffix.lower() in suffixes else "folder"

    return kind

