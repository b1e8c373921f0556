"""Analysis of parsed regexes (the standard library's sre trees) for the PTB scanner's rules.

What each rule's parsed pattern says about its matches: the characters that can start one
(`_first_chars`, as bisection tables in `_FirstChars`), a character every match holds
(`_required_chars`), every character a match may hold (`_possible_chars`), and the compilation of
parsed patterns with each large character class's charset built once (`_compile_parsed`).
"""
from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate
from re import _compiler as sre_compile, _constants as sre_c, _parser as sre_parse

#: ends tried by `Rule.longest` before it takes the POSIX pattern instead
SCAN_SPAN = 48


def _possible_chars(parsed):
    """One class item (IN) holding every character some match of the parsed regex may contain."""
    positive: list = []
    excluded: list[set[int]] = []  # per negated test, the characters it refuses

    def walk(seq):
        for op, av in seq:
            if op is sre_c.LITERAL:
                positive.append((op, av))
            elif op is sre_c.NOT_LITERAL:
                excluded.append({av})
            elif op is sre_c.IN:
                if av and av[0][0] is sre_c.NEGATE:
                    refused: set[int] = set()
                    for o, a in av[1:]:
                        if o is sre_c.LITERAL:
                            refused.add(a)
                        elif o is sre_c.RANGE and a[1] - a[0] < 4096:
                            refused.update(range(a[0], a[1] + 1))
                        else:  # a category or a large range: refuse nothing (a looser bound)
                            refused = set()
                            break
                    excluded.append(refused)
                else:
                    positive.extend(av)
            elif op is sre_c.ANY:
                excluded.append(set())
            elif op is sre_c.SUBPATTERN:
                walk(av[-1])
            elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT):
                walk(av[2])
            elif op is sre_c.BRANCH:
                for alt in av[1]:
                    walk(alt)
            else:  # pragma: no cover - an unexpected node: anything may occur
                excluded.append(set())

    walk(parsed.data)
    if not excluded:
        return (sre_c.IN, positive)
    # a negated test admits all but its refused characters: the union admits all but those every
    # negated test refuses and no positive test admits
    refused = set.intersection(*excluded)
    if refused and positive:
        admitted = _compile_parsed(sre_parse.SubPattern(parsed.state, [(sre_c.IN, positive)]))
        refused = {c for c in refused if admitted.fullmatch(chr(c)) is None}
    return (sre_c.IN, [(sre_c.NEGATE, None)] + [(sre_c.LITERAL, c) for c in sorted(refused)])


# The rules repeat a few very large Unicode classes (letters, digits) many times; the standard
# compiler rebuilds each occurrence's charset (most of a prefilter's compile time). The charset it
# builds is a pure function of the class, so it is memoised while the rules' prefilters compile.
_charsets: dict = {}
_plain_optimize_charset = getattr(sre_compile, "_optimize_charset", None)


def _memo_optimize_charset(charset, iscased=None, fixup=None, fixes=None):
    _plain = _plain_optimize_charset
    try:
        key = (tuple((op, tuple(av) if av.__class__ is list else av) for op, av in charset),
               iscased, fixup, id(fixes))
        hit = _charsets.get(key)
    except TypeError:  # pragma: no cover - an unhashable class item: compile it plainly
        return _plain(charset, iscased, fixup, fixes)
    if hit is None:
        hit = _charsets[key] = _plain(charset, iscased, fixup, fixes)
    return list(hit[0]), hit[1]


def _compile_parsed(parsed) -> re.Pattern:
    """sre_compile.compile(parsed), each distinct character class's charset built once."""
    return _with_charset_memo(sre_compile.compile, parsed)


def program(parsed) -> tuple:
    """What `sre_compile.compile(parsed)` hands `_sre.compile` after the pattern text (None for a
    parsed pattern), as plain values (flags, code, groups, groupindex, indexgroup): `_sre.compile(None,
    *program(parsed))` is `_compile_parsed(parsed)` (Python 3.11 to 3.13 compile this way; the tests
    compare both). Kept by _ptb_store between processes."""
    code = _with_charset_memo(sre_compile._code, parsed, 0)
    state = parsed.state
    indexgroup: list = [None] * state.groups
    for name, i in state.groupdict.items():
        indexgroup[i] = name
    return state.flags, [int(c) for c in code], state.groups - 1, dict(state.groupdict), tuple(indexgroup)


