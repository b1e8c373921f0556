"""coco-caption's tokenizer without a JVM: `ptb_tokenize(captions)` returns, for a list of captions,
the strings pycocoevalcap's PTBTokenizer wrapper feeds its scorers (Stanford PTBTokenizer 3.4.1,
`-preserveLines -lowerCase`, then its punctuation tokens removed).

The lexer's rules are in _ptb_rules, the scanner and its per-chunk memos in _ptb_core (what the jar
does and the one deliberate difference are listed there), and _ptb_lines assembles the lines of a
whole list from those memos at once.
"""
from __future__ import annotations

from typing import Sequence

from vlgap.captions import _ptb_core as _core, _ptb_lines
from vlgap.captions._ptb_core import PUNCTUATIONS, lex
from vlgap.captions._ptb_store import STORE
from vlgap.memory import collector_paused

__all__ = ["PUNCTUATIONS", "lex", "ptb_tokenize"]


def ptb_tokenize(captions: Sequence[str]) -> list[str]:
    """Tokenise captions exactly as pycocoevalcap's PTBTokenizer does for the same list, in order.

    Each caption is read as one line followed by the next caption (the jar reads them from one
    file), lower-cased, and stripped of pycocoevalcap's punctuation tokens; the result is the
    space-joined token string pycocoevalcap passes to its scorers."""
    # Python's cyclic collector walked the whole heap during tokenisation and freed nothing
    with collector_paused():
        lines = _ptb_lines.clean_lines(captions)
        if sum(map(len, _core._memos.values())) + len(_core._pair_memo) + len(_core._joint_memo) > _core._MEMO_SIZE:
            _core._clear_memos()
        out = _ptb_lines.tokenize_lines(lines)
    STORE.save()  # (patterns compiled for the first time on this machine: kept for the next process)
    return out
