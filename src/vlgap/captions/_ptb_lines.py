"""The PTB tokenizer twin's line assembly for a whole list of captions at once, in a few C-level calls.

_ptb_core's `_tokenize_line` assembles a line from the memoised outputs of its blank-separated
chunks; for most chunks the output depends only on the chunk and on whether a blank or the line end
follows it. Here that is done for all lines together: the lines (all but the last) are joined with
"\\n " after each, tabs read as spaces (as `_tokenize_line` reads them), the text is split once on
spaces, and each chunk is looked up in one memo (`_joint_memo` in _ptb_core) whose keys also say
what follows the chunk:

    "chunk"        a blank follows, then anything but a digit or a period;
    "chunk\\x02"   a blank follows, then a digit or a period (`_BEFORE_DIGIT`, put in before the split);
    "chunk\\n"     the line ends.

A value is the chunk's output with its separator (" ", or "\\n" at a line end; nothing for a chunk
without tokens), so one join and one split on "\\n" give the lines. `_UNSETTLED` stands for an
output that depends on more than the key: a chunk scanned in place with the next one
(abbreviations before a capital, "No. 5", phone numbers, fractions, a period before a spaced
ellipsis). Those inside a line are settled chunk by chunk from the pair memo, as
`_resolve_followers` does (scanned in place and memoised on first sight); every line still holding
`_UNSETTLED`, every line `_tokenize_line` does not assemble from chunks (a blank run at its start),
a line holding a marker character itself, and the last line are made by `_tokenize_line`. So each
line gets exactly what `_tokenize_line` gives it (the tests hold both to the whole-line scan).
"""
from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate, repeat
from operator import add
from typing import Sequence

from vlgap.captions import _ptb_core as _ptb

#: stands for an output this memo cannot settle; never a character of a settled output (every output
#: holding it is made again line by line, so one that genuinely held it would only cost time)
_UNSETTLED = "\x00"
_BEFORE_DIGIT = "\x02"  # marks a blank followed by a digit or a period (see the module docstring)
# A chunk scanned in place with the next one (it holds no "<", see _can_pair) reads, of a next chunk
# that starts with a lower-case ASCII letter, that letter alone: what crosses a blank is a blank run,
# an SGML tag, a phone number or fraction (digits), a spaced ellipsis (a period), or a trailing
# context after an abbreviation, which reads one or two characters (SENTEND: a blank, a capital
# or "<"; ANY2: any two; ABBREV3/DIGIT: a digit) or a sentence starter (ACRONYM_FOLLOWERS, every
# one capitalised, case-sensitively, and followed by a blank or line break). So such pairs share one
# pair-memo entry, "a" for the next chunk; and those whose next chunk starts with a capital but not
# with a sentence starter share one, "X".
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


@lru_cache(maxsize=None)
def _followers() -> re.Pattern:
    """A chunk that begins with one of ACRONYM/FOLLOWER's sentence starters ("The", "It", ...; the
    first letter as written) and a blank or line break, or is one (a blank follows a chunk)."""
    m = _ptb._spec.macros()
    return _ptb._compile(f"{m['ACRONYM_FOLLOWERS']}(?:{m['SPACENL']}|\\Z)")


@lru_cache(maxsize=None)
def _voiding_chars() -> tuple[str, re.Pattern]:
    """The characters that void a (output, voiding characters) memo entry when they follow its
    blank (a digit of any script or a period): the ASCII ones, and a search for a space (not the one after a line's "\\n") followed by any of them."""
    chars = sorted(_ptb._digits_and_period())
    ascii_chars = "".join(c for c in chars if c.isascii())
    every = "".join(re.escape(c) for c in chars)
    return ascii_chars, _ptb._compile(f" (?<!\\n )(?=[{every}])")


