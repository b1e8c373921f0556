"""Pure-Python twin of coco-caption's tokenizer: Stanford PTBTokenizer 3.4.1 + punctuation removal.

pycocoevalcap runs `java edu.stanford.nlp.process.PTBTokenizer -preserveLines -lowerCase` from
stanford-corenlp-3.4.1.jar over all captions joined by newlines, then drops the tokens in
`PUNCTUATIONS`. This module reimplements that lexer (a JFlex scanner: longest match wins, the
earlier rule wins a tie, a trailing context `r1/r2` counts towards the match length but only `r1`
becomes the token) rule by rule, so `vlgap.captions.ptb_tokenize.ptb_tokenize(captions)` returns the
strings pycocoevalcap feeds its scorers, without starting a JVM. The rules themselves are in _ptb_rules; here is the
scanner: fast paths for common text that give what the full rule-by-rule scan gives, and a memo of
each distinct space-separated chunk's output, so a corpus is scanned about once per distinct word
(see "one blank-separated chunk at a time" below; the tests hold both to the full scan and the jar).
_ptb_lines assembles the lines of a whole list from those memos at once; Python's cyclic garbage
collector is paused meanwhile (vlgap.memory.collector_paused).

Faithful details worth knowing (they are what the jar does, not choices made here):
  - parentheses become "-lrb-"/"-rrb-" after lower-casing, so they survive the punctuation filter
    (which lists the upper-case forms); "[" and "{" likewise become "-lsb-" and "-lcb-";
  - fractions, phone numbers and SGML tags may hold a non-breaking space (U+00A0) inside one
    token: BLEU and CIDEr split on it (str.split()), ROUGE-L does not (str.split(" "));
  - "cannot", "gonna", "wanna", ... are split ("can not", "gon na"); "don't" -> "do n't";
  - characters the lexer does not know (emoji, most symbols outside the BMP) are deleted.

One deliberate difference: line-break characters inside a caption other than "\\n" (CR, VT, FF,
U+2028, U+2029) are read as spaces. pycocoevalcap only replaces "\\n", so the jar sees extra lines
and every later caption is paired with the wrong tokens; matching that would be matching a bug.
"""
from __future__ import annotations

import re
from functools import lru_cache
from itertools import filterfalse
from typing import Sequence


from vlgap.captions import _ptb_classes, _ptb_rules as _spec
from vlgap.captions._ptb_store import STORE
from vlgap.captions._ptb_text import _LONE_SURROGATE, _from_utf16_units, _java_lower, _to_utf16_units

#: the tokens pycocoevalcap's PTBTokenizer wrapper removes after tokenising (its PUNCTUATIONS list)
PUNCTUATIONS = frozenset(["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-",
                          ".", "?", "!", ",", ":", "-", "--", "...", ";"])

# Line breaks the jar would turn into extra lines (see module docstring); "\n" is replaced by
# pycocoevalcap itself. U+0085 is absent on purpose: the lexer reads it as an ellipsis.
_FOREIGN_LINE_BREAKS = str.maketrans({"\r": " ", "\x0b": " ", "\x0c": " ", "\u2028": " ", "\u2029": " "})


