"""What the official caption-score code does to a picture and a caption before CLIP sees them.

jmhessel/clipscore, aimagelab/pacscore and ShiYaya/emscore all feed CLIP through openai's `clip`
package; these are its preparations, written against torchvision, ftfy and regex:

    openai_transform   PIL bicubic resize of the short side to n_px, torchvision CenterCrop (which
                       rounds the offset), then RGB, ToTensor and Normalize. The picture is resized in
                       its own mode: a palette picture is resized (by Pillow, nearest) before it
                       becomes RGB.
    OpenaiTokenizer    openai's SimpleTokenizer and clip.tokenize over a checkpoint's byte-level BPE
                       vocabulary and merges: ftfy.fix_text, html.unescape twice, strip; whitespace
                       runs to one space (regex's \\s), strip; Python's str.lower (final sigma
                       included); words by openai's pattern, matched case-insensitively by the `regex`
                       module (its own Unicode tables); bytes to symbols; BPE with `</w>` closing each
                       word; the start- and end-of-text tokens around it; truncation keeps the first
                       context - 1 tokens and the end of text.

The transformers CLIP tokenizer differs on purpose in a few places: it normalises in Rust (NFC,
its own lower-casing, which has no final-sigma rule and newer Unicode tables than Python's), finds
its special tokens before lower-casing (so '<|ENDOFTEXT|>' stays text) and splits case-sensitively
after lower-casing ("'ſ" is not the "'s" suffix there). The official code gets openai's tokens.

transformers' CLIPImageProcessor crops at int((W - w) / 2), which shifts the picture by one pixel
whenever the resized long side minus the crop is 3 mod 4, and converts to RGB before resizing.
"""
from __future__ import annotations

import html
from functools import lru_cache
from typing import Any, Mapping, Sequence

from vlgap.errors import VlgapError

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)

START, END = "<|startoftext|>", "<|endoftext|>"
#: openai clip's word pattern (simple_tokenizer.SimpleTokenizer.pat), compiled with regex.IGNORECASE
WORD_PATTERN = r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""
END_OF_WORD = "</w>"


@lru_cache(maxsize=1)
def _patterns():
    import regex

    return regex.compile(WORD_PATTERN, regex.IGNORECASE), regex.compile(r"\s+")


def openai_clean(text: str) -> str:
    """openai clip's basic_clean then whitespace_clean: ftfy.fix_text, html.unescape twice, strip;
    every run of whitespace (the `regex` module's \\s) to one space, strip. Not lower-cased."""
    import ftfy

    text = html.unescape(html.unescape(ftfy.fix_text(text))).strip()
    return _patterns()[1].sub(" ", text).strip()


@lru_cache(maxsize=1)
def byte_symbols() -> tuple[str, ...]:
    """The byte-level BPE alphabet: byte b is symbols[b]. The 188 printable Latin-1 bytes ('!'..'~',
    '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68, in byte order, for chr(256), chr(257), ..."""
    printable = {*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)}
    spare = iter(range(256, 256 + 68))
    return tuple(chr(b) if b in printable else chr(next(spare)) for b in range(256))


class OpenaiTokenizer:
    """openai clip's tokenisation over a vocabulary (symbol string -> id) and an ordered merge list
    (earlier merges first), as a checkpoint's BPE files give them."""

    def __init__(self, vocab: Mapping[str, int], merges: Sequence[tuple[str, str]], *, name: str = "the checkpoint"):
        missing = [t for t in (START, END) if t not in vocab]
        if missing:
            raise VlgapError(f"{name}'s vocabulary has no {' or '.join(missing)}: it is not a CLIP tokenizer; "
                             "use --clip-convention transformers")
        self.vocab = dict(vocab)
        self.ranks = {(a, b): rank for rank, (a, b) in enumerate(merges)}
        self.start, self.end = self.vocab[START], self.vocab[END]
        self.name = name
        # the special tokens are whole words of their own (openai's bpe cache starts with them)
        self._words: dict[str, tuple[str, ...]] = {START: (START,), END: (END,)}

    def bpe(self, word: str) -> tuple[str, ...]:
        """A word (byte symbols) split into vocabulary pieces: the last symbol carries `</w>`; then,
        repeatedly, the adjacent pair of lowest merge rank is joined wherever it occurs (left to
        right, without overlap) until no adjacent pair has a rank."""
        done = self._words.get(word)
        if done is not None:
            return done
        parts = list(word[:-1]) + [word[-1] + END_OF_WORD]
        ranks = self.ranks
        while len(parts) > 1:
            rank, pair = min((ranks.get(p, float("inf")), p) for p in zip(parts, parts[1:]))
            if rank == float("inf"):
                break
            joined, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == pair:
                    joined.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    joined.append(parts[i])
                    i += 1
            parts = joined
        out = tuple(parts)
        self._words[word] = out
        return out

    def encode(self, text: str) -> list[int]:
        """Token ids of a caption without the start- and end-of-text tokens (SimpleTokenizer.encode)."""
        symbols = byte_symbols()
        ids: list[int] = []
        for word in _patterns()[0].findall(openai_clean(text).lower()):
            for piece in self.bpe("".join(symbols[b] for b in word.encode("utf-8"))):
                try:
                    ids.append(self.vocab[piece])
                except KeyError:
                    raise VlgapError(f"{self.name}'s BPE makes the piece {piece!r} (of {text[:60]!r}), which its "
                                     "vocabulary lacks: the vocabulary and merges do not belong together") from None
        return ids

    def tokenize(self, text: str, context: int) -> tuple[list[int], bool]:
        """(ids, truncated): start of text, the caption's ids, end of text, as clip.tokenize lays them
        out (without its zero padding); longer than `context`, the first context - 1 and the end of
        text, as clip.tokenize(truncate=True)."""
        ids = [self.start, *self.encode(text), self.end]
        if len(ids) <= context:
            return ids, False
        return ids[:context - 1] + [self.end], True


def openai_transform(n_px: int, mean=OPENAI_MEAN, std=OPENAI_STD):
    """openai clip's preprocess for an n_px model (clip.clip._transform): a callable PIL image -> tensor."""
    from torchvision.transforms import CenterCrop, Compose, InterpolationMode, Normalize, Resize, ToTensor

    return Compose([Resize(n_px, interpolation=InterpolationMode.BICUBIC), CenterCrop(n_px), _to_rgb, ToTensor(),
                    Normalize(mean, std)])


def _to_rgb(image: Any):
    return image.convert("RGB")
