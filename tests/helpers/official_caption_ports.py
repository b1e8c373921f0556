"""Ports of the official caption-score code, written for the tests from the published code's behaviour:
jmhessel/clipscore clipscore.py (CLIPScore, RefCLIPScore), aimagelab/pacscore pac_score.py +
compute_metrics.py (PAC-S, RefPAC-S: the same arithmetic with w = 2.0) and ShiYaya/emscore
scorer.py + utils.py (EMScorer.score with its defaults), on a transformers CLIPModel holding the
weights instead of openai's `clip` package. Each step keeps the official data flow: openai's
SimpleTokenizer (ftfy + html.unescape twice + whitespace + lower case + byte-level BPE) and
clip.tokenize's zero padding and truncation, argmax pooling of the end-of-text position, numpy
normalisation and clipping, EMScore's zero-padded batches of 64 with bmm and masks, its idf dict.
Nothing here imports vlgap.
"""
from __future__ import annotations

import collections
import html
import math
from functools import lru_cache

import numpy as np

MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)


# ---- openai clip: tokenizer and preprocess ------------------------------------------------------

@lru_cache()
def _bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(2 ** 8):
        if b not in bs:
            bs.append(b)
            cs.append(2 ** 8 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


class OpenaiTokenizer:
    """openai clip's SimpleTokenizer over a given vocabulary (token -> id) and merge list."""

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]]):
        import regex

        self.encoder = dict(vocab)
        self.ranks = {tuple(m): i for i, m in enumerate(merges)}
        self.byte_encoder = _bytes_to_unicode()
        self.sot, self.eot = vocab["<|startoftext|>"], vocab["<|endoftext|>"]
        self.cache = {"<|startoftext|>": "<|startoftext|>", "<|endoftext|>": "<|endoftext|>"}  # SimpleTokenizer's
        self.pat = regex.compile(r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+""",
                                 regex.IGNORECASE)

    @staticmethod
    def clean(text: str) -> str:
        import ftfy
        import regex

        text = html.unescape(html.unescape(ftfy.fix_text(text))).strip()   # basic_clean
        return regex.sub(r"\s+", " ", text).strip()                          # whitespace_clean

    def bpe(self, token: str) -> str:
        if token in self.cache:
            return self.cache[token]
        word = tuple(token[:-1]) + (token[-1] + "</w>",)
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            bigram = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if bigram not in self.ranks:
                break
            first, second = bigram
            out, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and word[i] == first and word[i + 1] == second:
                    out.append(first + second)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = tuple(out)
        self.cache[token] = " ".join(word)
        return self.cache[token]

    def encode(self, text: str) -> list[int]:
        text = self.clean(text).lower()
        ids = []
        for token in self.pat.findall(text):
            token = "".join(self.byte_encoder[b] for b in token.encode("utf-8"))
            ids.extend(self.encoder[t] for t in self.bpe(token).split(" "))
        return ids

    def tokenize(self, texts, context_length: int = 77, truncate: bool = False):
        """clip.tokenize: [SOT] + tokens + [EOT], zero-padded to the context; too long: RuntimeError,
        or with truncate the first context_length tokens with the last set to [EOT]."""
        import torch

        texts = [texts] if isinstance(texts, str) else texts
        result = torch.zeros(len(texts), context_length, dtype=torch.long)
        for i, text in enumerate(texts):
            tokens = [self.sot] + self.encode(text) + [self.eot]
            if len(tokens) > context_length:
                if not truncate:
                    raise RuntimeError(f"Input {text} is too long for context length {context_length}")
                tokens = tokens[:context_length]
                tokens[-1] = self.eot
            result[i, :len(tokens)] = torch.tensor(tokens)
        return result


def openai_preprocess(n_px: int):
    """clip.clip._transform(n_px) (clipscore's _transform_test(n_px) is the same, RGB after the crop)."""
    from PIL import Image
    from torchvision.transforms import CenterCrop, Compose, Normalize, Resize, ToTensor

    return Compose([Resize(n_px, interpolation=Image.BICUBIC), CenterCrop(n_px), lambda im: im.convert("RGB"),
                    ToTensor(), Normalize(MEAN, STD)])


class OpenaiClip:
    """clip.model.CLIP's encode_image / encode_text (with EMScore's local=True) on a transformers CLIPModel."""

    def __init__(self, hf_model):
        self.m = hf_model.eval()

    def encode_image(self, pixels):
        vm = self.m.vision_model
        pooled = vm(pixel_values=pixels).pooler_output
        return self.m.visual_projection(pooled)

    def encode_text(self, text, local: bool = False):
        import torch

        x = self.m.text_model(input_ids=text).last_hidden_state   # after ln_final; causal attention only
        if local:
            return self.m.text_projection(x)
        return self.m.text_projection(x[torch.arange(x.shape[0]), text.argmax(dim=-1)])


def load_port(folder):
    """(OpenaiClip, OpenaiTokenizer, n_px, context length) for a saved tiny CLIP folder."""
    import json
    from pathlib import Path

    from transformers import CLIPModel

    model = CLIPModel.from_pretrained(folder).eval()
    data = json.loads((Path(folder) / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in data["model"]["merges"]]
    return (OpenaiClip(model), OpenaiTokenizer(vocab, merges), model.config.vision_config.image_size,
            model.config.text_config.max_position_embeddings)


# ---- jmhessel/clipscore, aimagelab/pacscore ------------------------------------------------------

def _extract_captions(captions, clip, tok, context, prefix="A photo depicts", batch_size=256):
    """clipscore.extract_all_captions: batches of 256 of clip.tokenize(prefix + caption, truncate=True)."""
    import torch

    if prefix[-1] != " ":
        prefix += " "
    rows = []
    with torch.no_grad():
        for s in range(0, len(captions), batch_size):
            ids = tok.tokenize([prefix + c for c in captions[s:s + batch_size]], context, truncate=True)
            rows.append(clip.encode_text(ids).numpy())
    return np.vstack(rows)


def _extract_images(paths, clip, n_px, batch_size=64):
    """clipscore.extract_all_images: batches of 64 pictures through the openai preprocess."""
    import torch
    from PIL import Image

    preprocess = openai_preprocess(n_px)
    rows = []
    with torch.no_grad():
        for s in range(0, len(paths), batch_size):
            batch = torch.stack([preprocess(Image.open(p)) for p in paths[s:s + batch_size]])
            rows.append(clip.encode_image(batch).numpy())
    return np.vstack(rows)


def clipscore_main(folder, image_paths, candidates, references=None, w=2.5):
    """clipscore.py main (numpy >= 1.21 branch): per-instance CLIPScore and RefCLIPScore; PAC-S and
    RefPAC-S are the same with w = 2.0 (pac_score.PACScore / RefPACScore, compute_metrics)."""
    clip, tok, n_px, context = load_port(folder)
    images = _extract_images(image_paths, clip, n_px)
    cands = _extract_captions(candidates, clip, tok, context)
    images = images / np.sqrt(np.sum(images ** 2, axis=1, keepdims=True))
    cands = cands / np.sqrt(np.sum(cands ** 2, axis=1, keepdims=True))
    per = w * np.clip(np.sum(images * cands, axis=1), 0, None)
    if references is None:
        return per, None
    flat, owner = [], []
    for idx, refs in enumerate(references):
        flat.extend(refs)
        owner.extend([idx] * len(refs))
    refs = _extract_captions(flat, clip, tok, context)
    refs = refs / np.sqrt(np.sum(refs ** 2, axis=1, keepdims=True))
    groups = collections.defaultdict(list)
    for feats, idx in zip(refs, owner):
        groups[idx].append(feats)
    text_text = np.array([np.max(c.dot(np.vstack(groups[i]).T)) for i, c in enumerate(cands)])
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = 2 * per * text_text / (per + text_text)
    return per, ref


# ---- ShiYaya/emscore ------------------------------------------------------------------------------

def _idf_dict(arr, tok, context):
    counts = collections.Counter()
    for a in arr:
        counts.update(set(tok.tokenize(a, context)[0].tolist()))
    m = len(arr)
    idf = collections.defaultdict(lambda: math.log((m + 1) / 1))
    idf.update({i: math.log((m + 1) / (c + 1)) for i, c in counts.items()})
    idf[max(list(idf.keys()))] = sum(list(idf.values())) / len(list(idf.values()))
    return idf


def _pad(rows):
    import torch
    from torch.nn.utils.rnn import pad_sequence

    lens = torch.tensor([r.size(0) for r in rows])
    mask = torch.arange(int(lens.max())).expand(len(rows), int(lens.max())) < lens.unsqueeze(1)
    return pad_sequence(rows, batch_first=True, padding_value=0.0), mask


def _greedy(ref_emb, ref_mask, hyp_emb, hyp_mask, hyp_idf, ref_idf=None):
    """utils.vid_greedy_cos (ref_idf None: recall averaged over the reference rows) / refs_greedy_cos."""
    import torch

    sim = torch.bmm(hyp_emb, ref_emb.transpose(1, 2))
    masks = torch.bmm(hyp_mask.unsqueeze(2).float(), ref_mask.unsqueeze(1).float())
    sim = sim * masks
    word_precision = sim.max(dim=2)[0]
    word_recall = sim.max(dim=1)[0]
    hyp_idf = hyp_idf / hyp_idf.sum(dim=1, keepdim=True)
    p = (word_precision * hyp_idf).sum(dim=1)
    if ref_idf is None:
        r = word_recall.sum(dim=1) / ref_mask.sum(dim=1)
    else:
        r = (word_recall * (ref_idf / ref_idf.sum(dim=1, keepdim=True))).sum(dim=1)
    return p, r, 2 * p * r / (p + r)


def emscore_score(folder, cands, refs, videos, batch_size=64, idf=True):
    """EMScorer.score(cands, refs, vids, idf=idf) on pre-decoded videos: `videos` is a list (one per
    candidate) of lists of PIL frames, every decoded frame (encode_video's loop). Returns the full_F
    of EMScore(X,V) and, with refs, of EMScore(X,V,X*)."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    clip, tok, n_px, context = load_port(folder)
    ori_cands, ori_refs = cands, refs
    if refs:
        cands, refs, bounds, count = [], [], [], 0
        for cand, group in zip(ori_cands, ori_refs):
            cands += [cand] * len(group)
            refs += group
            bounds.append((count, count + len(group)))
            count += len(group)
    idf = _idf_dict(refs if refs else cands, tok, context) if idf else collections.defaultdict(lambda: 1.0)
    text_local, text_global = {}, {}
    with torch.no_grad():
        sentences = sorted(set((refs or []) + list(cands)), key=lambda x: len(x.split(" ")), reverse=True)
        for s in range(0, len(sentences), batch_size):      # em_cos_score's dedup_and_sort and batches
            chunk = sentences[s:s + batch_size]
            ids = tok.tokenize(chunk, context)              # raises on an over-long caption, as clip.tokenize
            feats = clip.encode_text(ids, local=True).float()
            feats = feats / feats.norm(dim=-1, keepdim=True)
            weights = torch.tensor([[idf[int(i)] for i in row] for row in ids])
            for k, sen in enumerate(chunk):
                n = int(ids[k].argmax()) + 1                # [SOS] .. [EOS]
                text_local[sen] = (feats[k, :n], weights[k, :n])
                text_global[sen] = feats[k, n - 1]
        preprocess = openai_preprocess(n_px)
        vid_local, vid_global = [], []
        for frames in videos:                               # encode_video: batches of 512 frames
            pixels = torch.stack([preprocess(im.convert("RGB")) for im in frames])
            f = torch.cat([clip.encode_image(pixels[k:k + 512]).float() for k in range(0, len(pixels), 512)])
            f = f / f.norm(dim=-1, keepdim=True)
            g = f.mean(dim=0, keepdim=True)
            vid_local.append(f)
            vid_global.append((g / torch.linalg.norm(g, dim=-1, keepdim=True)).squeeze())
        vid_p, vid_r, vid_f, vid_c = [], [], [], []
        for s in range(0, len(ori_cands), batch_size):
            batch = ori_cands[s:s + batch_size]
            hyp_emb, hyp_mask = _pad([text_local[c][0] for c in batch])
            hyp_idf = pad_sequence([text_local[c][1] for c in batch], batch_first=True)
            ref_emb, ref_mask = _pad(vid_local[s:s + batch_size])
            p, r, f = _greedy(ref_emb, ref_mask, hyp_emb, hyp_mask, hyp_idf)
            hyp_g = torch.stack([text_global[c] for c in batch])
            cogr = (hyp_g * torch.stack(vid_global[s:s + batch_size])).sum(dim=1)
            vid_p.append(p), vid_r.append(r), vid_f.append(f), vid_c.append(cogr)
        vid_f, vid_c = torch.cat(vid_f), torch.cat(vid_c)
        vid_full = (vid_f + vid_c) / 2
        if not refs:
            return vid_full.numpy(), None
        loc, glob = [], []
        for s in range(0, len(cands), batch_size):
            hyps, rs = cands[s:s + batch_size], refs[s:s + batch_size]
            hyp_emb, hyp_mask = _pad([text_local[c][0] for c in hyps])
            hyp_idf = pad_sequence([text_local[c][1] for c in hyps], batch_first=True)
            ref_emb, ref_mask = _pad([text_local[c][0] for c in rs])
            ref_idf = pad_sequence([text_local[c][1] for c in rs], batch_first=True)
            p, r, f = _greedy(ref_emb, ref_mask, hyp_emb, hyp_mask, hyp_idf, ref_idf)
            loc.append(torch.stack((p, r, f), dim=-1))
            glob.append((torch.stack([text_global[c] for c in hyps]) * torch.stack([text_global[c] for c in rs])).sum(1))
        loc, glob = torch.cat(loc), torch.cat(glob)
        ref_f = torch.stack([loc[a:b].max(dim=0)[0][2] for a, b in bounds])
        ref_c = torch.stack([glob[a:b].max() for a, b in bounds])
        both_f = (vid_f + ref_f) / 2
        both_c = (vid_c + ref_c) / 2
        return vid_full.numpy(), ((both_f + both_c) / 2).numpy()
