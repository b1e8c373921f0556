"""The PTB tokenizer twin's all-lines assembly (_ptb_lines) against the line-by-line path and the
whole-line scan: markers in the captions themselves, blank runs at line starts, tabs next to
abbreviations, phone numbers and fractions, pairs seen first inside the assembly; the all-captions
cleaning against `_clean`; the shortcut patterns against the standard compiler; the paused collector."""
from __future__ import annotations

import gc
import random
import sys
from pathlib import Path

from vlgap.captions import _ptb_core as ptb, _ptb_lines
from vlgap.captions.ptb_tokenize import ptb_tokenize
from vlgap.memory import collector_paused

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "captions"))
from corpus import make_corpus, make_fuzz_lines  # noqa: E402

# pieces whose output depends on what follows them (abbreviations, numbers before fractions, phone
# numbers, periods before spaced ellipses), markers the assembly uses, and odd blanks
PIECES = ["Mr.", "Inc.", "U.S.", "p.m.", "No.", "Fig.", "etc.", "3", "1/2", "(555)", "123-4567", "dog.", ".",
          ". .", "The", "It", "a", "dog", "5", "\u0663", "\x00", "\x02", "a\x02", "\x02 5", "\xa0", "\xa0Dr.",
          "<b>", "\U0001f600", "x\u2028y", "e\rf", "", "cannot", "'s", "10:15", "1990s", "...", "\u2026"]
SEPARATORS = [" ", " ", " ", "  ", "\t", " \xa0", "\xa0 ", "\t\t", " \t "]


