"""Two caption groups per shapes scene for the diversity-vs-quantity question: ten captions of
different facts (`diverse`: the usual ten caption kinds, each a different fact set) and ten paraphrases
of one fact set (`paraphrase`: rewordings of the diverse group's first caption, stating exactly its
facts).

The paraphrase group's first caption is the diverse group's first caption itself, so at n_c = 1 both
groups are the same text (their alignment difference is exactly 0) and from n_c = 2 on they differ only
in whether the added captions carry new facts or reword the old ones. Rewordings come from the caption
writer's own word choices under other seeds (kept only when they state the same facts); a caption kind
with fewer than ten wordings is topped up with neutral framings ("In this clip, ..."), which add words
but no fact. `paraphrase_wordings` in the item's meta says how many writer wordings there were.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from vlgap.data.shapes.captions import N_CAPTIONS, _compose_with_camera, caption_set
from vlgap.data.shapes.spec import SceneSpec, simulate, spec_from_dict
from vlgap.errors import VlgapError

#: what `make-data shapes --caption-mode` writes as the manifest's captions
CAPTION_MODES = ("diverse", "paraphrase", "both")
#: caption group names in meta["caption_groups"]
GROUPS = ("diverse", "paraphrase")
#: fact-free framings that top up a caption kind with fewer than ten wordings ({} is the wording, first
#: letter lower-cased)
NEUTRAL_FRAMES = ("In this clip, {}", "In the video, {}", "Here, {}", "As the clip shows, {}",
                  "We can see that {}", "The video shows that {}", "Watching closely, {}", "Look: {}",
                  "In short, {}")
#: writer seeds tried per paraphrase group before neutral framings are used
MAX_WORDING_TRIES = 200


def diverse_order(caption_seed: int, n: int = N_CAPTIONS) -> list[int]:
    """The caption-kind order `generate_shapes` writes (its `caption_kinds`)."""
    return [int(j) for j in np.random.default_rng([caption_seed, 0xA770]).permutation(n)]


def _lower_first(text: str) -> str:
    # "A red circle ..." -> "a red circle ...", but keep acronyms and "I" as they are
    if len(text) > 1 and text[1].isupper():
        return text
    return text[:1].lower() + text[1:]


def paraphrases(spec: SceneSpec | dict, caption_seed: int, kind: int, n: int = N_CAPTIONS,
                first: tuple[str, list[str]] | None = None) -> tuple[list[tuple[str, list[str]]], int]:
    """`n` distinct captions that all state exactly the facts of caption kind `kind` of this scene,
    the first being that caption as `caption_set` writes it (or `first`). Returns (captions with their
    facts, number of writer wordings before neutral framings)."""
    if isinstance(spec, dict):
        spec = spec_from_dict(spec)
    if not 0 <= kind < N_CAPTIONS:
        raise VlgapError(f"caption kind must be 0..{N_CAPTIONS - 1}, got {kind}")
    if n < 1:
        raise VlgapError(f"a paraphrase group needs at least 1 caption, got {n}")
    final, before = simulate(spec)
    if first is None:
        first = caption_set(spec, caption_seed)[kind]
    text0, facts0 = first
    target = sorted(facts0)
    wordings = [text0]
    rng = np.random.default_rng([caption_seed, kind, 0x9A2A])
    for _ in range(MAX_WORDING_TRIES):
        if len(wordings) >= n:
            break
        text, facts = _compose_with_camera(spec, int(rng.integers(2**31 - 1)), kind, before, final)
        # some kinds pick which facts to state (e.g. which two events): only the same fact set counts
        if sorted(facts) == target and text not in wordings:
            wordings.append(text)
    n_wordings = len(wordings)
    out = list(wordings)
    for frame in NEUTRAL_FRAMES:
        for w in wordings:
            if len(out) >= n:
                break
            out.append(frame.format(_lower_first(w)))
    if len(out) < n:
        raise VlgapError(f"only {len(out)} distinct paraphrases exist for caption kind {kind}; ask for at most "
                         f"{len(out)}")
    return [(t, list(facts0)) for t in out[:n]], n_wordings


def caption_groups(spec: SceneSpec | dict, caption_seed: int, n: int = N_CAPTIONS) -> dict[str, Any]:
    """Both groups of one scene: {"diverse": [...], "paraphrase": [...], "facts": {group: [[fact ids]]},
    "paraphrase_kind": the caption kind paraphrased, "paraphrase_wordings": writer wordings}.
    The diverse group is exactly the captions `generate_shapes` writes for this scene and seed."""
    if isinstance(spec, dict):
        spec = spec_from_dict(spec)
    caps = caption_set(spec, caption_seed)
    order = diverse_order(caption_seed, len(caps))
    diverse = [caps[j] for j in order][:n]
    para, n_wordings = paraphrases(spec, caption_seed, order[0], n=n, first=caps[order[0]])
    return {"diverse": [t for t, _ in diverse], "paraphrase": [t for t, _ in para],
            "facts": {"diverse": [f for _, f in diverse], "paraphrase": [f for _, f in para]},
            "paraphrase_kind": order[0], "paraphrase_wordings": n_wordings}
