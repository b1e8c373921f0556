"""Text helpers of the PTB tokenizer twin: UTF-16 units (the jar's strings) and Java's lower-casing."""
from __future__ import annotations

import regex

_NON_BMP = regex.compile("[\U00010000-\U0010ffff]")
_LONE_SURROGATE = regex.compile("[\ud800-\udfff]")


def _to_utf16_units(text: str) -> str:
    """Split characters above U+FFFF into surrogate pairs: the scanner counts UTF-16 units."""
    if not _NON_BMP.search(text):
        return text

    def pair(mt):
        cp = ord(mt.group()) - 0x10000
        return chr(0xD800 + (cp >> 10)) + chr(0xDC00 + (cp & 0x3FF))

    return _NON_BMP.sub(pair, text)


def _from_utf16_units(token: str) -> str:
    """Join surrogate pairs back; a half pair left in a token is written as "?" (Java's encoder)."""
    if not _LONE_SURROGATE.search(token):
        return token
    joined = token.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _LONE_SURROGATE.sub("?", joined)


def _java_lower(text: str) -> str:
    """String.toLowerCase(Locale.ENGLISH): as str.lower() except for capital sigma, which Java makes
    final (\u03c2) only when no cased letter follows it within the same word (digits included)."""
    if "\u03a3" not in text:
        return text.lower()
    out = []
    for m in _WORDISH.finditer(text):
        run = m.group()
        if "\u03a3" not in run:
            out.append(run.lower())
            continue
        chars = []
        for i, ch in enumerate(run):
            if ch != "\u03a3":
                chars.append(ch.lower())
                continue
            before = any(c.lower() != c.upper() for c in run[:i])
            after = any(c.lower() != c.upper() for c in run[i + 1:])
            chars.append("\u03c2" if before and not after else "\u03c3")
        out.append("".join(chars))
    return "".join(out)


# a "word" for Java's final-sigma test (its word BreakIterator): letters, digits and marks, also
# joined by a period, apostrophe or colon between them; anything else is a boundary
# (ideographs and kana are words of their own)
_W = r"(?:(?![\p{Han}\p{Hiragana}\p{Katakana}])[\p{L}\p{N}\p{M}])"
_WORDISH = regex.compile(rf"{_W}+(?:[.:'\u2019]{_W}+)*|[\s\S]")