# a space or tab starts a run of the scanner's SPACE characters that nothing else can match
_BLANKS = re.compile(r"[ \t][ \t\xa0\u2000-\u200a\u3000]*")
# plain words, each followed by blanks (or by the line end), scanned in one go
_PLAIN_RUN = re.compile(r"(?:[A-Za-z][A-Za-z0-9]*(?:[ \t][ \t\xa0\u2000-\u200a\u3000]*|(?=\n)|\Z))+")
_ASSIMILATED = frozenset(["cannot", "gimme", "gonna", "gotta", "lemme", "wanna"])
_HAS_ASSIMILATION = re.compile(r"(?i)\b(?:cannot|gimme|gonna|gotta|lemme|wanna)\b")
# A plain word followed by something the full scan would split off in a fixed way, one pattern
# (first matching alternative wins; they exclude each other):
#   clw/clc  "dog's", "they're": {WORD}/{REDAUX}, then {REDAUX}/[^A-Za-z] (not at the very end, where
#            "'re" loses to the quote rule '/[A-Za-z][^ ...])
#   ntw/ntc  "isn't": {SWORD}/{SREDAUX}, then {SREDAUX}
#   hyp      "T-shirt", "black-and-white": one {HTHING}
#   pw(/pp)  a word before a character that no rule starting with a letter takes in (e-mail and URL
#            patterns exclude these too), or before one punctuation mark that ends the chunk ("dog.")
_WORD_SPECIAL = re.compile(
    r"(?P<clw>[A-Za-z][A-Za-z0-9]*)(?P<clc>'(?:[msdMSD]|[rR][eE]|[vV][eE]|[lL][lL]))(?=[ \t\n])"
    r"|(?P<ntw>[A-Za-z]*[A-MO-Za-mo-z])(?P<ntc>[nN]'[tT])(?=[ \t\n]|\Z)"
    r"|(?P<hyp>[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+)(?=[ \t\n]|\Z)"
    r"|(?P<pw>[A-Za-z][A-Za-z0-9]*)(?:(?=[()<>{}|\"])|(?P<pp>[,;:!?]|\.(?![ \t\xa0]*\.))(?=[ \t\n]|\Z))")
_ASCII_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _compile(source: str) -> re.Pattern:
    """re.compile(source) (the same code; no .pattern), each large character class parsed and built
    once (see _ptb_rules._parse and _ptb_regex._compile_parsed): these patterns hold the jar's
    digit and letter classes. Kept between processes by _ptb_store."""
    return STORE.compiled(source, lambda: _spec._parse(source))


@lru_cache(maxsize=None)
def _punctuation_shortcuts() -> dict[str, tuple[re.Pattern, str | None]]:
    """Common punctuation whose token is fixed unless the next characters could start a longer
    match (checked by each pattern's lookahead against the competing rules): char -> (pattern,
    token; None means the matched text itself)."""
    digit = f"(?:[{_spec.classes()['DIGIT_CLASS']}]|[\\u07c0-\\u07c9])"
    smiley_second = r"[\-o*'()DPdpO\\{@|\[\]]"
    return {
        ",": (_compile(f",(?!{digit})"), ","),                             # NUMBER ",5"
        ".": (_compile(f"\\.(?!\\.|[ \\xa0]\\.|{digit})"), "."),              # LDOTS, NUMBER ".5"
        ";": (re.compile(f";(?!{smiley_second})"), ";"),                   # SMILEY ";)"
        ":": (_compile(f":(?!{smiley_second}|{digit})"), ":"),             # SMILEY ":)", NUMBER ":30"
        "!": (re.compile(r"[?!]+"), None),
        "?": (re.compile(r"[?!]+"), None),
        "(": (re.compile(r"\((?![0-9\-^x=~<>'])"), "-LRB-"),              # PHONE "(555)", ASIANSMILEY "(^_^)"
        ")": (re.compile(r"\)"), "-RRB-"),
        '"': (re.compile('"(?![A-Za-z0-9$])'), "''"),                       # DBLQUOT/[A-Za-z0-9$] -> ``
        "'": (re.compile(r"'(?=[ \t\n]|\Z)"), "'"),                          # every other ' rule needs more
        "\u2026": (re.compile(r"\u2026(?=[ \t\n]|\Z)"), "..."),                # LIKELYURL could continue
        "-": (re.compile(r"-+(?=[ \t\n]|\Z)"), None),                          # HYPHENS; NUMBER, TBSPEC need more
    }


@lru_cache(maxsize=None)
def _digits_word() -> re.Pattern:
    """A run of ASCII digits (and letters after the first digit: "1990s") before one blank that is
    not followed by a digit (of any script: "5 \u0663/\u0664" is a fraction) or another space:
    NUMBER/THING; no fraction or phone number can continue it."""
    digit = f"[{_spec.classes()['DIGIT_CLASS']}\\u07c0-\\u07c9]"
    return _compile(f"[0-9][A-Za-z0-9]*(?=[ \\t](?![\\xa0 \\t]|{digit})|\\n|\\Z)")


_abbreviation_cache: dict[str, bool] = {}


