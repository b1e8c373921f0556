"""Where an item's picture lies in a folder: the naming rules of `--images DIR` and `--image-pattern`.

Without a pattern, the picture of item ID is the first of these that exists in DIR:

    1. ID.jpg, ID.jpeg, ID.png, ID.webp (either case of the extension)  e.g. 391895.jpg, img3.png
    2. when ID is a whole number: its 12-digit zero-padded form          000000391895.jpg (COCO 2017)
    3. when ID is a whole number: COCO_<split>_<12 digits>.<ext>         COCO_val2014_000000391895.jpg
       (COCO 2014/2015: any split name; two splits holding the same number are an error)

With `--image-pattern`, only the pattern is tried: a Python format string whose one field is `id`,
extension included, relative to DIR: `{id}.jpg`, `{id:012d}.jpg`, `COCO_val2014_{id:012d}.jpg`,
`frames/{id}/0001.png`. A numeric format (`d`, `x`, ...) reads the id as a whole number ("391895" or
"000391895" alike); any other format uses the id as written. A picture not found is one error that
names the item, the folder and every name tried.
"""
from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Any

from vlgap.errors import BadItemError, VlgapError

EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp")
_EXT_TEXT = "<" + "|".join(e[1:] for e in EXTENSIONS) + ">"
_COCO_NAME = re.compile(r"COCO_([A-Za-z0-9]+)_([0-9]{12})(\.[A-Za-z]+)")
_NUMERIC_TYPES = set("bcdoxXn")
PATTERN_HELP = ("a Python format string with the field {id}, extension included, relative to the folder, e.g. "
                "'{id:012d}.jpg' or 'COCO_val2014_{id:012d}.jpg' ({id:012d}: the id as a 12-digit number)")


def check_pattern(pattern: str) -> list[tuple[str, str]]:
    """The (format spec, conversion) of each `{id...}` field of an --image-pattern; a one-line error if
    it is not one (see the module docstring)."""
    where = f"--image-pattern {pattern!r}"
    try:
        fields = [(name, spec or "", conv or "") for _, name, spec, conv in string.Formatter().parse(pattern)
                  if name is not None]
    except ValueError as err:
        raise VlgapError(f"{where} is not a format string ({err}); use {PATTERN_HELP}") from None
    if not fields:
        raise VlgapError(f"{where} has no {{id}} field; use {PATTERN_HELP}")
    bad = [name for name, _, _ in fields if name != "id"]
    if bad:
        raise VlgapError(f"{where}: field {{{bad[0]}}} is not known, the only field is {{id}}; use {PATTERN_HELP}")
    if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
        raise VlgapError(f"{where} must name a file inside the --images folder (no absolute path, no '..')")
    for _, spec, _ in fields:
        try:
            format(1 if spec[-1:] in _NUMERIC_TYPES else "1", spec)
        except ValueError as err:
            raise VlgapError(f"{where}: format {{id:{spec}}} is not valid ({err}); use {PATTERN_HELP}") from None
    return [(spec, conv) for _, spec, conv in fields]


class PictureFolder:
    """The pictures of a folder, found by item id (the naming rules above)."""

    def __init__(self, folder: str | Path, pattern: str | None = None):
        self.folder = Path(folder).expanduser()
        if not self.folder.is_dir():
            raise VlgapError(f"--images {str(self.folder)!r} is not a folder")
        self.pattern = pattern or None
        self.fields = check_pattern(self.pattern) if self.pattern else None
        self._coco: dict[int, list[Path]] | None = None

    def rules(self) -> list[str]:
        """The naming rules in the order they are tried (for messages and reports)."""
        if self.pattern:
            return [self.pattern]
        return [f"{{id}}.{_EXT_TEXT}", f"{{id:012d}}.{_EXT_TEXT}", f"COCO_<split>_{{id:012d}}.{_EXT_TEXT}"]

    def path(self, item: Any) -> Path:
        """The picture of `item`, or a BadItemError naming every name tried."""
        item = str(item)
        if self.pattern:
            name = self._format(item)
            path = self.folder / name
            if path.is_file():
                return path
            raise BadItemError(item, f"no picture {name} in {self.folder} (--image-pattern {self.pattern!r})")
        tried = [f"{item}.{_EXT_TEXT}"]
        found = self._with_extension(item)
        number = int(item) if item.isascii() and item.isdigit() else None
        if found is None and number is not None:
            padded = f"{number:012d}"
            tried.append(f"{padded}.{_EXT_TEXT}")
            found = self._with_extension(padded) if padded != item else None
            if found is None:
                tried.append(f"COCO_<split>_{padded}.{_EXT_TEXT}")
                found = self._coco_name(item, number)
        if found is None:
            raise BadItemError(item, f"no picture in {self.folder} (tried {', '.join(tried)}); name another "
                                     f"file layout with --image-pattern, e.g. 'COCO_val2014_{{id:012d}}.jpg'")
        return found

    def _with_extension(self, stem: str) -> Path | None:
        for ext in EXTENSIONS + tuple(e.upper() for e in EXTENSIONS):
            path = self.folder / f"{stem}{ext}"
            if path.is_file():
                return path
        return None

    def _coco_name(self, item: str, number: int) -> Path | None:
        if self._coco is None:  # one listing of the folder, however many items
            self._coco = {}
            for path in self.folder.glob("COCO_*"):
                mt = _COCO_NAME.fullmatch(path.name)
                if mt and mt.group(3).lower() in EXTENSIONS and path.is_file():
                    self._coco.setdefault(int(mt.group(2)), []).append(path)
        paths = self._coco.get(number, [])
        if len(paths) > 1:
            names = ", ".join(sorted(p.name for p in paths))
            raise BadItemError(item, f"several pictures in {self.folder} could be it ({names}); choose one "
                                     "with --image-pattern, e.g. 'COCO_val2014_{id:012d}.jpg'")
        return paths[0] if paths else None

    def _format(self, item: str) -> str:
        value: Any = item
        if any(spec[-1:] in _NUMERIC_TYPES for spec, _ in self.fields):
            if not (item.isascii() and item.isdigit()):
                raise BadItemError(item, f"--image-pattern {self.pattern!r} formats the id as a number, but "
                                         f"{item!r} is not a whole number; use {{id}} for ids as written")
            value = int(item)
        try:
            return self.pattern.format(id=value)
        except (ValueError, TypeError) as err:
            raise BadItemError(item, f"--image-pattern {self.pattern!r} cannot format this id ({err})") from None