def _mark_blanks_before_digits(text: str) -> str:
    """`text` (lines joined by "\\n ") with every space that a voiding character follows, but the
    one after a "\\n", preceded by `_BEFORE_DIGIT`."""
    ascii_chars, pattern = _voiding_chars()
    if not text.isascii():
        return pattern.sub(_BEFORE_DIGIT + " ", text)
    for ch in ascii_chars:  # (a few C-level passes over ASCII: cheaper than a regex stopping at every space)
        if " " + ch in text:
            text = text.replace(" " + ch, _BEFORE_DIGIT + " " + ch)
    return text.replace("\n" + _BEFORE_DIGIT, "\n") if "\n" + _BEFORE_DIGIT in text else text


def _joint_entry(key: str) -> str:
    """The output of the chunk in `key` where the key says what follows it, or `_UNSETTLED`."""
    last = key[-1:]
    if last == "\n":
        chunk, follower = key[:-1], "\n"
    elif last == _BEFORE_DIGIT:
        chunk, follower = key[:-1], " "
    else:
        chunk, follower = key, " "
    memo = _ptb._memos[follower]
    entry = memo.get(chunk)
    if entry is None:
        entry = memo[chunk] = _ptb._chunk_entry(chunk, follower)
    if entry is False:
        entry = _UNSETTLED
    elif entry.__class__ is tuple:
        # voided only by a digit or period after the blank (nothing follows at a line end)
        entry = _UNSETTLED if last == _BEFORE_DIGIT else entry[0]
    # each output carries its separator, so outputs without tokens leave no gap
    return entry + "\n" if follower == "\n" else entry + " " if entry else ""


def _indices(items: list, value) -> list[int]:
    """Where `value` occurs in `items` (list.index from each hit on: a C-level scan)."""
    out = []
    k = -1
    try:
        while True:
            k = items.index(value, k + 1)
            out.append(k)
    except ValueError:
        return out


def _settle_pairs(parts: list[str], outs: list[str], lines: Sequence[str], tabs: bool) -> set[int]:
    """Settle, in `outs`, the unsettled chunks that a blank follows in their line, as `_ptb._resolve_followers`
    does: the chunk scanned in place with the next chunk, its output (and whether the scan took the
    next chunk too) read from the pair memo, or scanned and memoised. Returns the lines this cannot
    settle (e.g. a chunk after a blank run, or a scan that cannot be memoised: those lines are
    made by `_tokenize_line`). `lines`: all lines, `parts` made from all but the last; `tabs`: whether
    they hold a tab."""
    hits = _indices(outs, _UNSETTLED + " ")
    if not hits:
        return set()
    body = lines[:-1]
    sizes = map(str.count, body, repeat(" "))  # (+ 1 each: the "\\n " after a line)
    if tabs:
        sizes = map(add, sizes, map(str.count, body, repeat("\t")))
    starts = list(accumulate(map(add, sizes, repeat(1)), initial=0))  # each line's first part
    pairs, blanks, can_pair = _ptb._pair_memo, _ptb._RUN_BLANKS, _ptb._can_pair
    bad: set[int] = set()
    taken = -1  # the last part an in-place scan took
    for k in hits:
        if k <= taken:
            continue
        line = bisect_right(starts, k) - 1
        chunk = parts[k].rstrip(_BEFORE_DIGIT)
        j = k + 1
        while parts[j] == "" or parts[j] == _BEFORE_DIGIT:
            j += 1
        nxt = parts[j]
        final = nxt[-1] == "\n"
        nxt = nxt[:-1] if final or nxt[-1] == _BEFORE_DIGIT else nxt
        if line in bad or chunk[0] in blanks or not nxt or not can_pair(chunk, nxt):
            bad.add(line)
            continue
        raw = body[line]
        before = " ".join(parts[starts[line]:k])  # the line's chunks before this one (and their markers)
        start = len(before) + (k > starts[line]) - before.count(_BEFORE_DIGIT)
        end = start + len(chunk)
        e2 = end + j - k + len(nxt)
        # (the pair memo's key holds the line's own blanks)
        if nxt[0] in _LOWER:  # the scan reads only the next chunk's first letter (see _LOWER)
            key = raw[start:end + j - k] + "a" + (raw[e2] if e2 < len(raw) else "\n")
        elif nxt[0] in _UPPER and _followers().match(nxt) is None:  # ... or that it is a capital
            key = raw[start:end + j - k] + "X" + (raw[e2] if e2 < len(raw) else "\n")
        else:
            key = raw[start:e2] + (raw[e2] if e2 < len(raw) else "\n")
        hit = pairs.get(key)
        if hit is None:  # scanned in place and memoised, as _resolve_followers does
            tokens: list[str] = []
            pos = _ptb._lex_range(raw + _ptb._following(lines, line), start, len(raw), end, tokens)
            frag = _ptb._finish(tokens)
            if frag is None or (pos != end and pos != e2):
                bad.add(line)
                continue
            hit = pairs[key] = (frag, pos - end)
        outs[k] = hit[0] + " " if hit[0] else ""
        if hit[1]:  # the scan took the next chunk too
            outs[j] = "\n" if final else ""
            taken = j
    return bad