@lru_cache(maxsize=None)
def _abbreviation_pattern() -> re.Pattern:
    m = _spec.macros()
    return _compile(f"(?:{m['ABBREV1']}|{m['ABBREV2']}|{m['ABBREV3']}|{m['ACRONYM1']})")


def _is_abbreviation(word_with_period: str) -> bool:
    """Whether "word." is one token or part of one (then the fast path must not split it)."""
    hit = _abbreviation_cache.get(word_with_period)
    if hit is None:
        hit = _abbreviation_pattern().fullmatch(word_with_period) is not None
        _abbreviation_cache[word_with_period] = hit
    return hit


def lex(text: str, end: int | None = None) -> list[str]:
    """Raw PTB tokens of `text[:end]` (before lower-casing and punctuation removal).

    `text` holds UTF-16 units (see `_to_utf16_units`); `text[end:]` is only read as trailing
    context, as the scanner sees the start of the next caption's line. A token "\\n" marks a line
    break."""
    out: list[str] = []
    n = len(text) if end is None else end
    _lex_range(text, 0, n, n, out)
    return out


def _lex_range(text: str, pos: int, n: int, stop: int, out: list[str], starts: list[int] | None = None) -> int:
    """Append the tokens the scanner reads from `pos` on to `out` until it has passed `stop` (it
    may run past it, never past the line end `n`); return where it stopped. With `starts`, also
    record every position where the scanner starts a match (token or not)."""
    _PUNCT = _punctuation_shortcuts()
    while pos < stop:
        # Fast paths, equivalent to the full scan (see the comments at the patterns): blanks, runs of
        # plain words, a plain word before punctuation. Assimilations ("gonna") take the full scan.
        if starts is not None:
            starts.append(pos)
        ch = text[pos]
        if ch == " " or ch == "\t":
            pos = _BLANKS.match(text, pos).end()
            continue
        shortcut = _PUNCT.get(ch)
        if shortcut is not None:
            mt = shortcut[0].match(text, pos)
            if mt is not None:
                tok = shortcut[1] or mt.group()
                if ch == "-" and 3 <= len(tok) <= 4:
                    tok = "--"  # the HYPHENS action
                out.append(tok)
                pos = mt.end()
                continue
        elif "0" <= ch <= "9":
            mt = _digits_word().match(text, pos)
            if mt is not None:
                out.append(mt.group())
                pos = mt.end()
                continue
        elif ch in _ASCII_LETTERS:
            mt = _PLAIN_RUN.match(text, pos)
            if mt is not None:
                # (a run stops at the caption's line break; the clamp is a safeguard for text[end:])
                run = mt.group() if mt.end() <= n else text[pos:n]
                if _HAS_ASSIMILATION.search(run) is None:
                    if starts is not None:
                        starts.extend(pos + b.start() for b in _BLANKS.finditer(run))
                        starts.extend(pos + w.start() for w in _ASCII_WORD.finditer(run))
                    out.extend(run.split())
                    pos += len(run)
                    continue
                for word in _ASCII_WORD.finditer(run):
                    if word.group().lower() in _ASSIMILATED:
                        break
                    if starts is not None:
                        starts.append(pos + word.start())
                    out.append(word.group())
                if word.start():
                    if starts is not None:
                        starts.extend(pos + b.start() for b in _BLANKS.finditer(run, 0, word.start()))
                    pos += word.start()  # the full scan takes the assimilation
                    continue
            else:
                mt = _WORD_SPECIAL.match(text, pos)
                if mt is not None:
                    kind = mt.lastgroup
                    if kind == "clc" or kind == "ntc":
                        first = mt.group(mt.re.groupindex[kind] - 1)
                        if first.lower() not in _ASSIMILATED:
                            out.append(first)
                            out.append(mt.group(kind))
                            if starts is not None:
                                starts.append(mt.start(kind))
                            pos = mt.end()
                            continue
                    elif kind == "hyp":
                        out.append(mt.group(kind))
                        pos = mt.end()
                        continue
                    else:
                        word = mt.group("pw")
                        punct = mt.group("pp")
                        if word.lower() not in _ASSIMILATED and (
                                punct is None or punct != "." or not _is_abbreviation(mt.group())):
                            out.append(word)
                            if punct is not None:
                                out.append(punct)
                                if starts is not None:
                                    starts.append(mt.start("pp"))
                            pos = mt.end()
                            continue
        # Full scan: every rule that can start here; the longest match wins, the earlier rule a tie.
        best_len = 0
        best_rule = None
        best_body = 0
        for rule in _spec.candidates(ch):
            if rule.max_len <= best_len:
                continue
            if rule.required is not None and text.find(rule.required, pos, pos + rule.max_len) < 0:
                continue
            mt = rule._prefilter.match(text, pos)  # (compiled by candidates())
            if mt is None:
                continue
            if not rule.greedy_is_longest:
                mt = rule.longest(text, pos, mt)
            total = mt.end() - pos
            if total > best_len:
                best_len, best_rule, best_body = total, rule, mt.end("b") - pos
        if best_rule is None:  # pragma: no cover - the last rule matches any character but "\n"
            pos += 1
            continue
        tok, pushback = best_rule.action(text[pos:pos + best_body])
        consumed = max(1, best_body - pushback)
        if tok is not None:
            out.append(tok)
        pos += consumed
    return pos