def _with_charset_memo(fn, *args):
    plain = _plain_optimize_charset
    if plain is None or getattr(sre_compile, "_optimize_charset", None) is not plain:  # pragma: no cover
        # (a Python whose compiler has no such step, or a compile already under way in another thread)
        return fn(*args)
    sre_compile._optimize_charset = _memo_optimize_charset
    try:
        return fn(*args)
    finally:
        sre_compile._optimize_charset = plain


def _required_chars(seq) -> set[str]:
    """Characters that occur in every string the parsed regex matches."""
    out: set[str] = set()
    for op, av in seq:
        if op is sre_c.LITERAL:
            out.add(chr(av))
        elif op is sre_c.SUBPATTERN:
            out |= _required_chars(av[-1])
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT) and av[0] >= 1:
            out |= _required_chars(av[2])
        elif op is sre_c.BRANCH:
            alts = [_required_chars(alt) for alt in av[1]]
            out |= set.intersection(*alts) if alts else set()
    return out


# -- which rules can start with a given character (parsed from the rule's regex) -----------------

def _first_chars(seq) -> list:
    tests: list = []
    for op, av in seq:
        found, nullable = _first_of(op, av)
        tests += found
        if not nullable:
            return tests
    return tests + [(sre_c.ANY, None)]  # a rule that can match "" could start anywhere


def _first_of(op, av) -> tuple[list, bool]:
    if op in (sre_c.LITERAL, sre_c.NOT_LITERAL, sre_c.IN, sre_c.ANY):
        return [(op, av)], False
    if op is sre_c.BRANCH:
        tests, nullable = [], False
        for alt in av[1]:
            found = _first_chars(alt)
            nullable |= bool(found) and found[-1] == (sre_c.ANY, None) and not alt
            tests += found
        return tests, nullable
    if op is sre_c.SUBPATTERN:
        found = _first_chars(av[-1])
        return found, False
    if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT):
        lo, _hi, sub = av
        return _first_chars(sub), lo == 0
    return [(sre_c.ANY, None)], True  # anything unexpected: assume it can start anywhere


_CATEGORY = {sre_c.CATEGORY_DIGIT: re.compile(r"\d"), sre_c.CATEGORY_NOT_DIGIT: re.compile(r"\D"),
             sre_c.CATEGORY_SPACE: re.compile(r"\s"), sre_c.CATEGORY_NOT_SPACE: re.compile(r"\S"),
             sre_c.CATEGORY_WORD: re.compile(r"\w"), sre_c.CATEGORY_NOT_WORD: re.compile(r"\W")}


class _FirstChars:
    """The characters a rule's match can start with (from `_first_chars`), as sorted code point
    ranges searched by bisection, plus the few tests that are not plain ranges."""

    def __init__(self, tests: list):
        ranges, self.others = [], []
        for op, av in tests:
            if op is sre_c.LITERAL:
                ranges.append((av, av))
            elif op is sre_c.IN and all(o in (sre_c.LITERAL, sre_c.RANGE) for o, _ in av):
                ranges.extend((a, a) if o is sre_c.LITERAL else a for o, a in av)
            else:  # ANY, NOT_LITERAL, negated classes, categories
                self.others.append((op, av))
        ranges.sort()
        self.lows = [lo for lo, _ in ranges]
        self.reach = list(accumulate((hi for _, hi in ranges), max))  # highest end of the ranges so far

    def __contains__(self, ch: str) -> bool:
        cp = ord(ch)
        i = bisect_right(self.lows, cp) - 1
        return (i >= 0 and self.reach[i] >= cp) or (bool(self.others) and _starts(self.others, ch))


def _starts(tests: list, ch: str) -> bool:
    cp = ord(ch)
    for op, av in tests:
        if op is sre_c.ANY:
            return True
        if op is sre_c.LITERAL:
            if cp == av:
                return True
        elif op is sre_c.NOT_LITERAL:
            if cp != av:
                return True
        else:  # IN: a character class
            negate = hit = False
            for cop, cav in av:  # (NEGATE, if there, comes first)
                if cop is sre_c.NEGATE:
                    negate = True
                elif cop is sre_c.LITERAL:
                    hit = cp == cav
                elif cop is sre_c.RANGE:
                    hit = cav[0] <= cp <= cav[1]
                elif cop is sre_c.CATEGORY:
                    hit = bool(_CATEGORY[cav].match(ch))
                else:  # pragma: no cover - unknown class item: be conservative
                    hit = True
                if hit:
                    break
            if hit != negate:
                return True
    return False
