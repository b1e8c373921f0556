"""The `shapes` world: procedural videos of coloured shapes whose captions are written from the same spec.

A scene is a JSON-serialisable `SceneSpec`: a background (a plain colour or one of scikit-image's real
photos), 1-4 objects (shape, colour, size, start position) and a timeline of events (appear, disappear,
move left/right/up/down, grow, shrink, change colour), each in its own time slot so that their order is
describable. `render(spec)` draws any spec with numpy masks (deterministic, uint8 [T,H,W,3]);
`write_captions(spec, seed)` writes 10 different captions, each stating a different subset of the facts
(`caption_facts` lists them) so that more captions genuinely describe more; `generate_shapes` samples
specs by seed and writes mp4 files plus a manifest whose items carry the spec in `meta["spec"]`.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_text

# --------------------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------------------

SHAPES = ("circle", "square", "triangle", "star", "diamond", "hexagon", "cross", "heart")

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (40, 170, 60),
    "blue": (30, 80, 225),
    "yellow": (245, 215, 30),
    "orange": (245, 135, 20),
    "purple": (140, 50, 185),
    "pink": (245, 125, 185),
    "cyan": (40, 205, 225),
    "white": (245, 245, 245),
    "black": (15, 15, 15),
    "brown": (135, 80, 35),
}

PLAIN_BACKGROUNDS: dict[str, tuple[int, int, int]] = {
    "black": (0, 0, 0),
    "white": (255, 255, 255),
    "gray": (128, 128, 128),
    "navy": (20, 30, 85),
    "beige": (235, 220, 180),
    "dark green": (20, 75, 40),
}

# name -> (file under skimage/data, caption phrases). Only files that ship inside the scikit-image wheel.
PHOTO_BACKGROUNDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "astronaut": ("astronaut.png", ("a photo of an astronaut", "a portrait of an astronaut")),
    "chelsea": ("chelsea.png", ("a photo of a cat", "a picture of a tabby cat")),
    "coffee": ("coffee.png", ("a photo of a cup of coffee", "a picture of an espresso cup")),
    "rocket": ("rocket.jpg", ("a photo of a rocket on its launch pad", "a picture of a rocket at dusk")),
    "horse": ("horse.png", ("a horse silhouette", "a picture of a horse silhouette")),
    "camera": ("camera.png", ("a grayscale photo of a cameraman", "a grey photo of a man with a camera")),
    "motorcycle": ("motorcycle_left.png", ("a photo of a motorcycle", "a picture of a motorbike in a garage")),
    "hubble_deep_field": ("hubble_deep_field.jpg", ("a picture of deep space full of galaxies",
                                                    "a starry space image")),
    "moon": ("moon.png", ("a grey image of the moon's surface", "a picture of lunar craters")),
    "brick": ("brick.png", ("a grey brick wall", "a picture of a brick wall")),
    "grass": ("grass.png", ("a grayscale grass texture", "a grey photo of grass")),
    "coins": ("coins.png", ("a photo of old coins", "a grey picture of coins")),
}

EVENT_KINDS = ("appear", "disappear", "move", "grow", "shrink", "recolor")
DIRECTIONS = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
SIZES = {"small": 0.07, "medium": 0.10, "large": 0.14}  # half-size as a fraction of the shorter side
MOVE_DISTANCE = 1 / 3  # one cell of the 3x3 position grid, so start and end cells are both describable
GROW_FACTOR = 1.6
CELL_NAMES = (("top left", "top", "top right"), ("left", "centre", "right"),
              ("bottom left", "bottom", "bottom right"))
MIN_CONTRAST = 120.0  # RGB distance between an object's colour and a plain background

# --------------------------------------------------------------------------------------------------
# Spec
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SceneObject:
    shape: str
    colour: str
    size: str  # small | medium | large
    x: float  # start centre, fraction of the width (0 left .. 1 right)
    y: float  # start centre, fraction of the height (0 top .. 1 bottom)


@dataclass(frozen=True)
class Event:
    kind: str  # appear | disappear | move | grow | shrink | recolor
    obj: int  # index into SceneSpec.objects
    start: float  # fraction of the clip, 0..1
    end: float
    direction: str | None = None  # move: left | right | up | down
    colour: str | None = None  # recolor: the new colour


@dataclass(frozen=True)
class SceneSpec:
    background: str  # a PLAIN_BACKGROUNDS or PHOTO_BACKGROUNDS name
    objects: tuple[SceneObject, ...]
    events: tuple[Event, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "background": self.background,
            "objects": [asdict(o) for o in self.objects],
            "events": [{k: v for k, v in asdict(e).items() if v is not None} for e in self.events],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SceneSpec":
        return spec_from_dict(d)

    def time_order(self) -> list[int]:
        """Event indices sorted by start time (ties by index)."""
        return sorted(range(len(self.events)), key=lambda i: (self.events[i].start, i))


def spec_from_dict(d: dict[str, Any]) -> SceneSpec:
    """Build and validate a SceneSpec from its dict form (as stored in a manifest's meta["spec"])."""
    if not isinstance(d, dict):
        raise VlgapError(f"scene spec must be a dict with background/objects/events, got {type(d).__name__}")
    try:
        objects = tuple(SceneObject(shape=o["shape"], colour=o["colour"], size=o.get("size", "medium"),
                                    x=float(o["x"]), y=float(o["y"])) for o in d.get("objects", []))
        events = tuple(Event(kind=e["kind"], obj=int(e["obj"]), start=float(e["start"]), end=float(e["end"]),
                             direction=e.get("direction"), colour=e.get("colour")) for e in d.get("events", []))
        spec = SceneSpec(background=d["background"], objects=objects, events=events)
    except (KeyError, TypeError, ValueError) as exc:
        raise VlgapError(f"scene spec is malformed ({exc!r}); expected {{'background': str, 'objects': "
                         "[{shape, colour, size, x, y}], 'events': [{kind, obj, start, end, ...}]}") from exc
    validate_spec(spec)
    return spec


def _cell(x: float, y: float) -> tuple[int, int]:
    """(row, col) of the 3x3 grid that contains a point given in frame fractions."""
    return (min(2, max(0, int(y * 3))), min(2, max(0, int(x * 3))))


@dataclass
class _ObjState:
    colour: str
    x: float
    y: float
    level: int = 0  # net grow(+1)/shrink(-1) steps
    visible: bool = True
    gone: bool = False  # disappeared: no later events
    n_events: int = 0


def _simulate(spec: SceneSpec) -> tuple[list[_ObjState], dict[int, _ObjState]]:
    """Walk the events in time order; return final states and, per event index, the object's state
    just before that event. Raises VlgapError on an event that the scene cannot perform."""
    first_kind = {}
    for i in spec.time_order():
        first_kind.setdefault(spec.events[i].obj, spec.events[i].kind)
    states = [_ObjState(o.colour, o.x, o.y, visible=first_kind.get(k) != "appear")
              for k, o in enumerate(spec.objects)]
    before: dict[int, _ObjState] = {}
    for i in spec.time_order():
        e = spec.events[i]
        s = states[e.obj]
        before[i] = replace(s)
        where = f"event {i} ({e.kind} of object {e.obj})"
        if s.gone:
            raise VlgapError(f"{where}: object {e.obj} has already disappeared; a disappear must be its last event")
        if e.kind == "appear":
            if s.n_events:
                raise VlgapError(f"{where}: appear must be the object's first event")
            s.visible = True
        elif e.kind == "disappear":
            s.visible, s.gone = False, True
        elif e.kind == "move":
            dx, dy = DIRECTIONS[e.direction]
            s.x += dx * MOVE_DISTANCE
            s.y += dy * MOVE_DISTANCE
            if not (0.0 <= s.x <= 1.0 and 0.0 <= s.y <= 1.0):
                raise VlgapError(f"{where}: moving {e.direction} leaves the frame; start the object further away")
        elif e.kind in ("grow", "shrink"):
            s.level += 1 if e.kind == "grow" else -1
            if abs(s.level) > 1:
                raise VlgapError(f"{where}: at most one net grow or shrink step is allowed")
        elif e.kind == "recolor":
            if e.colour == s.colour:
                raise VlgapError(f"{where}: the object is already {e.colour}; pick another colour")
            s.colour = e.colour
        s.n_events += 1
    return states, before


def validate_spec(spec: SceneSpec) -> None:
    """Raise VlgapError naming the first problem (unknown names, bad ranges, impossible timeline)."""
    if spec.background not in PLAIN_BACKGROUNDS and spec.background not in PHOTO_BACKGROUNDS:
        raise VlgapError(f"unknown background {spec.background!r}; valid: "
                         f"{sorted(PLAIN_BACKGROUNDS) + sorted(PHOTO_BACKGROUNDS)}")
    if not 1 <= len(spec.objects) <= 8:
        raise VlgapError(f"a scene needs 1 to 8 objects, got {len(spec.objects)}")
    for k, o in enumerate(spec.objects):
        if o.shape not in SHAPES:
            raise VlgapError(f"object {k}: unknown shape {o.shape!r}; valid: {list(SHAPES)}")
        if o.colour not in COLOURS:
            raise VlgapError(f"object {k}: unknown colour {o.colour!r}; valid: {list(COLOURS)}")
        if o.size not in SIZES:
            raise VlgapError(f"object {k}: unknown size {o.size!r}; valid: {list(SIZES)}")
        if not (0.0 <= o.x <= 1.0 and 0.0 <= o.y <= 1.0):
            raise VlgapError(f"object {k}: position ({o.x}, {o.y}) must lie in [0, 1] x [0, 1]")
    for i, e in enumerate(spec.events):
        if e.kind not in EVENT_KINDS:
            raise VlgapError(f"event {i}: unknown kind {e.kind!r}; valid: {list(EVENT_KINDS)}")
        if not 0 <= e.obj < len(spec.objects):
            raise VlgapError(f"event {i}: object index {e.obj} out of range 0..{len(spec.objects) - 1}")
        if not 0.0 <= e.start < e.end <= 1.0:
            raise VlgapError(f"event {i}: needs 0 <= start < end <= 1, got start={e.start}, end={e.end}")
        if e.kind == "move" and e.direction not in DIRECTIONS:
            raise VlgapError(f"event {i}: move needs a direction in {list(DIRECTIONS)}, got {e.direction!r}")
        if e.kind == "recolor" and e.colour not in COLOURS:
            raise VlgapError(f"event {i}: recolor needs a colour in {list(COLOURS)}, got {e.colour!r}")
    order = spec.time_order()
    for a, b in zip(order, order[1:]):
        if spec.events[b].start < spec.events[a].end:
            raise VlgapError(f"events {a} and {b} overlap in time; give each event its own slot so the order "
                             "is describable")
    _simulate(spec)


# --------------------------------------------------------------------------------------------------
# Sampler
# --------------------------------------------------------------------------------------------------


def _contrast_ok(colour: str, background: str) -> bool:
    if background not in PLAIN_BACKGROUNDS:
        return True  # photos: shapes get an outline
    a = np.array(COLOURS[colour], float)
    b = np.array(PLAIN_BACKGROUNDS[background], float)
    return float(np.linalg.norm(a - b)) >= MIN_CONTRAST


def sample_spec(rng: np.random.Generator, photo_fraction: float = 0.5, max_objects: int = 4,
                max_events: int = 4) -> SceneSpec:
    """Draw a random valid scene: 1..max_objects objects with distinct shapes on distinct cells of a 3x3
    grid, and 1..max_events events in consecutive equal time slots."""
    if rng.random() < photo_fraction:
        background = str(rng.choice(list(PHOTO_BACKGROUNDS)))
    else:
        background = str(rng.choice(list(PLAIN_BACKGROUNDS)))
    colours_ok = [c for c in COLOURS if _contrast_ok(c, background)]
    n_obj_p = np.array([0.25, 0.35, 0.25, 0.15][:max_objects])
    n_obj = int(rng.choice(np.arange(1, len(n_obj_p) + 1), p=n_obj_p / n_obj_p.sum()))
    shapes = rng.choice(SHAPES, size=n_obj, replace=False)
    cells = rng.choice(9, size=n_obj, replace=False)
    objects = []
    for k in range(n_obj):
        row, col = divmod(int(cells[k]), 3)
        jitter = rng.uniform(-0.04, 0.04, size=2)
        objects.append(SceneObject(shape=str(shapes[k]), colour=str(rng.choice(colours_ok)),
                                   size=str(rng.choice(list(SIZES))),
                                   x=round((col + 0.5) / 3 + float(jitter[0]), 4),
                                   y=round((row + 0.5) / 3 + float(jitter[1]), 4)))
    n_ev_p = np.array([0.2, 0.35, 0.3, 0.15][:max_events])
    n_events = int(rng.choice(np.arange(1, len(n_ev_p) + 1), p=n_ev_p / n_ev_p.sum()))
    states = [_ObjState(o.colour, o.x, o.y) for o in objects]
    kind_weight = {"move": 0.35, "recolor": 0.2, "grow": 0.1, "shrink": 0.1, "appear": 0.12, "disappear": 0.13}
    picked: list[tuple[int, str, str | None, str | None]] = []
    for _slot in range(n_events):
        options: dict[int, list[tuple[str, str | None, str | None]]] = {}
        for k, s in enumerate(states):
            if s.gone:
                continue
            opts: list[tuple[str, str | None, str | None]] = []
            if s.n_events == 0:
                opts.append(("appear", None, None))
            opts.append(("disappear", None, None))
            row, col = _cell(s.x, s.y)
            for d, (dx, dy) in DIRECTIONS.items():
                if 0 <= row + dy <= 2 and 0 <= col + dx <= 2:
                    opts.append(("move", d, None))
            if s.level < 1:
                opts.append(("grow", None, None))
            if s.level > -1:
                opts.append(("shrink", None, None))
            for c in colours_ok:
                if c != s.colour:
                    opts.append(("recolor", None, c))
            options[k] = opts
        if not options:
            break
        k = int(rng.choice(list(options)))
        opts = options[k]
        kinds = sorted({o[0] for o in opts}, key=EVENT_KINDS.index)
        w = np.array([kind_weight[q] for q in kinds])
        kind = kinds[int(rng.choice(len(kinds), p=w / w.sum()))]
        variants = [o for o in opts if o[0] == kind]
        _, direction, colour = variants[int(rng.integers(len(variants)))]
        s = states[k]
        if kind == "appear":
            s.visible = True
        elif kind == "disappear":
            s.gone = True
        elif kind == "move":
            dx, dy = DIRECTIONS[direction]
            s.x += dx * MOVE_DISTANCE
            s.y += dy * MOVE_DISTANCE
        elif kind in ("grow", "shrink"):
            s.level += 1 if kind == "grow" else -1
        elif kind == "recolor":
            s.colour = colour
        s.n_events += 1
        picked.append((k, kind, direction, colour))
    n = len(picked)
    events = tuple(Event(kind=kind, obj=k, start=round((j + 0.1) / n, 4), end=round((j + 0.9) / n, 4),
                         direction=direction, colour=colour)
                   for j, (k, kind, direction, colour) in enumerate(picked))
    spec = SceneSpec(background=background, objects=tuple(objects), events=events)
    validate_spec(spec)
    return spec


# --------------------------------------------------------------------------------------------------
# Renderer
# --------------------------------------------------------------------------------------------------


def _shape_mask(shape: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Inside-test on coordinates normalised by the half-size (u right, v down); shapes fit |u|,|v| <= 1."""
    au, av_ = np.abs(u), np.abs(v)
    if shape == "circle":
        return u * u + v * v <= 1.0
    if shape == "square":
        return np.maximum(au, av_) <= 0.85
    if shape == "diamond":
        return au + av_ <= 1.0
    if shape == "triangle":
        return (v <= 0.8) & (au <= (v + 1.0) / 1.8)
    if shape == "hexagon":
        return (av_ <= 0.866) & (0.866 * au + 0.5 * av_ <= 0.866)
    if shape == "cross":
        return ((au <= 0.3) & (av_ <= 0.95)) | ((av_ <= 0.3) & (au <= 0.95))
    if shape == "heart":
        x, y = u * 1.15, -v * 1.15 + 0.15
        q = x * x + y * y - 1.0
        return q * q * q - x * x * y * y * y <= 0.0
    if shape == "star":
        n, inner = 5, 0.45
        rho = np.hypot(u, v)
        sector = 2 * np.pi / n
        beta = np.mod(np.arctan2(v, u) + np.pi / 2, sector)  # 0 at an outer point, the top one is up
        beta = np.minimum(beta, sector - beta)
        # edge from the outer vertex (1, 0) to the inner vertex at angle pi/n, in sector coordinates
        ix, iy = inner * math.cos(np.pi / n), inner * math.sin(np.pi / n)
        nx, ny = iy, 1.0 - ix  # normal of the edge line
        edge = nx / (nx * np.cos(beta) + ny * np.sin(beta))  # distance to the edge along the ray
        return rho <= edge
    raise VlgapError(f"unknown shape {shape!r}; valid: {list(SHAPES)}")


def parse_frame_size(size: int | Sequence[int]) -> tuple[int, int]:
    """(height, width) from an int or a pair; both even (yuv420p) and at least 16."""
    h, w = (size, size) if isinstance(size, (int, np.integer)) else tuple(size)
    h, w = int(h), int(w)
    if h < 16 or w < 16 or h % 2 or w % 2:
        raise VlgapError(f"frame size must be even and at least 16 pixels per side (yuv420p), got {h}x{w}")
    return h, w


def _skimage_data_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise VlgapError("photo backgrounds need scikit-image (pip install scikit-image)")
    return Path(spec.submodule_search_locations[0]) / "data"


def photo_path(name: str) -> Path:
    """Local file of a scikit-image photo background; a clear error if it is not installed."""
    if name not in PHOTO_BACKGROUNDS:
        raise VlgapError(f"unknown photo background {name!r}; valid: {sorted(PHOTO_BACKGROUNDS)}")
    path = _skimage_data_dir() / PHOTO_BACKGROUNDS[name][0]
    if not path.is_file():
        raise VlgapError(f"photo background {name!r}: {path} is missing from the installed scikit-image")
    return path


@lru_cache(maxsize=64)
def _background(name: str, h: int, w: int) -> np.ndarray:
    """The background image, centre-cropped to the frame's aspect ratio and resized; read-only, cached."""
    if name in PLAIN_BACKGROUNDS:
        img = np.empty((h, w, 3), np.uint8)
        img[:] = PLAIN_BACKGROUNDS[name]
    else:
        from PIL import Image

        with Image.open(photo_path(name)) as im:
            if im.mode in ("RGBA", "LA", "P"):
                im = im.convert("RGBA")
                canvas = Image.new("RGBA", im.size, (255, 255, 255, 255))
                im = Image.alpha_composite(canvas, im)
            im = im.convert("RGB")
            iw, ih = im.size
            scale = max(w / iw, h / ih)
            cw, ch = w / scale, h / scale
            left, top = (iw - cw) / 2, (ih - ch) / 2
            im = im.resize((w, h), Image.BILINEAR, box=(left, top, left + cw, top + ch))
            img = np.asarray(im, dtype=np.uint8).copy()
    img.setflags(write=False)
    return img


def _timeline(spec: SceneSpec, t: np.ndarray):
    """Per object, arrays over frame times: centre x, y (fractions), scale, alpha, rgb colour."""
    n_obj, n_t = len(spec.objects), len(t)
    x = np.array([[o.x] * n_t for o in spec.objects], float)
    y = np.array([[o.y] * n_t for o in spec.objects], float)
    scale = np.ones((n_obj, n_t))
    rgb = np.array([[COLOURS[o.colour]] * n_t for o in spec.objects], float)
    alpha = np.ones((n_obj, n_t))
    for i in spec.time_order():
        e = spec.events[i]
        p = np.clip((t - e.start) / (e.end - e.start), 0.0, 1.0)
        k = e.obj
        if e.kind == "appear":
            alpha[k] *= p
        elif e.kind == "disappear":
            alpha[k] *= 1.0 - p
        elif e.kind == "move":
            dx, dy = DIRECTIONS[e.direction]
            x[k] += dx * MOVE_DISTANCE * p
            y[k] += dy * MOVE_DISTANCE * p
        elif e.kind in ("grow", "shrink"):
            scale[k] *= (GROW_FACTOR if e.kind == "grow" else 1 / GROW_FACTOR) ** p
        elif e.kind == "recolor":
            target = np.array(COLOURS[e.colour], float)
            rgb[k] = rgb[k] * (1 - p[:, None]) + target * p[:, None]
    return x, y, scale, alpha, rgb


def render(spec: SceneSpec | dict, n_frames: int = 32, size: int | Sequence[int] = 128) -> np.ndarray:
    """Draw a scene: uint8 array [n_frames, H, W, 3]. Deterministic; frame f shows time (f + 0.5) / n_frames.
    Appear/disappear fade, moves and size changes interpolate linearly within the event's time span."""
    if isinstance(spec, dict):
        spec = spec_from_dict(spec)
    if n_frames < 1:
        raise VlgapError(f"n_frames must be at least 1, got {n_frames}")
    h, w = parse_frame_size(size)
    frames = np.empty((n_frames, h, w, 3), np.uint8)
    frames[:] = _background(spec.background, h, w)
    t = (np.arange(n_frames) + 0.5) / n_frames
    x, y, scale, alpha, rgb = _timeline(spec, t)
    outline = spec.background in PHOTO_BACKGROUNDS
    side = min(h, w)
    for k, o in enumerate(spec.objects):
        base_r = SIZES[o.size] * side
        for f in range(n_frames):
            a = alpha[k, f]
            if a <= 0.0:
                continue
            r = base_r * scale[k, f]
            cx, cy = x[k, f] * w, y[k, f] * h
            pad = r + max(1.5, 0.12 * r) + 1
            x0, x1 = max(0, int(cx - pad)), min(w, int(math.ceil(cx + pad)))
            y0, y1 = max(0, int(cy - pad)), min(h, int(math.ceil(cy + pad)))
            if x0 >= x1 or y0 >= y1:
                continue
            u = (np.arange(x0, x1) + 0.5 - cx)[None, :]
            v = (np.arange(y0, y1) + 0.5 - cy)[:, None]
            win = frames[f, y0:y1, x0:x1].astype(np.float32)
            colour = rgb[k, f]
            layers = []
            if outline:
                ro = r + max(1.5, 0.12 * r)
                lum = 0.299 * colour[0] + 0.587 * colour[1] + 0.114 * colour[2]
                layers.append((_shape_mask(o.shape, u / ro, v / ro), (0.0, 0.0, 0.0) if lum > 90 else (255.0,) * 3))
            layers.append((_shape_mask(o.shape, u / r, v / r), colour))
            for mask, c in layers:
                m = mask.astype(np.float32)[..., None] * a
                win = win * (1.0 - m) + np.asarray(c, np.float32) * m
            frames[f, y0:y1, x0:x1] = np.clip(np.rint(win), 0, 255).astype(np.uint8)
    return frames


# --------------------------------------------------------------------------------------------------
# Captions
# --------------------------------------------------------------------------------------------------

_NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight")
_SIZE_WORDS = {"small": ("small", "little"), "medium": ("medium-sized",), "large": ("large", "big")}
_CELL_PHRASES = {
    "top left": ("in the top left corner", "at the top left"),
    "top": ("at the top", "near the top edge"),
    "top right": ("in the top right corner", "at the top right"),
    "left": ("on the left", "at the left side"),
    "centre": ("in the centre", "in the middle"),
    "right": ("on the right", "at the right side"),
    "bottom left": ("in the bottom left corner", "at the bottom left"),
    "bottom": ("at the bottom", "near the bottom edge"),
    "bottom right": ("in the bottom right corner", "at the bottom right"),
}
_TIME_WORDS = (("early on", "at the beginning"), ("midway through", "in the middle of the clip"),
               ("near the end", "towards the end"))


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _join(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


class _Writer:
    """Wording choices for one caption. Event phrases draw from their own stream keyed by the event's
    index in spec.events, so a spec with two events' times swapped gets the same phrases in a new order."""

    def __init__(self, spec: SceneSpec, seed: int, slot: int, before: dict[int, _ObjState]):
        self.spec, self.seed, self.slot, self.before = spec, seed, slot, before
        self.rng = np.random.default_rng([seed, slot])

    def pick(self, options: Sequence[str], rng: np.random.Generator | None = None) -> str:
        return options[int((rng or self.rng).integers(len(options)))]

    def bg(self) -> str:
        name = self.spec.background
        if name in PLAIN_BACKGROUNDS:
            return self.pick((f"a {name} background", f"a plain {name} background"))
        return self.pick(PHOTO_BACKGROUNDS[name][1])

    def obj(self, k: int, size: bool = False, article: bool = True, colour: str | None = None) -> str:
        o = self.spec.objects[k]
        words = [self.pick(_SIZE_WORDS[o.size])] if size else []
        words += [colour or o.colour, o.shape]
        np_ = " ".join(words)
        return _a(np_) if article else "the " + np_

    def pos(self, x: float, y: float) -> str:
        row, col = _cell(x, y)
        return self.pick(_CELL_PHRASES[CELL_NAMES[row][col]])

    def verb(self, i: int) -> str:
        """Verb phrase of event i (without subject)."""
        e = self.spec.events[i]
        rng = np.random.default_rng([self.seed, self.slot, 1000 + i])
        if e.kind == "appear":
            return self.pick(("appears", "pops up", "fades in"), rng)
        if e.kind == "disappear":
            return self.pick(("disappears", "vanishes", "fades away"), rng)
        if e.kind == "move":
            d = e.direction
            opts = (f"moves to the {d}", f"slides to the {d}", f"moves {d}") if d in ("left", "right") else \
                (f"moves {d}", f"slides {d}", "rises" if d == "up" else "drops down")
            return self.pick(opts, rng)
        if e.kind == "grow":
            return self.pick(("grows", "gets bigger", "expands"), rng)
        if e.kind == "shrink":
            return self.pick(("shrinks", "gets smaller", "becomes smaller"), rng)
        return self.pick((f"turns {e.colour}", f"changes colour to {e.colour}", f"becomes {e.colour}"), rng)

    def subject(self, i: int) -> str:
        e = self.spec.events[i]
        return self.obj(e.obj, article=False, colour=self.before[i].colour)

    def clause(self, i: int) -> str:
        return f"{self.subject(i)} {self.verb(i)}"

    def narrative(self, idx: list[int]) -> str:
        """Events in the given order, joined with ordering words."""
        parts = [self.clause(idx[0])]
        for prev, i in zip(idx, idx[1:]):
            same = self.spec.events[prev].obj == self.spec.events[i].obj
            nxt = self.verb(i) if same else self.clause(i)
            parts.append(self.pick(("then ", "and then ", "after that ")) + nxt)
        return ", ".join(parts)


def _order_facts(idx: list[int]) -> list[str]:
    """'order<a>-<b>' for every pair that a narrative of events `idx` (in time order) puts in order."""
    return [f"order{a}-{b}" for j, a in enumerate(idx) for b in idx[j + 1:]]


def _count_np(n: int) -> str:
    return f"{_NUMBERS[n]} shape" + ("" if n == 1 else "s")


def _compose(spec: SceneSpec, seed: int, slot: int, before, final) -> tuple[str, list[str]]:
    """Caption number `slot` (0..9) and the facts it states."""
    W = _Writer(spec, seed, slot, before)
    n_obj = len(spec.objects)
    order = spec.time_order()
    ev = [f"ev{i}" for i in order]
    objs = [f"obj{k}" for k in range(n_obj)]
    if slot == 0:  # gist: one object and the background
        a, bg = W.obj(0), W.bg()
        text = W.pick((f"{_cap(a)} on {bg}.", f"{_cap(a)} in front of {bg}.", f"There is {a} on {bg}.",
                       f"{_cap(bg)} with {a} on it."))
        return text, ["bg", "obj0"]
    if slot == 1:  # how many objects and which
        lst = _join([W.obj(k) for k in range(n_obj)])
        if n_obj == 1:
            text = W.pick((f"A single shape: {lst}.", f"There is only one shape, {lst}.",
                           f"The video shows just one shape, {lst}."))
        else:
            c = _count_np(n_obj)
            text = W.pick((f"{_cap(c)}: {lst}.", f"There are {c}: {lst}.", f"The video shows {c}: {lst}."))
        return text, ["count", *objs]
    if slot == 2:  # the first event alone
        e = W.clause(order[0])
        options = [f"{_cap(e)}.", f"In this video, {e}."]
        if len(order) > 1:  # "first" would wrongly suggest more events otherwise
            options += [f"First, {e}.", f"To begin with, {e}."]
        return W.pick(options), [ev[0]]
    if slot == 3:  # the background and the last event
        e, bg = W.clause(order[-1]), W.bg()
        return W.pick((f"On {bg}, {e}.", f"{_cap(e)} on {bg}.", f"Against {bg}, {e}.")), ["bg", ev[-1]]
    if slot == 4:  # layout: sizes and start positions
        parts = [f"{W.obj(k, size=True)} {W.pos(o.x, o.y)}" for k, o in enumerate(spec.objects)]
        lst = _join(parts)
        text = W.pick((f"{_cap(lst)}.", f"There is {lst}.", f"We see {lst}."))
        return text, [*objs, *(f"size{k}" for k in range(n_obj)), *(f"pos{k}" for k in range(n_obj))]
    if slot == 5:  # order of two consecutive events
        if len(order) == 1:
            i = order[0]
            k = spec.events[i].obj
            o = spec.objects[k]
            if spec.events[i].kind == "appear":
                text = f"{_cap(W.subject(i))} {W.verb(i)} {W.pos(o.x, o.y)}."
            else:
                text = f"{_cap(W.subject(i))} starts {W.pos(o.x, o.y)} and then {W.verb(i)}."
            return text, [f"obj{k}", f"pos{k}", ev[0]]
        j = int(W.rng.integers(len(order) - 1))
        i1, i2 = order[j], order[j + 1]
        e1, e2 = W.clause(i1), W.clause(i2)
        if spec.events[i1].obj == spec.events[i2].obj:
            text = f"{_cap(e1)} and then {W.verb(i2)}."
        else:
            text = W.pick((f"{_cap(e1)}, then {e2}.", f"{_cap(e1)} before {e2}.", f"After {e1}, {e2}.",
                           f"First {e1}, and then {e2}.", f"{_cap(e2)} after {e1}."))
        return text, [ev[j], ev[j + 1], f"order{i1}-{i2}"]
    if slot == 6:  # the end state
        bg = W.bg()
        left = [(k, s) for k, s in enumerate(final) if s.visible]
        if not left:
            text = W.pick((f"By the end, every shape has vanished from {bg}.",
                           f"The clip ends with just {bg} and no shapes."))
        else:
            lst = _join([f"{W.obj(k, colour=s.colour)} {W.pos(s.x, s.y)}" for k, s in left])
            verb = "remains" if len(left) == 1 else "remain"
            text = W.pick((f"By the end, {lst} {verb} on {bg}.", f"The clip ends with {lst} on {bg}."))
        return text, ["bg", "end"]
    if slot == 7:  # the story of the busiest object
        counts = [sum(e.obj == k for e in spec.events) for k in range(n_obj)]
        k = int(np.argmax(counts))
        o = spec.objects[k]
        mine = [i for i in order if spec.events[i].obj == k]
        vps = [W.verb(i) for i in mine]
        vp = vps[0] if len(vps) == 1 else ", ".join(vps[:-1]) + " and then " + vps[-1]
        subj = _cap(W.obj(k, size=True, article=False))
        text = W.pick((f"{subj} {W.pos(o.x, o.y)} {vp}.", f"{subj}, which starts {W.pos(o.x, o.y)}, {vp}."))
        facts = [f"obj{k}", f"size{k}", f"pos{k}", *(f"ev{i}" for i in mine), *_order_facts(mine)]
        return text, facts
    if slot == 8:  # when things happen
        parts, last_third = [], None
        for i in order:
            e = spec.events[i]
            third = min(2, int((e.start + e.end) / 2 * 3))
            when = W.pick(_TIME_WORDS[third]) if third != last_third else W.pick(("then", "after that"))
            parts.append(f"{when}, {W.clause(i)}")
            last_third = third
        text = _cap("; ".join(parts)) + "."
        facts = [*ev, *(f"time{i}" for i in order), *_order_facts(order)]
        return text, facts
    if slot == 9:  # summary
        lst, bg = _join([W.obj(k) for k in range(n_obj)]), W.bg()
        story = W.narrative(order)
        text = W.pick((f"On {bg}, there {'is' if n_obj == 1 else 'are'} {lst}; {story}.",
                       f"{_cap(lst)} on {bg}: {story}.",
                       f"A video of {lst} on {bg} in which {story}."))
        facts = ["bg", "count", *objs, *ev, *_order_facts(order)]
        return text, facts
    raise VlgapError(f"caption slot must be 0..9, got {slot}")


N_CAPTIONS = 10


def _caption_set(spec: SceneSpec, seed: int) -> list[tuple[str, list[str]]]:
    final, before = _simulate(spec)
    out: list[tuple[str, list[str]]] = []
    seen: set[str] = set()
    for slot in range(N_CAPTIONS):
        text, facts = _compose(spec, seed, slot, before, final)
        retry = 0
        while text in seen and retry < 20:  # same words by chance: draw another wording
            retry += 1
            text, facts = _compose(spec, seed + 7919 * retry, slot, before, final)
        if text in seen:
            text = text[:-1] + " in this clip."
        seen.add(text)
        out.append((text, facts))
    return out


def write_captions(spec: SceneSpec | dict, seed: int = 0) -> list[str]:
    """Ten different captions of a scene, each stating a different subset of its facts:
    0 gist (an object + background), 1 count and identities, 2 first event, 3 background + last event,
    4 sizes and start positions, 5 order of two consecutive events, 6 end state, 7 the busiest object's
    story, 8 when each event happens, 9 summary. Together they state every fact of the spec."""
    if isinstance(spec, dict):
        spec = spec_from_dict(spec)
    return [t for t, _ in _caption_set(spec, seed)]


def caption_facts(spec: SceneSpec | dict, seed: int = 0) -> list[list[str]]:
    """Fact ids stated by each caption of `write_captions(spec, seed)`: bg, count, obj<k>, size<k>,
    pos<k> (start cell), ev<i>, order<i>-<j> (event i happens before event j), time<i> (which third of
    the clip), end (final state)."""
    if isinstance(spec, dict):
        spec = spec_from_dict(spec)
    return [f for _, f in _caption_set(spec, seed)]


def all_facts(spec: SceneSpec) -> set[str]:
    """Every fact id a caption of this spec can state."""
    n_obj = len(spec.objects)
    order = spec.time_order()
    facts = {"bg", "count", "end"}
    facts |= {f"{p}{k}" for k in range(n_obj) for p in ("obj", "size", "pos")}
    facts |= {f"ev{i}" for i in order} | {f"time{i}" for i in order}
    facts |= set(_order_facts(order))
    return facts


# --------------------------------------------------------------------------------------------------
# Temporal reorder (VideoComp-style negatives)
# --------------------------------------------------------------------------------------------------


def swap_event_order(spec: SceneSpec | dict, seed: int = 0, pair: tuple[int, int] | None = None) -> SceneSpec:
    """The same scene with two events' time slots exchanged (same events, different order).

    `pair` names two event indices; by default a seeded choice among consecutive pairs whose swap is
    still a possible scene (an appear stays first, a disappear last, moves stay in the frame).
    Raises VlgapError if the scene has fewer than two events or no valid swap exists."""
    if isinstance(spec, dict):
        spec = spec_from_dict(spec)
    if len(spec.events) < 2:
        raise VlgapError(f"swapping needs at least two events, the scene has {len(spec.events)}")
    if pair is not None:
        candidates = [tuple(pair)]
    else:
        order = spec.time_order()
        candidates = list(zip(order, order[1:]))
        rng = np.random.default_rng([seed, 424242])
        candidates = [candidates[j] for j in rng.permutation(len(candidates))]
    errors = []
    for a, b in candidates:
        if not (0 <= a < len(spec.events) and 0 <= b < len(spec.events)) or a == b:
            raise VlgapError(f"pair {pair} must name two different events in 0..{len(spec.events) - 1}")
        ea, eb = spec.events[a], spec.events[b]
        events = list(spec.events)
        events[a] = replace(ea, start=eb.start, end=eb.end)
        events[b] = replace(eb, start=ea.start, end=ea.end)
        swapped = replace(spec, events=tuple(events))
        try:
            validate_spec(swapped)
            return swapped
        except VlgapError as exc:
            errors.append(f"{a}<->{b}: {exc}")
    raise VlgapError("no pair of events can be swapped in this scene: " + "; ".join(errors))


def reorder_captions(spec: SceneSpec | dict, seed: int = 0) -> tuple[str, str, tuple[int, int]]:
    """(positive, negative, swapped pair): the summary caption (slot 9) of the scene and of the scene with
    two events swapped, worded identically except for the order of the events."""
    if isinstance(spec, dict):
        spec = spec_from_dict(spec)
    swapped = swap_event_order(spec, seed)
    pair = tuple(i for i, (e, f) in enumerate(zip(spec.events, swapped.events)) if e != f)
    pos = _compose(spec, seed, 9, *_before_final(spec))[0]
    neg = _compose(swapped, seed, 9, *_before_final(swapped))[0]
    return pos, neg, pair  # type: ignore[return-value]


def _before_final(spec: SceneSpec):
    final, before = _simulate(spec)
    return before, final


# --------------------------------------------------------------------------------------------------
# Writing videos and the dataset
# --------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _default_codec() -> str:
    import av

    for name in ("libx264", "mpeg4"):
        try:
            av.codec.Codec(name, "w")
            return name
        except Exception:  # noqa: BLE001 - PyAV raises several types for a missing encoder
            continue
    raise VlgapError("the installed PyAV has neither the libx264 nor the mpeg4 encoder")


def write_mp4(path: str | os.PathLike, frames: np.ndarray, fps: int = 8, codec: str | None = None) -> Path:
    """Encode uint8 [T,H,W,3] frames (even H, W) to an mp4 (yuv420p), atomically (temp file + rename)."""
    import av

    path = Path(path)
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise VlgapError(f"{path.name}: frames must be uint8 [T,H,W,3], got {frames.dtype} {frames.shape}")
    parse_frame_size(frames.shape[1:3])
    codec = codec or _default_codec()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with av.open(str(tmp), "w", format="mp4") as container:
            stream = container.add_stream(codec, rate=fps)
            stream.width, stream.height = frames.shape[2], frames.shape[1]
            stream.pix_fmt = "yuv420p"
            stream.codec_context.thread_count = 1  # 2 shared cores; also keeps output bytes reproducible
            if codec == "libx264":
                stream.options = {"crf": "18", "preset": "veryfast"}
            else:
                stream.options = {"qscale": "3"}
            for frame in frames:
                for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def write_manifest_lines(path: str | os.PathLike, items: list[dict[str, Any]]) -> Path:
    """Write manifest items as JSON lines, atomically."""
    path = Path(path)
    atomic_write_text(path, "".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items))
    return path


def item_rng(seed: int, index: int) -> np.random.Generator:
    """Generator for item `index`: independent of how many items are drawn, so the first 256 items of a
    1024-item set equal a 256-item set with the same seed."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))


def generate_shapes(out_dir: str | os.PathLike, n: int, seed: int = 0, n_frames: int = 32,
                    size: int | Sequence[int] = 128, fps: int = 8, photo_fraction: float = 0.5,
                    codec: str | None = None,
                    progress: Callable[[int, int], None] | None = None) -> Path:
    """Sample `n` scenes by seed, render each to `out_dir/videos/<id>.mp4`, write 10 captions each, and
    write `out_dir/manifest.jsonl` (meta: spec, caption_seed, caption_facts, reorder pair when the scene
    has two or more events). Returns the manifest path."""
    if n < 1:
        raise VlgapError(f"n must be at least 1, got {n}")
    if not 0.0 <= photo_fraction <= 1.0:
        raise VlgapError(f"photo_fraction must lie in [0, 1], got {photo_fraction}")
    h, w = parse_frame_size(size)
    out_dir = Path(out_dir)
    (out_dir / "videos").mkdir(parents=True, exist_ok=True)
    items = []
    t0 = time.perf_counter()
    for i in range(n):
        rng = item_rng(seed, i)
        spec = sample_spec(rng, photo_fraction=photo_fraction)
        caption_seed = int(rng.integers(2**31 - 1))
        item_id = f"shapes_{i:05d}"
        rel = f"videos/{item_id}.mp4"
        write_mp4(out_dir / rel, render(spec, n_frames, (h, w)), fps=fps, codec=codec)
        caps = _caption_set(spec, caption_seed)
        # like VATEX's ten annotators, captions come in no fixed order of kind: the paper takes the
        # first n_c, which must then be a random subset of kinds, not always the background caption
        order = [int(j) for j in np.random.default_rng([caption_seed, 0xA770]).permutation(len(caps))]
        caps = [caps[j] for j in order]
        meta: dict[str, Any] = {"spec": spec.to_dict(), "caption_seed": caption_seed, "caption_kinds": order,
                                "caption_facts": [f for _, f in caps], "n_frames": n_frames,
                                "size": [h, w], "fps": fps, "generator": "shapes", "seed": seed}
        if len(spec.events) >= 2:
            try:
                pos, neg, pair = reorder_captions(spec, caption_seed)
                meta["reorder"] = {"positive": pos, "negative": neg, "swapped_events": list(pair)}
            except VlgapError:
                pass  # no valid swap (e.g. appear followed by the same object's disappear)
        items.append({"id": item_id, "video": rel, "captions": [t for t, _ in caps], "meta": meta})
        if progress is not None:
            progress(i + 1, n)
    manifest = write_manifest_lines(out_dir / "manifest.jsonl", items)
    atomic_write_text(out_dir / "generator.json", json.dumps(
        {"generator": "shapes", "n": n, "seed": seed, "n_frames": n_frames, "size": [h, w], "fps": fps,
         "photo_fraction": photo_fraction, "codec": codec or _default_codec(),
         "seconds": round(time.perf_counter() - t0, 3)}, indent=2) + "\n")
    return manifest