_NEEDS_CLEANING = re.compile("[\n\r\x0b\x0c\u2028\u2029\U00010000-\U0010ffff]")


def _clean(caption: str) -> str:
    if _NEEDS_CLEANING.search(caption) is None:
        return caption
    return _to_utf16_units(caption.replace("\n", " ").translate(_FOREIGN_LINE_BREAKS))


#: how far past the end of a caption the scanner may look (its longest trailing context is an
#: acronym, blank lines, a sentence-starting word and one more character)
_CONTEXT_CHARS = 64


_CONTEXT_BLANKS = (" \t\n\xa0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u3000\x0b\x0c"
                   "\x85\u2028\u2029\r")


def _following_text(lines: Sequence[str]) -> list[str]:
    """For each line, the text the scanner sees after it: "\\n" + the next lines, up to a bound."""
    out = [""] * len(lines)
    tail = ""
    for i in range(len(lines) - 1, -1, -1):
        out[i] = tail
        tail = "\n" + lines[i] + tail
        # blank runs (blank lines included) are trailing context too: keep them whole
        blank = len(tail) - len(tail.lstrip(_CONTEXT_BLANKS))
        tail = tail[:blank + _CONTEXT_CHARS]
    return out


def _following(lines: Sequence[str], i: int) -> str:
    """`_following_text(lines)[i]`, for one line: the next lines until the bound is reached (the
    bound of the whole rest is the bound of enough of it: each step only cuts past the bound)."""
    tail = ""
    for j in range(i + 1, len(lines)):
        tail += "\n" + lines[j]
        blank = len(tail) - len(tail.lstrip(_CONTEXT_BLANKS))
        if len(tail) >= blank + _CONTEXT_CHARS:
            break
    else:
        blank = len(tail) - len(tail.lstrip(_CONTEXT_BLANKS))
    return tail[:blank + _CONTEXT_CHARS]


def _tokenize_line_plain(line: str, context: str) -> str:
    """One line scanned as a whole, then pycocoevalcap's post-processing (the reference path)."""
    # (a caption holds no line break after _clean, so no "\n" token comes back)
    java_line = " ".join(lex(line + context, len(line)) if context else lex(line))
    if not java_line.isascii() and _LONE_SURROGATE.search(java_line):
        java_line = " ".join(_from_utf16_units(t) for t in java_line.split(" "))
    java_line = _java_lower(java_line)
    # pycocoevalcap's own post-processing, verbatim: rstrip, split on " ", drop punctuation
    return " ".join(w for w in java_line.rstrip().split(" ") if w not in PUNCTUATIONS)


