"""BERTScore (Zhang et al. 2020) on any transformers text encoder, with idf, a chosen layer, and
baseline rescaling from a baseline file vlgap builds itself (so local models can be rescaled).

What bert-score 0.3.13 does, reproduced: each sentence is tokenised with its special tokens
(`tokenizer.encode(s.strip(), add_special_tokens=True, truncation=True)`), embedded once, and the
token vectors of hidden state `layer` (0 = embeddings) take part in the greedy matching, special
tokens included; the weights are 1 for every token and 0 for [CLS]/[SEP] (or idf over the
references: log((M + 1) / (df + 1)), M references), normalised per sentence. With several
references, P, R and F are each the best over the references. Rescaling: (x - b) / (1 - b).

The baseline b per layer is the mean P, R, F over random pairs of unrelated sentences
(`build_baseline`), as bert-score's published baselines are (there from Common Crawl).
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vlgap.captions.embedding_scores import GreedyMatch, greedy_match, idf_weights
from vlgap.captions.registry import Scoring, caption_metric
from vlgap.captions.tables import MetricTable
from vlgap.errors import VlgapError

BASELINE_FORMAT = "vlgap-bertscore-baseline/1"


@dataclass
class TextTokenModel:
    """A text encoder's per-token hidden states, every layer, for distinct sentences."""

    spec: str
    model: Any
    tokenizer: Any
    source: dict[str, Any]
    max_length: int
    n_layers: int              # hidden states: 0 (embeddings) .. n_layers
    batch_size: int = 64
    n_truncated: int = 0
    _cache: dict[str, tuple[list[int], dict[int, np.ndarray]]] = field(default_factory=dict)

    def token_ids(self, sentence: str) -> list[int]:
        sent = sentence.strip()
        tok = self.tokenizer
        if not sent:
            return list(tok("", add_special_tokens=True)["input_ids"])  # the special tokens alone
        ids = tok.encode(sent, add_special_tokens=True)
        if len(ids) > self.max_length:
            self.n_truncated += 1
            ids = tok.encode(sent, add_special_tokens=True, max_length=self.max_length, truncation=True)
        return list(ids)

    def embed(self, sentences: Sequence[str], layers: Sequence[int]) -> None:
        """Token ids and the requested layers' token vectors of each distinct sentence, cached."""
        import torch

        layers = list(layers)
        todo = [s for s in dict.fromkeys(sentences) if s not in self._cache or any(l not in self._cache[s][1] for l in layers)]
        # batches of similar token counts: the least padding to run through the model
        token_ids = {s: self.token_ids(s) for s in todo}
        todo.sort(key=lambda s: len(token_ids[s]), reverse=True)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        with torch.inference_mode(), _only_first_layers(self.model, max(layers)):
            for start in range(0, len(todo), self.batch_size):
                batch = todo[start:start + self.batch_size]
                ids = [token_ids[s] for s in batch]
                width = max(len(x) for x in ids)
                input_ids = torch.full((len(ids), width), int(pad), dtype=torch.long)
                mask = torch.zeros((len(ids), width), dtype=torch.long)
                for i, x in enumerate(ids):
                    input_ids[i, :len(x)] = torch.tensor(x)
                    mask[i, :len(x)] = 1
                device = next(self.model.parameters()).device
                out = self.model(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                                 output_hidden_states=True)
                hidden = [out.hidden_states[layer].float().cpu().numpy() for layer in layers]
                for i, (s, x) in enumerate(zip(batch, ids)):
                    self._cache[s] = (x, {l: h[i, :len(x)].astype(np.float64) for l, h in zip(layers, hidden)})

    def describe(self) -> dict[str, Any]:
        return {"spec": self.spec, "max_tokens": self.max_length, "hidden_states": self.n_layers + 1, **self.source}


@contextmanager
def _only_first_layers(model, last: int):
    """Run only the blocks up to hidden state `last` (bert-score truncates its model the same way):
    later blocks cannot change earlier hidden states, and skipping them saves their time."""
    blocks = getattr(getattr(model, "encoder", None), "layer", None)
    if not isinstance(blocks, torch_module_list()) or last >= len(blocks):
        yield
        return
    model.encoder.layer = blocks[:last]
    try:
        yield
    finally:
        model.encoder.layer = blocks


def torch_module_list():
    import torch

    return torch.nn.ModuleList


def load_text_token_model(spec: str, device: str = "cpu") -> TextTokenModel:
    """A text encoder from vlgap's registry (`minilm`, `hf:<id or folder>`, ...) as raw model + tokenizer."""
    from vlgap.encoders.registry import get_encoder

    encoder = get_encoder(spec, device=device)
    model = getattr(encoder, "model", None)
    tokenizer = getattr(encoder, "tokenizer", None)
    if model is None or tokenizer is None or getattr(encoder, "layer_dims", None) is None:
        raise VlgapError(f"BERTScore needs a transformers text encoder with token-level hidden states; "
                         f"{spec!r} is not one (try 'minilm' or 'hf:<text model folder>')")
    n_layers = len(encoder.layer_dims) - 1
    return TextTokenModel(spec=spec, model=model, tokenizer=tokenizer, source=dict(encoder.source),
                          max_length=int(encoder.max_length), n_layers=n_layers)


