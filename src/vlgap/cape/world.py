"""The shapes world as CAPE-T2V data: videos (spec + render style), their captioner targets in the
six-part schema, the dense captions a video model is fine-tuned on, and three kinds of PE inputs.

Three writers with deliberately different wordings, as in the paper:
  - the *captioner* (`target_of`): writes the six-part target from the spec (fixed phrasing);
  - the *dataset captioner* (`dense_source_of`): the shapes caption writer's summary and layout captions
    plus camera and style sentences: what a DiT's fine-tuning set holds before any rewriting;
  - the *users* (`inputs_of`): concise captions, detailed captions and pseudo user prompts (short,
    informal, paraphrased, seeded typos) from templates that share no sentence frame with the above.
Camera behaviour and render styles come from `vlgap.data.shapes` (CAMERAS, STYLES and their
descriptions). Pure Python + numpy.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vlgap.cape.schema import SixPart
from vlgap.data import shapes as S
from vlgap.errors import VlgapError
from vlgap.io_utils import jsonl_lines

INPUT_KINDS = ("concise", "detailed", "user")
# what an SFT pair's input may be: the three user-side kinds, and "dense", the dataset captioner's own
# dense caption (`dense_source_of`): the kind of text the PE rewrites for the video model's fine-tuning
SFT_KINDS = INPUT_KINDS + ("dense",)
CAMERAS: tuple[str, ...] = tuple(S.CAMERAS)
STYLES: tuple[str, ...] = tuple(S.STYLES)
# the captioner's short phrases: the first clause of the shapes world's own descriptions
CAMERA_DESCRIPTIONS = {c: S.CAMERA_DESCRIPTIONS[c].split(",")[0].strip() for c in CAMERAS}
STYLE_DESCRIPTIONS = {s: S.STYLE_DESCRIPTIONS[s].split(":")[0].strip() for s in STYLES}
EVENT_SLOTS = 2  # the generator predicts the kinds of the first two events in time order


def camera_of(spec: S.SceneSpec) -> str:
    return spec.camera


@dataclass(frozen=True)
class Video:
    """One shapes video: its spec, render style and the seed of every text written about it."""
    id: str
    spec: S.SceneSpec
    style: str
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "spec": self.spec.to_dict(), "style": self.style, "seed": self.seed}


def sample_videos(n: int, seed: int, camera_fraction: float = 0.6, offset: int = 0) -> list[Video]:
    """`n` videos drawn by seed; item i depends only on (seed, offset + i)."""
    out = []
    for i in range(offset, offset + n):
        rng = S.item_rng(seed, i)
        spec = S.sample_spec(rng, camera_fraction=camera_fraction)
        style = STYLES[int(rng.integers(len(STYLES)))]
        out.append(Video(id=f"v{seed}_{i:05d}", spec=spec, style=style, seed=int(rng.integers(2**31 - 1))))
    return out


# ------------------------------------------------------------------------------------------------
# Ground truth attributes (what the generator is scored on)
# ------------------------------------------------------------------------------------------------

ATTRIBUTES = ("shape", "colour", "size", "background", "camera", "style", "event_order")


def attributes_of(video: Video) -> dict[str, Any]:
    """The scored facts: the main object's shape/colour/size, background, camera, style, and the kinds of
    the first EVENT_SLOTS events in time order ("none" where the scene has fewer)."""
    spec = video.spec
    o = spec.objects[0]
    kinds = [spec.events[i].kind for i in spec.time_order()][:EVENT_SLOTS]
    kinds += ["none"] * (EVENT_SLOTS - len(kinds))
    return {"shape": o.shape, "colour": o.colour, "size": o.size, "background": spec.background,
            "camera": camera_of(spec), "style": video.style, "event_order": tuple(kinds)}


# ------------------------------------------------------------------------------------------------
# The captioner: six-part targets
# ------------------------------------------------------------------------------------------------


def _bg_phrase(name: str) -> str:
    if name in S.PLAIN_BACKGROUNDS:
        return f"a plain {name} background"
    return S.PHOTO_BACKGROUNDS[name][1][0]


_VERB = {"appear": "appears", "disappear": "disappears", "grow": "grows", "shrink": "shrinks"}


def _event_text(spec: S.SceneSpec, i: int) -> str:
    e = spec.events[i]
    o = spec.objects[e.obj]
    who = f"the {o.colour} {o.shape}"
    if e.kind == "move":
        return f"{who} moves {e.direction}"
    if e.kind == "recolor":
        return f"{who} turns {e.colour}"
    return f"{who} {_VERB[e.kind]}"


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def target_of(video: Video) -> SixPart:
    """The captioner-written six-part target of a video (fixed phrasing, every scored fact stated)."""
    spec = video.spec
    o = spec.objects[0]
    order = spec.time_order()
    events = [_event_text(spec, i) for i in order]
    story = events[0] + "".join(f", then {t}" for t in events[1:]) if events else "nothing changes"
    others = [f"a {x.colour} {x.shape}" for x in spec.objects[1:]]
    with_others = f" together with {_join(others)}" if others else ""
    cam = CAMERA_DESCRIPTIONS[camera_of(spec)]
    return SixPart(
        short_caption=f"A {o.colour} {o.shape} on {_bg_phrase(spec.background)}.",
        dense_caption=f"A {o.size} {o.colour} {o.shape}{with_others} on {_bg_phrase(spec.background)}; "
                      f"{story}.",
        main_object=f"a {o.size} {o.colour} {o.shape}",
        background=_bg_phrase(spec.background),
        camera=cam,
        style=STYLE_DESCRIPTIONS[video.style],
    )


def dense_source_of(video: Video) -> str:
    """The dataset's own dense caption of a video (before any rewriting): the shapes caption writer's
    summary and layout captions, then camera and style sentences."""
    caps = S.write_captions(video.spec, video.seed)
    cam = CAMERA_DESCRIPTIONS[camera_of(video.spec)]
    return f"{caps[9]} {caps[4]} Camera: {cam}. Look: {STYLE_DESCRIPTIONS[video.style]}."


# ------------------------------------------------------------------------------------------------
# Users: concise, detailed and pseudo user prompts
# ------------------------------------------------------------------------------------------------

_USER_OBJ = {"circle": ("circle", "ball", "dot", "round thing"), "square": ("square", "box", "block"),
             "triangle": ("triangle",), "star": ("star",), "diamond": ("diamond", "rhombus"),
             "hexagon": ("hexagon",), "cross": ("cross", "plus sign"), "heart": ("heart",)}
_USER_EVENT = {"appear": ("shows up", "pops in", "appears"), "disappear": ("goes away", "vanishes", "disappears"),
               "grow": ("gets big", "grows", "gets bigger"), "shrink": ("gets tiny", "shrinks", "gets smaller"),
               "move": ("goes {d}", "moves {d}", "heads {d}"), "recolor": ("goes {c}", "turns {c}")}
_USER_CAM = {"static": ("camera not moving", "still shot", "fixed cam"),
             "pan left": ("pan left", "camera panning left"), "pan right": ("pan right", "camera panning right"),
             "zoom in": ("zoom in", "zooming in"), "zoom out": ("zoom out", "zooming out")}
_USER_STYLE = {"synthetic": ("cartoon look", "flat graphics", "clean vector style"),
               "real": ("realistic", "shaky handheld look", "grainy real footage")}
_USER_BG = {"astronaut": "astronaut pic", "chelsea": "cat photo", "coffee": "coffee cup photo",
            "rocket": "rocket photo", "horse": "horse picture", "camera": "cameraman photo",
            "motorcycle": "motorbike photo", "hubble_deep_field": "space galaxies", "moon": "moon surface",
            "brick": "brick wall", "grass": "grass", "coins": "coins photo"}


def _pick(rng: np.random.Generator, options) -> str:
    return options[int(rng.integers(len(options)))]


def _typo(word: str, rng: np.random.Generator) -> str:
    if len(word) < 4 or not word.isalpha():
        return word
    j = int(rng.integers(1, len(word) - 1))
    op = int(rng.integers(3))
    if op == 0:  # swap two letters
        return word[:j] + word[j + 1] + word[j] + word[j + 2:]
    if op == 1:  # drop a letter
        return word[:j] + word[j + 1:]
    return word[:j] + word[j] + word[j:]  # double a letter


def _user_bg(name: str) -> str:
    return f"{name} bg" if name in S.PLAIN_BACKGROUNDS else _USER_BG.get(name, name)


def _user_event(spec: S.SceneSpec, i: int, rng: np.random.Generator) -> str:
    e = spec.events[i]
    phrase = _pick(rng, _USER_EVENT[e.kind]).format(d=e.direction, c=e.colour)
    return f"{spec.objects[e.obj].shape if e.obj else 'it'} {phrase}"


def user_prompt(video: Video, variant: int = 0, typo_rate: float = 0.08) -> str:
    """A pseudo user prompt: short, lower case, informal, a paraphrased subset of the facts, seeded typos."""
    rng = np.random.default_rng([video.seed, 0x05E5, variant])
    spec = video.spec
    o = spec.objects[0]
    obj = f"{o.colour} {_pick(rng, _USER_OBJ[o.shape])}"
    if rng.random() < 0.5:
        obj = f"{'big' if o.size == 'large' else 'tiny' if o.size == 'small' else 'mid size'} {obj}"
    order = spec.time_order()
    bits = [f"{_pick(rng, ('a', 'some', 'one'))} {obj}", f"on {_user_bg(spec.background)}"]
    if order:
        bits.append(", ".join(_user_event(spec, i, rng) for i in order[:EVENT_SLOTS]))
    if rng.random() < 0.7:
        bits.append(_pick(rng, _USER_CAM[camera_of(spec)]))
    if rng.random() < 0.6:
        bits.append(_pick(rng, _USER_STYLE[video.style]))
    opener = _pick(rng, ("", "", "pls make ", "video of ", "i want ", "gimme "))
    text = opener + ", ".join(bits)
    words = [(_typo(w, rng) if rng.random() < typo_rate else w) for w in text.split(" ")]
    return " ".join(words).lower()


def concise_input(video: Video) -> str:
    """A concise caption: one sentence, the main object, background and first event."""
    spec = video.spec
    o = spec.objects[0]
    order = spec.time_order()
    ev = f", where {_event_text(spec, order[0])}" if order else ""
    return f"Clip showing a {o.colour} {o.shape} over {_bg_phrase(spec.background)}{ev}."


def detailed_input(video: Video) -> str:
    """A detailed caption in its own phrasing: every object, the events in order, camera and style."""
    spec = video.spec
    objs = "; ".join(f"{x.size} {x.colour} {x.shape}" for x in spec.objects)
    steps = [_event_text(spec, i) for i in spec.time_order()]
    seq = " Sequence: " + "; next ".join(steps) + "." if steps else ""
    return (f"Objects: {objs}. Setting: {_bg_phrase(spec.background)}.{seq} "
            f"Camera: {CAMERA_DESCRIPTIONS[camera_of(spec)]}; rendered as {STYLE_DESCRIPTIONS[video.style]}.")


def inputs_of(video: Video) -> dict[str, str]:
    return {"concise": concise_input(video), "detailed": detailed_input(video), "user": user_prompt(video)}


def sft_input(video: Video, kind: str) -> str:
    """The input text of one SFT kind (SFT_KINDS) for a video."""
    if kind not in SFT_KINDS:
        raise VlgapError(f"unknown input kind {kind!r}; valid: {list(SFT_KINDS)}")
    return dense_source_of(video) if kind == "dense" else inputs_of(video)[kind]


def sft_pairs(videos: list[Video], kinds: tuple[str, ...] = INPUT_KINDS) -> list[tuple[str, str]]:
    """(input text, six-part target text) for every video and input kind (SFT_KINDS)."""
    for k in kinds:
        if k not in SFT_KINDS:
            raise VlgapError(f"unknown input kind {k!r}; valid: {list(SFT_KINDS)}")
    return [(sft_input(v, k), target_of(v).to_text()) for v in videos for k in kinds]


def read_inputs_jsonl(path: str | os.PathLike) -> list[dict[str, Any]]:
    """User inputs: JSONL with "id" and "text" (or "prompt"), and an optional "kind" in INPUT_KINDS."""
    path = Path(path)
    if not path.is_file():
        raise VlgapError(f"input file {str(path)!r} does not exist")
    out = []
    for n, rec in jsonl_lines(path):
        text = rec.get("text", rec.get("prompt")) if isinstance(rec, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise VlgapError(f"{path.name} line {n}: needs a non-empty \"text\" (or \"prompt\") string")
        kind = rec.get("kind", "user")
        if kind not in INPUT_KINDS:
            raise VlgapError(f"{path.name} line {n}: kind {kind!r} is not one of {list(INPUT_KINDS)}")
        out.append({"id": str(rec.get("id", n)), "text": text.strip(), "kind": kind})
    if not out:
        raise VlgapError(f"input file {str(path)!r} has no records")
    return out