# -- the same, one blank-separated chunk at a time, each distinct chunk scanned once -------------
#
# Captions repeat their words far more than their lines: the adversarial benchmark corpus has
# 454,000 chunks but 3,200 distinct ones. The scanner has no left context, so once it stands at the
# start of a chunk, the chunk's tokens depend only on the chunk and on what follows it. After a
# space or tab it always stands at the next chunk: only the blank-run rule (SPACES) can start at a
# blank, and it takes non-breaking and other spaces after it too. A chunk's tokens depend only on
# the kind of character that follows it (a blank, "\n" or the end of the text; space and tab are
# read alike by every rule that can end there) unless a match starting at one of the chunk's token
# starts can run across it. Only a few rules can: SGML tags with attributes, runs of blanks,
# abbreviations whose trailing context reads on ("U.S. The", "No. 5", "I. The"), and three whose
# match goes on only if the character after the blank is a digit or a period: phone numbers
# ("(555) 123-4567"), fractions ("3 1/2") and spaced ellipses (". . ."). At a line end only the
# abbreviations can (nothing else matches across "\n"). Such a chunk is scanned in place; that
# output is memoised with the next chunk when nothing can reach past it. The tests check all of
# this against the whole-line scan.

_MEMO_SIZE = 200_000
# per following character (" " for any blank, "\n", "" at the very end): chunk (after a blank) ->
# its output; or (output, characters after the blank that void it); or False (scan in place)
_memos: dict[str, dict] = {" ": {"": ""}, "\n": {"": ""}, "": {"": ""}}
# chunk + blanks + next chunk + following character -> (output of the first chunk scanned in
# place, how far the scan went past it: 0 or to the end of the next chunk)
_pair_memo: dict[str, tuple[str, int]] = {}
# chunk + what follows it -> its output there, for all lines at once (see _ptb_lines)
_joint_memo: dict[str, str] = {}
# characters of a blank run other than " " and "\t"
_RUN_BLANK_CHARS = "\xa0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u3000"
_RUN_BLANKS = frozenset(_RUN_BLANK_CHARS)
_SPACENL_CHARS = " \t\n\r\x0b\x0c\x85\u2028\u2029" + _RUN_BLANK_CHARS
# suffixes from which a crossing match may start (at a token start, fullmatch): always ...
_CROSSES = re.compile("<[^>]*|[\t\xa0\u2000-\u200a\u3000]+")
# ... or when a period follows the blank (LDOTS), or a digit (PHONE, FRAC; see _crosses_before_digit)
_CROSSES_BEFORE_PERIOD = re.compile(r"[.\xa0]*\.")


def _clear_memos() -> None:
    for memo in _memos.values():
        memo.clear()
        memo[""] = ""
    _pair_memo.clear()
    _joint_memo.clear()


@lru_cache(maxsize=None)
def _digits_and_period() -> frozenset[str]:
    """The scanner's digits (of every script) and the period."""
    chars = {"."}
    for item in _ptb_classes.DIGIT.split() + ["07C0-07C9"]:
        a, _, b = item.partition("-")
        chars.update(chr(c) for c in range(int(a, 16), int(b or a, 16) + 1))
    return frozenset(chars)


@lru_cache(maxsize=None)
def _crosses_before_digit() -> re.Pattern:
    """Chunk suffixes that a phone number ("(555) 123", "555 1234") or a fraction ("3 1/2")
    continues after a blank when a digit comes next."""
    digit = f"[{_spec.classes()['DIGIT_CLASS']}\\u07c0-\\u07c9]"
    return _compile(f"[0-9()+\\-\\xa0]*[0-9)]|{digit}{{1,4}}")


def _finish(tokens: list[str]) -> str | None:
    """pycocoevalcap's post-processing of some of a line's tokens, or None where it is not token by
    token (a token holding a space or ending in whitespace, which its rstrip/split would cut)."""
    words = []
    for t in tokens:
        if not t or " " in t or t[-1].isspace():
            return None
        if not t.isascii() and _LONE_SURROGATE.search(t):
            t = _from_utf16_units(t)
        t = _java_lower(t)
        if t not in PUNCTUATIONS:
            words.append(t)
    return " ".join(words)