def _check_layer(model: TextTokenModel, layer: int | None) -> int:
    if layer is None:
        return model.n_layers
    if not isinstance(layer, int) or not 0 <= layer <= model.n_layers:
        raise VlgapError(f"--bertscore-layer {layer!r} is not a layer of {model.spec!r}: use 0 (embeddings) to "
                         f"{model.n_layers} (the last hidden state)")
    return layer


def _weights(model: TextTokenModel, ids: list[int], idf) -> np.ndarray:
    if idf is not None:
        return idf(ids)
    specials = {model.tokenizer.cls_token_id, model.tokenizer.sep_token_id} - {None}
    return np.array([0.0 if t in specials else 1.0 for t in ids])


@dataclass
class BertScoreResult:
    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray
    signature: str
    info: dict[str, Any]


def bertscore(model: TextTokenModel, candidates: Sequence[str], references: Sequence[Sequence[str]], *,
              layer: int | None = None, idf: bool = False, baseline: str | Path | dict | None = None
              ) -> BertScoreResult:
    """Per-item BERTScore P, R, F1 of each candidate against its references (best reference per part)."""
    layer = _check_layer(model, layer)
    if len(candidates) != len(references):
        raise VlgapError(f"BERTScore: {len(candidates)} candidates but {len(references)} reference lists")
    flat = [r for refs in references for r in refs]
    model.embed(list(candidates) + flat, [layer])
    if idf and len(set(flat)) < 2:
        raise VlgapError(f"BERTScore idf over {len(set(flat))} distinct reference caption(s): every reference token "
                         "occurs in every reference, so its idf is log(2 / 2) = 0 and the scores collapse to 0; "
                         "idf needs many references (bert-score counts them over the whole reference set): score "
                         "more items, or leave idf off")
    table = idf_weights([model._cache[r][0] for r in flat]) if idf else None
    p, r, f = (np.empty(len(candidates)) for _ in range(3))
    for i, (cand, refs) in enumerate(zip(candidates, references)):
        if not refs:
            raise VlgapError(f"item {i}: BERTScore needs at least one reference caption")
        c_ids, c_vecs = _layer_of(model, cand, layer)
        matches = []
        for ref in refs:
            r_ids, r_vecs = _layer_of(model, ref, layer)
            if table is not None and ref.strip() and not np.sum(_weights(model, r_ids, table)) > 0:
                raise VlgapError(f"item {i}: every token of the reference {ref!r} has idf 0 (each occurs in every "
                                 "reference caption), so BERTScore's recall would divide by zero; score more items, "
                                 "or leave idf off")
            match = greedy_match(c_vecs, r_vecs, _weights(model, c_ids, table), _weights(model, r_ids, table))
            if not cand.strip() or not ref.strip():  # an empty sentence: bert-score reports 0 for P, R and F
                match = GreedyMatch(0.0, 0.0, 0.0)
            matches.append(match)
        p[i] = max(m.precision for m in matches)
        r[i] = max(m.recall for m in matches)
        f[i] = max(m.f1 for m in matches)
    info: dict[str, Any] = {"model": model.describe(), "layer": layer, "idf": "references" if idf else "none",
                            "truncated_sentences": model.n_truncated}
    rescale = "none"
    if baseline is not None:
        base = read_baseline(baseline, model, layer)
        p, r, f = ((x - base[k]) / (1 - base[k]) for x, k in ((p, "P"), (r, "R"), (f, "F")))
        rescale = f"baseline {base['source']}"
        info["baseline"] = {k: base[k] for k in ("P", "R", "F")} | {"source": base["source"]}
    return BertScoreResult(p, r, f, signature(model, layer, idf, rescale), info)


def _layer_of(model: TextTokenModel, sentence: str, layer: int) -> tuple[list[int], np.ndarray]:
    ids, vecs = model._cache[sentence]
    return ids, vecs[layer]


def signature(model: TextTokenModel, layer: int, idf: bool, rescale: str) -> str:
    """SacreBLEU-style: everything that changes the number, in one line."""
    import transformers

    from vlgap import __version__

    weights = model.source.get("weights_files") or {}
    digest = next(iter(weights.values()), "")[:12] if weights else model.source.get("revision", "")
    return (f"model:{model.spec}{'@' + digest if digest else ''}|layer:{layer}/{model.n_layers}|"
            f"idf:{'refs' if idf else 'no'}|rescale:{rescale}|special-tokens:matched,weight0|"
            f"version:vlgap-{__version__},transformers-{transformers.__version__}")


# ---- baselines --------------------------------------------------------------------------------

