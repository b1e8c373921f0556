"""A text-conditioned generator for the shapes world whose output can be scored.

Conditioning text -> frozen text encoder (MiniLM) -> a small MLP with one softmax head per spec field
(main object shape, colour, size, background, camera, style, kinds of the first two events) -> a
predicted spec -> `vlgap.data.shapes.render` draws it as a video. It is "fine-tuned" on the captions one
operator wrote for the training videos, exactly the step CAPE-T2V changes, and scored per attribute
against the ground-truth spec of each test prompt (a T2V-CompBench-like per-dimension accuracy).
`score_attributes` is pure numpy; `train_generator` / `predict` need torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from vlgap.cape import world as W
from vlgap.data import shapes as S
from vlgap.errors import VlgapError

EVENT_VOCAB = ("none",) + tuple(S.EVENT_KINDS)


def field_vocab() -> dict[str, tuple[str, ...]]:
    """Classes of every predicted field (event slots are separate fields ev0, ev1)."""
    vocab = {"shape": tuple(S.SHAPES), "colour": tuple(S.COLOURS), "size": tuple(S.SIZES),
             "background": tuple(S.PLAIN_BACKGROUNDS) + tuple(S.PHOTO_BACKGROUNDS),
             "camera": W.CAMERAS, "style": W.STYLES}
    for j in range(W.EVENT_SLOTS):
        vocab[f"ev{j}"] = EVENT_VOCAB
    return vocab


def to_fields(attrs: dict[str, Any]) -> dict[str, str]:
    """Attribute dict (world.attributes_of) -> one class per predicted field."""
    out = {k: attrs[k] for k in ("shape", "colour", "size", "background", "camera", "style")}
    for j, kind in enumerate(attrs["event_order"]):
        out[f"ev{j}"] = kind
    return out


def from_fields(fields: dict[str, str]) -> dict[str, Any]:
    out = {k: fields[k] for k in ("shape", "colour", "size", "background", "camera", "style")}
    out["event_order"] = tuple(fields[f"ev{j}"] for j in range(W.EVENT_SLOTS))
    return out


def score_attributes(pred: Sequence[dict[str, Any]], truth: Sequence[dict[str, Any]],
                     attributes: Sequence[str] = W.ATTRIBUTES) -> dict[str, Any]:
    """Per-item, per-attribute correctness (1/0). event_order counts only when every event slot matches
    (kinds in the right order). Returns {"per_attribute": {attr: [N] 0/1}, "item": [N] mean over
    attributes, "accuracy": {attr: mean}, "overall": mean of item}."""
    if len(pred) != len(truth):
        raise VlgapError(f"{len(pred)} predictions for {len(truth)} ground-truth specs; one per prompt")
    if not truth:
        raise VlgapError("no items to score")
    per = {}
    for a in attributes:
        per[a] = np.array([float(tuple(p[a]) == tuple(t[a])) if a == "event_order" else float(p[a] == t[a])
                           for p, t in zip(pred, truth)])
    item = np.mean(np.stack([per[a] for a in attributes]), axis=0)
    return {"per_attribute": per, "item": item, "accuracy": {a: float(per[a].mean()) for a in attributes},
            "overall": float(item.mean()), "n": len(truth)}


@dataclass
class Generator:
    model: Any
    vocab: dict[str, tuple[str, ...]]
    seed: int

    def predict_embeddings(self, x: np.ndarray) -> list[dict[str, Any]]:
        import torch

        self.model.eval()
        with torch.no_grad():
            logits = self.model(torch.as_tensor(x, dtype=torch.float32))
        idx = {f: logits[f].argmax(1).tolist() for f in self.vocab}
        return [from_fields({f: self.vocab[f][idx[f][i]] for f in self.vocab}) for i in range(len(x))]


def _build(dim: int, vocab: dict[str, tuple[str, ...]], hidden: int):
    import torch
    from torch import nn

    class Heads(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Dropout(0.1))
            self.heads = nn.ModuleDict({f: nn.Linear(hidden, len(v)) for f, v in vocab.items()})

        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            h = self.trunk(x)
            return {f: head(h) for f, head in self.heads.items()}

    return Heads()


def train_generator(x: np.ndarray, attrs: Sequence[dict[str, Any]], seed: int, *, hidden: int = 128,
                    epochs: int = 300, lr: float = 3e-3, weight_decay: float = 1e-3) -> Generator:
    """Fit the heads on caption embeddings `x` [N, D] with targets `attrs` (full batch, Adam, seeded
    initialisation and dropout, so seeds give genuinely different generators)."""
    import torch

    if len(x) != len(attrs) or len(x) < 2:
        raise VlgapError(f"generator training needs >= 2 captions with one spec each, got {len(x)} / {len(attrs)}")
    vocab = field_vocab()
    torch.manual_seed(seed)
    model = _build(x.shape[1], vocab, hidden)
    xt = torch.as_tensor(x, dtype=torch.float32)
    ys = {f: torch.tensor([vocab[f].index(to_fields(a)[f]) for a in attrs]) for f in vocab}
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    for _ in range(epochs):
        opt.zero_grad()
        out = model(xt)
        loss = sum(loss_fn(out[f], ys[f]) for f in vocab)
        loss.backward()
        opt.step()
    return Generator(model, vocab, seed)


def spec_of_prediction(pred: dict[str, Any]) -> S.SceneSpec:
    """The predicted scene: the main object at the centre with the predicted events in order (an event the
    scene cannot perform, e.g. a second appear, is left out), predicted background and camera."""
    obj = S.SceneObject(shape=pred["shape"], colour=pred["colour"], size=pred["size"], x=0.5, y=0.5)
    kinds = [k for k in pred["event_order"] if k != "none"]
    events: list[S.Event] = []
    others = [c for c in S.COLOURS if c != pred["colour"]]
    for j, kind in enumerate(kinds):
        ev = S.Event(kind=kind, obj=0, start=(j + 0.1) / len(kinds), end=(j + 0.9) / len(kinds),
                     direction="right" if kind == "move" else None, colour=others[0] if kind == "recolor" else None)
        trial = S.SceneSpec(background=pred["background"], objects=(obj,), events=tuple(events + [ev]))
        try:
            S.validate_spec(trial)
            events.append(ev)
        except VlgapError:
            continue
    return S.SceneSpec(background=pred["background"], objects=(obj,), events=tuple(events), camera=pred["camera"])


def render_prediction(pred: dict[str, Any], n_frames: int = 16, size: int = 64) -> np.ndarray:
    """Draw the predicted scene as a video (uint8 [T, H, W, 3]) in the predicted style."""
    return S.render(spec_of_prediction(pred), n_frames=n_frames, size=size, style=pred["style"])