def _chunk_entry(chunk: str, follower: str):
    """The memo entry of `chunk`, which follows a blank, when `follower` comes after it."""
    chunk = chunk.lstrip(_RUN_BLANK_CHARS)  # (the blank run before takes these)
    n = len(chunk)
    if not n:
        return ""
    if chunk.isascii() and chunk.isalpha() and chunk.lower() not in _ASSIMILATED:
        return chunk.lower()  # a plain word is one token (the fast path's _PLAIN_RUN)
    tokens: list[str] = []
    starts: list[int] = []
    if _lex_range(chunk + follower, 0, n, n, tokens, starts) != n:
        return False
    output = _finish(tokens)
    if output is None:
        return False
    voids = False
    last = chunk[-1]
    if last in _RUN_BLANKS:
        return False  # the blank run goes on after the blank
    if last in ".)" or last.isdigit() or not last.isascii() or "<" in chunk:
        for p in starts:
            # an abbreviation, maybe with the start of its trailing context ("I.\x85" + "\nThe")
            abbreviation = chunk[p:].rstrip(_SPACENL_CHARS)
            if abbreviation[-1:] == "." and _is_abbreviation(abbreviation):
                return False
            if follower != " ":
                continue  # only abbreviations read across a line end
            if _CROSSES.fullmatch(chunk, p):
                return False
            if _crosses_before_digit().fullmatch(chunk, p) or _CROSSES_BEFORE_PERIOD.fullmatch(chunk, p):
                voids = True
    return (output, _digits_and_period()) if voids else output


def _tokenize_line(line: str, line_end: str, lines: Sequence[str], i: int) -> str:
    """`_tokenize_line_plain(line, _following(lines, i))` (line = lines[i]; line_end: "\\n", or ""
    for the last line), assembled from per-chunk outputs where possible."""
    if line[:1] not in _RUN_BLANKS:
        # every chunk known and read on its own: a few C-level calls
        parts = (line.replace("\t", " ") if "\t" in line else line).split(" ")
        last = parts.pop()
        memo, end_memo = _memos[" "], _memos[line_end]
        try:
            tail = end_memo[last]
            head = " ".join(map(memo.__getitem__, parts))
        except KeyError:  # a chunk not seen yet: its entry (a function of the chunk and its follower)
            for part in filterfalse(memo.__contains__, parts):
                memo[part] = _chunk_entry(part, " ")
            if last not in end_memo:
                end_memo[last] = _chunk_entry(last, line_end)
            tail = end_memo[last]
            head = None
        except TypeError:  # a chunk whose output depends on what follows, or not alone
            head = None
        if tail.__class__ is tuple:
            tail = tail[0]  # (nothing follows the line's last chunk in the line)
        if tail is not False:
            if head is None:
                outs = list(map(memo.__getitem__, parts))
                try:
                    head = " ".join(outs)
                except TypeError:
                    joined = None if "\t" in line else _resolve_followers(outs, parts, last, tail, lines, i)
                    if joined is not None:
                        return joined
                    return _tokenize_chunks(line, _following(lines, i))
            joined = f"{head} {tail}"
            if "  " in joined or joined[0] == " " or joined[-1] == " ":  # (chunks without tokens)
                joined = " ".join(filter(None, joined.split(" ")))
            return joined
    return _tokenize_chunks(line, _following(lines, i))


def _resolve_followers(outs: list, parts: list[str], last: str, tail: str, lines: Sequence[str], li: int) -> str | None:
    """The output of line `li` (parts + [last], no tab) from the memo entries `outs` of `parts` and
    `tail` of `last`, deciding as `_tokenize_chunks` does: an (output, voiding characters) entry
    stands when the character after its blank (the next chunk's first) does not void it; a chunk
    scanned in place (False) is taken from the pair memo (scanned and memoised as there when not
    seen yet), with the next chunk when the scan went on through it. None where `_tokenize_chunks`
    must scan (a scan that cannot be memoised)."""
    chunks = parts + [last]
    n_parts = len(parts)
    line_end = "\n" if li + 1 < len(lines) else ""
    context = None
    frags = []
    done = 0  # outs[:done] are in frags
    for i in [k for k, frag in enumerate(outs) if frag.__class__ is not str]:
        if i < done:
            continue  # (taken with the chunk before)
        frags.extend(outs[done:i])
        frag = outs[i]
        done = i + 1
        if frag is not False and chunks[i + 1][:1] not in frag[1]:
            frags.append(frag[0])
            continue
        # scanned in place: the scanner stands at this chunk (nothing before reached into it)
        part = chunks[i]
        if part[0] in _RUN_BLANKS:
            return None
        j = i + 1
        while j <= n_parts and not chunks[j]:
            j += 1
        if j > n_parts or not _can_pair(part, chunks[j]):
            return None
        key = " ".join(chunks[i:j + 1]) + (" " if j < n_parts else line_end)
        hit = _pair_memo.get(key)
        if hit is None:  # as _tokenize_chunks scans and memoises it
            line = lines[li]
            if context is None:
                context = _following(lines, li)
            start = len(" ".join(chunks[:i])) + (i > 0)
            end, e2 = start + len(part), len(" ".join(chunks[:j + 1]))
            tokens: list[str] = []
            pos = _lex_range(line + context, start, len(line), end, tokens)
            frag = _finish(tokens)
            if frag is None or (pos != end and pos != e2):
                return None
            hit = _pair_memo[key] = (frag, pos - end)
        frags.append(hit[0])
        if hit[1]:  # the scan took the next chunk too
            if j == n_parts:
                return " ".join(filter(None, " ".join(frags).split(" ")))
            done = j + 1
    frags.extend(outs[done:])
    frags.append(tail)
    return " ".join(filter(None, " ".join(frags).split(" ")))