def _lines(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        pieces = [rng.choice(PIECES) for _ in range(rng.randint(0, 8))]
        seps = [rng.choice(SEPARATORS) for _ in pieces]
        line = "".join(p + s for p, s in zip(pieces, seps))
        out.append(line if rng.random() < 0.5 else line.rstrip())
    return out


def _one_by_one(captions: list[str]) -> list[str]:
    """The line-by-line path (`_tokenize_line` per line), every memo cleared first."""
    lines = [ptb._clean(c) for c in captions]
    ptb._clear_memos()
    return [ptb._tokenize_line(line, "\n" if i < len(lines) - 1 else "", lines, i) for i, line in enumerate(lines)]


def _whole_lines(captions: list[str]) -> list[str]:
    lines = [ptb._clean(c) for c in captions]
    return [ptb._tokenize_line_plain(line, ctx) for line, ctx in zip(lines, ptb._following_text(lines))]


def test_all_lines_assembly_equals_the_line_by_line_path():
    for seed in range(4):
        captions = _lines(1500, seed)
        expected = _one_by_one(captions)
        assert expected == _whole_lines(captions)
        ptb._clear_memos()
        cold = ptb_tokenize(captions)  # pairs and chunks first seen inside the assembly
        warm = ptb_tokenize(captions)  # every chunk and pair read from the memos
        bad = [(c, e, g) for c, e, g in zip(captions, expected, cold) if e != g]
        assert not bad, bad[:3]
        assert warm == expected


def test_all_lines_assembly_on_the_corpus_and_fuzz():
    refs, preds = make_corpus(1000, 5, seed=3, nasty=True)
    captions = [c for k in refs for c in refs[k]] + make_fuzz_lines(1000, seed=5)
    ptb._clear_memos()
    assert ptb_tokenize(captions) == _whole_lines(captions)


def test_a_next_chunk_of_line_breaks_is_read_through():
    """("A. \\x85 \\xa0It": the abbreviation's trailing context reads through U+0085 to "It"; the pair
    memo must not answer it with what "A. \\x85 x" gave.)"""
    captions = ["q A. \x85 x", "dog A. \x85 \xa0It . ++44", "z"]
    ptb._clear_memos()
    assert ptb_tokenize(captions) == _whole_lines(captions) == ["q a. x", "dog a it + +44", "z"]


def test_short_lists_and_markers():
    assert ptb_tokenize([]) == []
    assert ptb_tokenize(["Mr. Smith"]) == ["mr. smith"]
    assert ptb_tokenize(["a\x02 5 b", "c \x00 d", "e"]) == _whole_lines(["a\x02 5 b", "c \x00 d", "e"])
    assert ptb_tokenize(["x Inc.", "The dog", "No. 5 now"]) == _whole_lines(["x Inc.", "The dog", "No. 5 now"])


def test_clean_lines_equals_clean_of_each_caption():
    captions = ["plain", "a\nb", "c\rd\x0be\x0cf", "g\u2028h\u2029i", "\U0001f600 j \U0001f436", "caf\u00e9", ""]
    assert _ptb_lines.clean_lines(captions) == [ptb._clean(c) for c in captions]
    with_nul = captions + ["k\x00l \U0001f600"]
    assert _ptb_lines.clean_lines(with_nul) == [ptb._clean(c) for c in with_nul]
    assert _ptb_lines.clean_lines(["a", "b"]) == ["a", "b"]


def test_shortcut_patterns_compile_to_the_standard_code():
    from re import _compiler as sre_compile, _parser as sre_parse

    m = ptb._spec.macros()
    source = f"(?:{m['ABBREV1']}|{m['ABBREV2']}|{m['ABBREV3']}|{m['ACRONYM1']})"
    assert ptb._compile(source) == sre_compile.compile(sre_parse.parse(source))
    assert ptb._abbreviation_pattern() == sre_compile.compile(sre_parse.parse(source))
    digit = f"(?:[{ptb._spec.classes()['DIGIT_CLASS']}]|[\\u07c0-\\u07c9])"
    assert ptb._punctuation_shortcuts()[","][0] == sre_compile.compile(sre_parse.parse(f",(?!{digit})"))


def test_collector_paused_restores_the_collector():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # (the outer block's pause holds)
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # a collector the caller disabled stays off
    finally:
        gc.enable()


def test_pairs_before_a_lower_case_word_share_one_entry():
    """An abbreviation (or other chunk scanned with the next one) before a word starting with a
    lower-case letter reads only that letter, before a capitalised word only whether it is a sentence
    starter: many such words, the memo entry made by the first."""
    abbreviations = ["Mr.", "Inc.", "U.S.", "p.m.", "No.", "Fig.", "etc.", "I.", "A.", "a.", "e.g.", "vs.", "Ph.D.",
                     "Jan.", "Calif.", "St.", "A.B.C.", "Dr.", "ETC.", "Co.", "Jr.", "x.y", "(555)", "3", "dog."]
    blanks = [" ", "  ", "\t", " \t", " \xa0"]
    words = ["a", "dog", "x@y.com", "www.x.com", "e.g.", "gonna", "can't", "z9", "b<c>", "i.", "t-shirt", "no.",
             "The", "THE", "tHE", "Theatre", "X", "Dog", "It", "Its", "A", "An", "Apple", "Mr.", "Ms.", "About,",
             "I", "U.S.", "She's", "We", "Yet.", "Ph.D.", "The\xa0x", "Mr.\u2000x", "It\x85", "\x85", "\x85\xa0It"]
    tails = ["", " The", " 5", " . .", "\t<b>", " x"]
    rng = random.Random(7)
    captions = [f"{rng.choice(['', 'the ', 'A '])}{a}{rng.choice(blanks)}{w}{rng.choice(tails)}"
                for a in abbreviations for w in words for _ in range(2)]
    rng.shuffle(captions)
    expected = _whole_lines(captions)
    ptb._clear_memos()
    got = ptb_tokenize(captions)
    bad = [(c, e, g) for c, e, g in zip(captions, expected, got) if e != g]
    assert not bad, bad[:3]
    assert any(key.endswith((" a ", " a\n")) for key in ptb._pair_memo)  # (shared entries were made)
    assert any(key.endswith((" X ", " X\n")) for key in ptb._pair_memo)
