"""Scene specs of the shapes world: the vocabulary, `SceneObject` / `Event` / `SceneSpec`, validation
(`validate_spec`, `simulate` walks a timeline) and the seeded sampler `sample_spec`."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from vlgap.errors import VlgapError

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

#: camera behaviour over the clip: the visible window of the scene pans (translates horizontally) or
#: zooms (scales about the centre); see render.camera_windows
CAMERAS = ("static", "pan left", "pan right", "zoom in", "zoom out")
#: short phrases for a scene's camera (the Camera field of a six-part prompt schema)
CAMERA_DESCRIPTIONS = {
    "static": "static camera, the view does not move",
    "pan left": "the camera pans slowly to the left",
    "pan right": "the camera pans slowly to the right",
    "zoom in": "the camera slowly zooms in on the centre",
    "zoom out": "the camera slowly zooms out from the centre",
}

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
    camera: str = "static"  # one of CAMERAS

    def to_dict(self) -> dict[str, Any]:
        d = {
            "background": self.background,
            "objects": [asdict(o) for o in self.objects],
            "events": [{k: v for k, v in asdict(e).items() if v is not None} for e in self.events],
        }
        if self.camera != "static":  # static specs keep the form they had before cameras existed
            d["camera"] = self.camera
        return d

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
        spec = SceneSpec(background=d["background"], objects=objects, events=events,
                         camera=d.get("camera", "static"))
    except (KeyError, TypeError, ValueError) as exc:
        raise VlgapError(f"scene spec is malformed ({exc!r}); expected {{'background': str, 'objects': "
                         "[{shape, colour, size, x, y}], 'events': [{kind, obj, start, end, ...}]}") from exc
    validate_spec(spec)
    return spec


def cell(x: float, y: float) -> tuple[int, int]:
    """(row, col) of the 3x3 grid that contains a point given in frame fractions."""
    return (min(2, max(0, int(y * 3))), min(2, max(0, int(x * 3))))


@dataclass
class ObjState:
    colour: str
    x: float
    y: float
    level: int = 0  # net grow(+1)/shrink(-1) steps
    visible: bool = True
    gone: bool = False  # disappeared: no later events
    n_events: int = 0


def simulate(spec: SceneSpec) -> tuple[list[ObjState], dict[int, ObjState]]:
    """Walk the events in time order; return final states and, per event index, the object's state
    just before that event. Raises VlgapError on an event that the scene cannot perform."""
    first_kind = {}
    for i in spec.time_order():
        first_kind.setdefault(spec.events[i].obj, spec.events[i].kind)
    states = [ObjState(o.colour, o.x, o.y, visible=first_kind.get(k) != "appear")
              for k, o in enumerate(spec.objects)]
    before: dict[int, ObjState] = {}
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
    if spec.camera not in CAMERAS:
        raise VlgapError(f"unknown camera {spec.camera!r}; valid: {list(CAMERAS)}")
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
    simulate(spec)


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
                max_events: int = 4, camera_fraction: float = 0.0) -> SceneSpec:
    """Draw a random valid scene: 1..max_objects objects with distinct shapes on distinct cells of a 3x3
    grid, and 1..max_events events in consecutive equal time slots. With camera_fraction > 0 the camera
    moves (a uniform choice of pan left/right, zoom in/out) with that probability; it is drawn after
    everything else, and nothing is drawn at 0, so the other fields (and, at 0, the stream) stay as
    they were."""
    if not 0.0 <= camera_fraction <= 1.0:
        raise VlgapError(f"camera_fraction must lie in [0, 1], got {camera_fraction}")
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
    states = [ObjState(o.colour, o.x, o.y) for o in objects]
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
            row, col = cell(s.x, s.y)
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
    camera = "static"
    if camera_fraction > 0 and rng.random() < camera_fraction:
        camera = CAMERAS[1 + int(rng.integers(len(CAMERAS) - 1))]
    spec = SceneSpec(background=background, objects=tuple(objects), events=events, camera=camera)
    validate_spec(spec)
    return spec



def item_rng(seed: int, index: int) -> np.random.Generator:
    """Generator for item `index`: independent of how many items are drawn, so the first 256 items of a
    1024-item set equal a 256-item set with the same seed."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))