def _can_pair(chunk: str, nxt: str) -> bool:
    """Whether the in-place scan of `chunk` is determined by itself, the blanks, the next chunk `nxt`
    and the character after it: no match starting in `chunk` can reach past them (see above). Only
    phone numbers and spaced ellipses cross more than one blank; and an abbreviation's trailing
    context reads on through a next chunk of line-break characters only ("A. \\x85 It")."""
    if "<" in chunk or "<" in nxt or chunk[-1] in _RUN_BLANKS or nxt[0] in _RUN_BLANKS or nxt[-1] in _RUN_BLANKS:
        return False
    if not nxt.strip(_SPACENL_CHARS):
        return False
    last = chunk[-1]
    if (last == ")" or (last != "." and last in _digits_and_period())) and _crosses_before_digit().fullmatch(nxt):
        return False
    return not (last == "." and _CROSSES_BEFORE_PERIOD.fullmatch(nxt))


def _tokenize_chunks(line: str, context: str) -> str:
    """The general case of `_tokenize_line`: chunk by chunk, scanning in place where needed."""
    parts = (line.replace("\t", " ") if "\t" in line else line).split(" ")
    n = len(line)
    line_end = context[:1]
    frags = []
    pos = start = 0
    for i, part in enumerate(parts):
        end = start + len(part)
        if part and end > pos:
            pair_key = None
            # does the scanner stand at this chunk (only blanks lie between pos and start)?
            if pos <= start and (i or part[0] not in _RUN_BLANKS):
                follower = " " if end < n else line_end
                memo = _memos[follower]
                frag = memo.get(part)
                if frag is None:
                    frag = memo[part] = _chunk_entry(part, follower)
                if frag.__class__ is tuple:
                    frag = frag[0] if end + 1 >= n or line[end + 1] not in frag[1] else False
                if frag is not False:
                    if frag:
                        frags.append(frag)
                    pos, start = end, end + 1
                    continue
                if part[0] in _RUN_BLANKS:  # the blank run before takes these
                    start = end - len(part.lstrip(_RUN_BLANK_CHARS))
                    part = line[start:end]
                pos = start
                j = i + 1
                while j < len(parts) and not parts[j]:
                    j += 1
                if j < len(parts) and _can_pair(part, parts[j]):
                    e2 = end + j - i + len(parts[j])
                    pair_key = line[start:e2] + (line[e2] if e2 < n else line_end)
                    hit = _pair_memo.get(pair_key)
                    if hit is not None:
                        if hit[0]:
                            frags.append(hit[0])
                        pos, start = end + hit[1], end + 1
                        continue
            # scan in place until past this chunk
            tokens: list[str] = []
            pos = _lex_range(line + context, pos, n, end, tokens)
            frag = _finish(tokens)
            if frag is None:
                return _tokenize_line_plain(line, context)
            if pair_key is not None and (pos == end or pos == e2):
                _pair_memo[pair_key] = (frag, pos - end)
            if frag:
                frags.append(frag)
        start = end + 1
    return " ".join(frags)