def build_baseline(model: TextTokenModel, sentences: Sequence[str], *, n_pairs: int = 10000, seed: int = 0,
                   source: str = "sentences") -> dict[str, Any]:
    """Mean P, R, F1 of random pairs of distinct sentences, for every layer (rescaling baseline)."""
    from vlgap.counts import check_count

    n_pairs = check_count("n_pairs", n_pairs, 1, flag="--baseline-pairs", example=10000)  # 0 pairs: all NaN
    sentences = [s for s in dict.fromkeys(s.strip() for s in sentences) if s]
    if len(sentences) < 2:
        raise VlgapError(f"a BERTScore baseline needs at least 2 distinct non-empty sentences, got {len(sentences)}")
    rng = np.random.default_rng(seed)
    a = rng.integers(0, len(sentences), n_pairs)
    b = (a + rng.integers(1, len(sentences), n_pairs)) % len(sentences)  # never the same sentence
    used = sorted(set(a.tolist()) | set(b.tolist()))
    layers = list(range(model.n_layers + 1))
    scratch = TextTokenModel(model.spec, model.model, model.tokenizer, model.source, model.max_length,
                             model.n_layers, model.batch_size)
    scratch.embed([sentences[i] for i in used], layers)
    per_layer: dict[str, dict[str, float]] = {}
    for layer in layers:
        sums = np.zeros(3)
        for i, j in zip(a, b):
            ci, cv = scratch._cache[sentences[i]]
            ri, rv = scratch._cache[sentences[j]]
            m = greedy_match(cv[layer], rv[layer], _weights(scratch, ci, None), _weights(scratch, ri, None))
            sums += (m.precision, m.recall, m.f1)
        mean = sums / n_pairs
        per_layer[str(layer)] = {"P": float(mean[0]), "R": float(mean[1]), "F": float(mean[2])}
    return {"format": BASELINE_FORMAT, "model": model.describe(), "layers": per_layer, "n_pairs": int(n_pairs),
            "n_sentences": len(sentences), "seed": seed, "source": source, "idf": "none"}


def write_baseline(baseline: dict[str, Any], path: str | Path) -> Path:
    from vlgap.io_utils import atomic_write_text

    path = Path(path)
    atomic_write_text(path, json.dumps(baseline, indent=1, sort_keys=True) + "\n")
    return path


def read_baseline(baseline: str | Path | dict, model: TextTokenModel, layer: int) -> dict[str, Any]:
    where = "in-memory baseline"
    if not isinstance(baseline, dict):
        where = str(baseline)
        from vlgap.json_files import read_json

        try:
            baseline = read_json(baseline)
        except VlgapError as err:
            raise VlgapError(f"not a vlgap BERTScore baseline: {err}; build one with `vlgap caption-eval "
                             "--bertscore-baseline build ...`") from None
    if not isinstance(baseline, dict) or baseline.get("format") != BASELINE_FORMAT:
        raise VlgapError(f"{where} is not a vlgap BERTScore baseline (format {BASELINE_FORMAT!r} expected)")
    made_for = baseline.get("model", {})
    if made_for.get("spec") != model.spec or made_for.get("weights_files") != model.source.get("weights_files"):
        raise VlgapError(f"BERTScore baseline {where} was built for {made_for.get('spec')!r} with other weights; "
                         f"build one for {model.spec!r} (`--bertscore-baseline build`)")
    row = baseline.get("layers", {}).get(str(layer))
    if row is None:
        raise VlgapError(f"BERTScore baseline {where} has no layer {layer}")
    if not all(isinstance(row.get(k), (int, float)) and np.isfinite(row[k]) for k in ("P", "R", "F")):
        raise VlgapError(f"BERTScore baseline {where}, layer {layer}: P/R/F are not finite numbers (built from "
                         f"{baseline.get('n_pairs')} pairs?); rebuild it (`--bertscore-baseline build`)")
    return {**row, "source": Path(where).name if where != "in-memory baseline" else where}


@caption_metric("bertscore", keys=("BERTScore-P", "BERTScore-R", "BERTScore-F1"), aliases=("bertscore-f1",),
                needs=("text model",), kind="model", manifest_references=True, order=140,
                summary="BERTScore P/R/F1 (Zhang et al. 2020): any text encoder, idf, layer, baseline rescaling")
def score_bertscore(s: Scoring) -> MetricTable:
    ctx = s.embedding()
    o = ctx.options
    res = bertscore(ctx.text(), s.data.predictions, s.data.references, layer=o.bertscore_layer, idf=o.idf,
                    baseline=o.bertscore_baseline)
    stats = np.stack([res.precision, res.recall, res.f1], axis=1)
    names = ["BERTScore-P", "BERTScore-R", "BERTScore-F1"]
    return MetricTable(names, stats, lambda sums, n: np.asarray(sums, dtype=float) / n,
                       [float(x) for x in stats.mean(axis=0)], {name: stats[:, j] for j, name in enumerate(names)},
                       {"signature": res.signature, "layer": res.info["layer"], "idf": res.info["idf"],
                        "truncated_sentences": res.info["truncated_sentences"],
                        **({"baseline": res.info["baseline"]} if "baseline" in res.info else {})})
