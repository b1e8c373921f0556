"""Vectorised n-gram counting shared by BLEU and CIDEr: token strings in, integer count tables out.

Every caption ("document") is split on whitespace exactly as pycocoevalcap's scorers do
(`str.split()`), its tokens get integer ids, and each k-gram (k = 1..n) gets a dense id that is
shared by all documents indexed together. Counting then reduces to sorting integer keys, which is
what makes BLEU and CIDEr fast on large corpora.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import Sequence

import numpy as np

from vlgap.errors import VlgapError


@dataclass(frozen=True)
class NgramCounts:
    """Occurrence counts of one n-gram order: rows are distinct (document, gram) pairs,
    sorted by gram then document."""

    doc: np.ndarray     # int64 document index
    gram: np.ndarray    # int64 dense gram id (for this order)
    count: np.ndarray   # int64 occurrences of the gram in the document
    n_grams: int        # number of distinct grams of this order over all documents


@dataclass(frozen=True)
class NgramIndex:
    """Tokens and k-gram counts (k = 1..n) of a list of documents."""

    lengths: np.ndarray           # tokens per document
    orders: tuple[NgramCounts, ...]
    words: list[str]              # the tokens of all documents (kept to name grams, e.g. for frozen df) ...
    word_offsets: np.ndarray      # ... where each document's start in `words`
    first_token: tuple[np.ndarray, ...]  # per order: where the first occurrence of each gram starts,
    #                                      counted in the document tokens (no separators)
    cache: dict = field(default_factory=dict, repr=False, compare=False)  # reference_join's results

    @property
    def first_position(self) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """Per order: (doc, start in the doc) of the first occurrence of each gram (made when asked)."""
        hit = self.cache.get("first_position")
        if hit is None:
            ends = np.cumsum(self.lengths)
            hit = []
            for first in self.first_token:
                docs = np.searchsorted(ends, first, side="right")
                hit.append((docs, first - (ends[docs] - self.lengths[docs])))
            hit = self.cache["first_position"] = tuple(hit)
        return hit

    def gram_tuples(self, order: int) -> list[tuple[str, ...]]:
        """The token tuple of every dense gram id of `order` (1-based), in id order."""
        docs, starts = self.first_position[order - 1]
        words = self.words
        return [tuple(words[s:s + order]) for s in (self.word_offsets[docs] + starts).tolist()]


# joins the documents for one str.split() of the whole corpus: not whitespace, so it is a token of
# its own between two documents, and never produced by the PTB tokenizer (it drops U+0000)
_SEPARATOR = "\x00"


@dataclass(frozen=True)
class SplitCorpus:
    """Documents split as str.split() splits them, each distinct token numbered by first appearance."""

    words: list[str]          # the tokens of all documents, in order, with a separator token between
    #                           documents where `separator` is set
    ids: np.ndarray           # int64 dense id of each document token (no separators), by first appearance
    lengths: np.ndarray       # tokens per document
    offsets: np.ndarray       # where each document starts in `words`
    vocab: dict = field(repr=False, compare=False)  # token -> id, the separator's included
    separator: int | None = None  # the separator's id in `vocab` (in `ids`, ids above it are one lower)

    def token_ids(self, words: Sequence[str]) -> np.ndarray:
        """The id in `ids` of each word, -1 where no document holds it (int64)."""
        raw = np.fromiter(map(self.vocab.get, words, repeat(-1)), dtype=np.int64, count=len(words))
        if self.separator is not None:
            raw[raw == self.separator] = -1  # (the separator is no document's token)
            raw -= raw > self.separator
        return raw

    @property
    def n_ids(self) -> int:
        """The number of distinct document tokens (ids are below it)."""
        return len(self.vocab) - (self.separator is not None)


def _numbering() -> defaultdict:
    """A dict that gives a token seen for the first time the next id (numbered by first appearance)."""
    vocab: defaultdict = defaultdict()
    vocab.default_factory = vocab.__len__
    return vocab


def split_corpus(documents: Sequence[str]) -> SplitCorpus:
    """Split every document with str.split() and number the distinct tokens by first appearance."""
    vocab = _numbering()
    if any(_SEPARATOR in d for d in documents):
        tokens = [d.split() for d in documents]
        lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
        words = list(chain.from_iterable(tokens))
        ids = np.fromiter(map(vocab.__getitem__, words), dtype=np.int64, count=len(words))
        offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        return SplitCorpus(words, ids, lengths, offsets, dict(vocab))
    # one C-level split of the whole corpus, the separator marking where each document ends
    words = f" {_SEPARATOR} ".join(documents).split()
    ids = np.fromiter(map(vocab.__getitem__, words), dtype=np.int64, count=len(words))
    vocab = dict(vocab)
    sep = vocab.get(_SEPARATOR)
    if sep is None:  # no document, or one
        lengths = np.full(len(documents), len(words), dtype=np.int64)
        return SplitCorpus(words, ids, lengths, np.zeros(len(documents), dtype=np.int64), vocab)
    at = np.flatnonzero(ids == sep)
    lengths = (np.diff(np.concatenate(([-1], at, [len(words)]))) - 1).astype(np.int64)
    ids = ids[ids != sep]
    ids -= ids > sep  # ids stay dense, numbered by first appearance
    return SplitCorpus(words, ids, lengths, np.concatenate(([0], at + 1)).astype(np.int64), vocab, sep)


def index_ngrams(documents: Sequence[str], n: int = 4, split: SplitCorpus | None = None) -> NgramIndex:
    """Split documents with str.split() and count their 1..n-grams with shared dense ids (`split`:
    `split_corpus(documents)` where it is already made, e.g. shared with ROUGE-L)."""
    if split is None:
        split = split_corpus(documents)
    words, flat, lengths, word_offsets = split.words, split.ids, split.lengths, split.offsets
    size = flat.size
    vocab_len = int(flat.max()) + 1 if size else 0
    n_docs = len(lengths)
    doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
    ends = np.cumsum(lengths)
    positions = np.arange(size, dtype=np.int64)
    tail = np.zeros(0, dtype=np.int64)  # the positions where no k-gram starts (the last k-1 of each document)

    orders = []
    firsts = []
    width = max(1, vocab_len)
    prev, n_prev = flat, vocab_len  # dense (k-1)-gram id at every position (any value where none starts)
    for k in range(1, n + 1):
        if k == 1:
            # the token ids are dense (0..vocab_len-1, each used): the unigram ids are the token ids
            n_grams, order, gram, first = _dense_ids(flat.copy(), size, positions)
        else:
            # the k-gram at each position: its (k-1)-gram's id, then its last token; positions too
            # near their document's end get a key above all the others (sorted last, then dropped)
            keys = prev * width
            keys[:max(0, size - k + 1)] += flat[k - 1:]
            tail = np.concatenate((tail, (ends - (k - 1))[lengths >= k - 1]))
            keys[tail] = n_prev * width
            n_grams, order, gram, first = _dense_ids(keys, size - tail.size, positions)
        if 1 < k < n:
            prev = np.zeros(size, dtype=np.int64)
            np.put(prev, order, gram)
            n_prev = n_grams
        firsts.append(first)
        # count (gram, document) pairs: positions in (gram, position) order are in (gram, document)
        # order (a document's positions are consecutive): count the runs, no sort of the pairs needed
        d = np.take(doc_of, order)
        new = np.empty(d.size, dtype=bool)
        new[:1] = True
        np.not_equal(d[1:], d[:-1], out=new[1:])
        new[1:] |= gram[1:] != gram[:-1]
        starts = np.flatnonzero(new)
        orders.append(NgramCounts(doc=d[starts], gram=gram[starts], count=np.diff(np.append(starts, d.size)),
                                  n_grams=int(n_grams)))
    return NgramIndex(lengths=lengths, orders=tuple(orders), words=words, word_offsets=word_offsets, first_token=tuple(firsts))


_PACKED_BITS = 62  # key and position packed into one non-negative int64 (see _dense_ids)


def _dense_ids(keys: np.ndarray, count: int, positions: np.ndarray) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """For the `count` smallest of the non-negative `keys` (the others are larger than all of them;
    `keys` is overwritten; `positions`: np.arange(keys.size)):
    the number m of distinct values, their positions in (key, position) order, the dense id 0..m-1 of
    each (distinct values numbered in sorted order) in that order, and the first position of each."""
    if count == 0:
        empty = np.zeros(0, np.int64)
        return 0, empty, empty, empty
    bits = max(1, (keys.size - 1).bit_length())
    if bits < _PACKED_BITS and int(keys.max()) < 1 << (_PACKED_BITS - bits):
        # sort (key, position) packed into one int64 (in place: the keys are the caller's scratch):
        # about twice as fast as an argsort
        keys <<= bits
        keys |= positions
        keys.sort()
        packed = keys[:count]
        order = packed & ((1 << bits) - 1)
        sorted_keys = packed >> bits
    else:
        order = np.argsort(keys, kind="stable")[:count]
        sorted_keys = keys[order]
    new = np.empty(sorted_keys.size, dtype=bool)
    new[0] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=new[1:])
    dense_sorted = _run_ids(new)
    return int(dense_sorted[-1]) + 1, order, dense_sorted, np.compress(new, order)


def _run_ids(new: np.ndarray) -> np.ndarray:
    """np.cumsum(new) - 1 of a bool array that starts a run at each True (int64; a cumulative sum of
    int64s is about twice as fast as one of the bools)."""
    ids = new.astype(np.int64)
    np.cumsum(ids, out=ids)
    ids -= 1
    return ids


def distinct(keys: np.ndarray, counts: bool = False):
    """Sorted distinct values of an int64 array (and how often each occurs): np.unique's result by
    one sort (numpy >= 2.3's hash-based np.unique is many times slower on large id arrays)."""
    s = np.sort(keys)
    if s.size == 0:
        return (s, np.zeros(0, np.int64)) if counts else s
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    if not counts:
        return s[new]
    starts = np.flatnonzero(new)
    return s[starts], np.diff(np.append(starts, s.size))


def group_max(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys (sorted) and the largest value seen for each (non-negative int64 keys and values)."""
    if keys.size == 0:
        return keys, values
    span = int(values.max()) + 1
    if int(values.min()) >= 0 and int(keys.max()) < (2 ** 62) // span:
        # one sort of key * span + value: by key, then value ascending
        s = np.sort(keys * span + values)
        k, v = s // span, s % span
    else:
        order = np.lexsort((values, keys))  # by key, then value ascending: the last of a run is the max
        k = keys[order]
        v = values[order]
    last = np.flatnonzero(np.append(k[1:] != k[:-1], True))
    return k[last], v[last]


@dataclass(frozen=True)
class ReferenceJoin:
    """One order's rows met with the references' per-item maxima (BLEU and CIDEr share it): see
    `reference_join`."""

    keys: np.ndarray      # distinct gram * n_items + item of the reference rows, sorted
    maxima: np.ndarray    # for each key: the largest count of the gram in one reference of the item
    is_ref: np.ndarray    # per row of the order: a reference's row (document < n_refs)
    ref_slot: np.ndarray  # per reference row, in row order: the index of its key in `keys`
    hyp_item: np.ndarray  # per hypothesis row, in row order: its item (document - n_refs)
    hyp_slot: np.ndarray  # per hypothesis row: the index of its key in `keys` (clipped where absent) ...
    hyp_hit: np.ndarray   # ... and whether a reference of its item holds the gram


def reference_join(index: NgramIndex, order: int, n_refs: int, item_of_ref: np.ndarray) -> ReferenceJoin:
    """For the references (documents 0..n_refs-1 of `index`, reference r belonging to item
    item_of_ref[r]) and the hypotheses (documents n_refs + item): the distinct keys
    gram * n_items + item of `order` (sorted; n_items = item_of_ref[-1] + 1) with the largest count of
    that gram in any one reference of the item, and where every row of the order finds its key. BLEU
    clips the hypotheses' counts with the maxima, CIDEr's document frequencies count the keys and its
    reference rows find the hypothesis' count of their gram through the slots; computed once for both."""
    key = (order, n_refs, item_of_ref.tobytes())
    hit = index.cache.get(key)
    if hit is None:
        counts = index.orders[order - 1]
        n_items = int(item_of_ref[-1]) + 1 if item_of_ref.size else 1
        is_ref = counts.doc < n_refs
        # every row's key gram * n_items + item (a hypothesis' item: its document - n_refs)
        item_of_doc = np.concatenate((item_of_ref, np.arange(index.lengths.size - n_refs, dtype=np.int64)))
        row_key = counts.gram * n_items + np.take(item_of_doc, counts.doc)
        ref_key, count = row_key[is_ref], counts.count[is_ref]
        if item_of_ref.size > 1 and bool(np.any(item_of_ref[1:] < item_of_ref[:-1])):
            keys, maxima = group_max(ref_key, count)  # (references out of item order)
            ref_slot = np.searchsorted(keys, ref_key)
        else:
            # rows are in (gram, document) order and an item's references are consecutive
            # documents: the reference rows' keys are sorted, no sort needed
            new = np.empty(ref_key.size, dtype=bool)
            new[:1] = True
            np.not_equal(ref_key[1:], ref_key[:-1], out=new[1:])
            starts = np.flatnonzero(new)
            keys = ref_key[starts]
            maxima = np.maximum.reduceat(count, starts) if starts.size else count
            ref_slot = _run_ids(new)
        is_hyp = ~is_ref
        hyp_item = counts.doc[is_hyp] - n_refs
        query = row_key[is_hyp]  # sorted: rows sorted by gram, document
        if keys.size:
            hyp_slot = np.minimum(np.searchsorted(keys, query), keys.size - 1)
            hyp_hit = keys[hyp_slot] == query
        else:
            hyp_slot, hyp_hit = np.zeros(query.size, np.int64), np.zeros(query.size, bool)
        hit = ReferenceJoin(keys, maxima, is_ref, ref_slot, hyp_item, hyp_slot, hyp_hit)
        index.cache[key] = hit
    return hit


def reference_layout(hypotheses: Sequence[str], references: Sequence[Sequence[str]], n: int,
                     index: "NgramIndex | None", metric: str):
    """Shared set-up of BLEU and CIDEr: check every item has a reference, flatten the references and
    index references + hypotheses once. Returns (ref_counts, n_refs, item_of_ref, index); in the index,
    documents 0..n_refs-1 are the references in order and n_refs.. the hypotheses."""
    n_items = len(hypotheses)
    ref_counts = np.fromiter(map(len, references), dtype=np.int64, count=n_items)
    if n_items and ref_counts.min() < 1:
        bad = int(np.flatnonzero(ref_counts < 1)[0])
        raise VlgapError(f"item {bad} has no reference: {metric} needs at least one reference per item")
    n_refs = int(ref_counts.sum())
    if index is None:
        index = index_ngrams([r for refs in references for r in refs] + list(hypotheses), n)
    elif index.lengths.size != n_refs + n_items:
        raise VlgapError(f"the n-gram index has {index.lengths.size} documents, not {n_refs + n_items} "
                         f"({n_refs} references and {n_items} hypotheses)")
    item_of_ref = np.repeat(np.arange(n_items, dtype=np.int64), ref_counts)
    return ref_counts, n_refs, item_of_ref, index