def clean_lines(captions: Sequence[str]) -> list[str]:
    """`[_ptb._clean(c) for c in captions]`, done on all captions joined (the cleaning is character by
    character), so the captions that need none cost one search."""
    lines = list(captions)
    joined = "\x00".join(lines)
    if joined.isascii():
        if "\n" not in joined and "\r" not in joined and "\x0b" not in joined and "\x0c" not in joined:
            return lines
    elif _ptb._NEEDS_CLEANING.search(joined) is None:
        return lines
    if joined.count("\x00") != len(lines) - 1:  # (a caption holding U+0000: the joined text cannot be split back)
        return [_ptb._clean(c) for c in lines]
    for ch in "\n\r\x0b\x0c\u2028\u2029":
        if ch in joined:
            joined = joined.replace(ch, " ")
    if not joined.isascii() and _NON_BMP.search(joined) is not None:
        joined = _NON_BMP.sub(_surrogates, joined)  # (_to_utf16_units, by the standard library's faster scan)
    return joined.split("\x00")


_NON_BMP = re.compile("[\U00010000-\U0010ffff]")


def _surrogates(mt: re.Match) -> str:
    cp = ord(mt.group()) - 0x10000
    return chr(0xD800 + (cp >> 10)) + chr(0xDC00 + (cp & 0x3FF))


def tokenize_lines(lines: Sequence[str]) -> list[str]:
    """`[_ptb._tokenize_line(line, "\\n" or "" for the last, lines, i) for i, line in ...]` for lines
    cleaned by `clean_lines`, the common case assembled for all lines together (see above)."""
    n = len(lines)
    if n < 2:
        return [_ptb._tokenize_line(line, "", lines, i) for i, line in enumerate(lines)]
    body = lines[:-1]
    text = "\n ".join(body)
    redo: set[int] = set()
    if _UNSETTLED in text or _BEFORE_DIGIT in text:  # a marker in a caption itself: that line is made on its own
        redo.update(i for i, line in enumerate(body) if _UNSETTLED in line or _BEFORE_DIGIT in line)
    if _ptb._RUN_BLANKS.intersection(line[:1] for line in body):  # (not assembled from chunks)
        blanks = _ptb._RUN_BLANKS
        redo.update(i for i, line in enumerate(body) if line[:1] in blanks)
    tabs = "\t" in text
    text = _mark_blanks_before_digits(text.replace("\t", " ") if tabs else text) + "\n"
    parts = text.split(" ")
    memo = _ptb._joint_memo
    try:
        outs = list(map(memo.__getitem__, parts))
    except KeyError:
        for key in set(parts).difference(memo):
            memo[key] = _joint_entry(key)
        outs = list(map(memo.__getitem__, parts))
    if _UNSETTLED + " " in memo.values():
        redo.update(_settle_pairs(parts, outs, lines, tabs))
    joined = "".join(outs)
    if " \n" in joined:  # (a line's last chunk without tokens)
        joined = joined.replace(" \n", "\n")
    out = joined.split("\n")
    out.pop()  # (after the last line's "\n")
    if _UNSETTLED in joined:
        redo.update(i for i, line in enumerate(out) if _UNSETTLED in line)
    for i in redo:
        out[i] = _ptb._tokenize_line(lines[i], "\n", lines, i)
    out.append(_ptb._tokenize_line(lines[-1], "", lines, n - 1))
    return out

