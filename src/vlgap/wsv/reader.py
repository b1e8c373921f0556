"""Caption reader for the shapes world: free text -> scene spec (the inverse of the caption writer).

A text-to-video model turns a caption into a video and invents whatever the caption leaves open. The
reader does the same for the shapes world: it reads the facts a caption states (background, how many
shapes, each shape's colour, size and start cell, the events and their order, which third of the clip
they happen in, the end state, what the camera does), samples everything else from the same
distribution as `data.shapes.sample_spec` (a camera no caption mentions is static), and reports
which facts it could not read. It accepts captions it did not write: synonyms ("grey", "big",
"becomes larger", "fades out"), other word orders ("X after Y"), and extra words it ignores (those
are listed in `ignored`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from vlgap.data.shapes import (COLOURS, DIRECTIONS, PHOTO_BACKGROUNDS, PLAIN_BACKGROUNDS, SHAPES,
                               SIZES, Event, SceneObject, SceneSpec, validate_spec)
from vlgap.errors import VlgapError

#: bumped whenever the same caption may be read into another spec (2: camera phrases are read), so that
#: caches keyed on a generator's record are recomputed
READER_VERSION = 2

# ----------------------------------------------------------------------------------------------
# Vocabulary (writer's words plus common paraphrases)

_SHAPE_WORDS = {s: s for s in SHAPES} | {"ring": "circle", "disc": "circle", "disk": "circle", "box": "square",
                                         "rhombus": "diamond", "hexagonal shape": "hexagon", "plus": "cross",
                                         "plus sign": "cross", "hearts": "heart", "circles": "circle",
                                         "squares": "square", "triangles": "triangle", "stars": "star"}
_COLOUR_WORDS = {c: c for c in COLOURS} | {"violet": "purple", "magenta": "pink", "turquoise": "cyan",
                                           "golden": "yellow"}
_SIZE_WORDS = {"small": "small", "little": "small", "tiny": "small", "medium-sized": "medium",
               "medium sized": "medium", "medium": "medium", "mid-sized": "medium", "large": "large",
               "big": "large", "huge": "large"}
_PLAIN_BG = {b: b for b in PLAIN_BACKGROUNDS} | {"grey": "gray", "dark-green": "dark green"}
# keyword (regex) -> photo background name; the writer's phrases and obvious paraphrases
_PHOTO_KEYS = [(r"astronaut", "astronaut"), (r"\b(cat|kitten|tabby)\b", "chelsea"),
               (r"coffee|espresso", "coffee"), (r"rocket|launch pad", "rocket"), (r"\bhorse", "horse"),
               (r"cameraman|man with a camera|photographer", "camera"), (r"motorcycle|motorbike", "motorcycle"),
               (r"galax|deep space|starry space|hubble", "hubble_deep_field"),
               (r"\bmoon|lunar", "moon"), (r"brick", "brick"), (r"\bgrass", "grass"), (r"\bcoins?\b", "coins")]
_CELLS = {"top left": (0, 0), "upper left": (0, 0), "top right": (0, 2), "upper right": (0, 2),
          "bottom left": (2, 0), "lower left": (2, 0), "bottom right": (2, 2), "lower right": (2, 2),
          "top": (0, 1), "upper": (0, 1), "bottom": (2, 1), "lower": (2, 1), "left": (1, 0), "right": (1, 2),
          "centre": (1, 1), "center": (1, 1), "middle": (1, 1)}
_NUMBER_WORDS = {"one": 1, "single": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                 "eight": 8, "1": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8}

_C = "|".join(sorted(map(re.escape, _COLOUR_WORDS), key=len, reverse=True))
_S = "|".join(sorted(map(re.escape, _SHAPE_WORDS), key=len, reverse=True))
_Z = "|".join(sorted(map(re.escape, _SIZE_WORDS), key=len, reverse=True))
_MENTION = re.compile(rf"\b(?:(?P<size>{_Z})\s+)?(?:(?P<colour>{_C})\s+)?(?P<shape>{_S})\b")
_DIR = r"(?P<dir>left|right|up|down|upwards?|downwards?|leftwards?|rightwards?)"
# verb patterns -> event kind; tried in this order at the start of the text after a subject
_VERBS: list[tuple[str, re.Pattern]] = [
    ("recolor", re.compile(rf"^(?:turns|changes colou?r to|changes to|becomes|goes|is recolou?red|"
                           rf"switches to|changes into)\s+(?P<col>{_C})\b")),
    ("appear", re.compile(r"^(?:appears|pops up|fades in|shows up|emerges|comes into view)\b")),
    ("disappear", re.compile(r"^(?:disappears|vanishes|fades away|fades out|goes away|is gone|"
                             r"leaves the (?:frame|scene))\b")),
    ("move", re.compile(rf"^(?:moves|slides|shifts|goes|travels|glides|drifts)\s+(?:to(?:wards)? the\s+)?{_DIR}\b")),
    ("move", re.compile(r"^(?P<dir>rises|drops down|drops|falls|sinks|goes up|goes down|climbs)\b")),
    ("grow", re.compile(r"^(?:grows|gets bigger|gets larger|expands|becomes bigger|becomes larger|enlarges|"
                        r"increases in size|swells)\b")),
    ("shrink", re.compile(r"^(?:shrinks|gets smaller|becomes smaller|contracts|decreases in size)\b")),
]
_DIR_NORMAL = {"upward": "up", "upwards": "up", "downward": "down", "downwards": "down", "leftward": "left",
               "leftwards": "left", "rightward": "right", "rightwards": "right", "rises": "up", "goes up": "up",
               "climbs": "up", "drops down": "down", "drops": "down", "falls": "down", "sinks": "down",
               "goes down": "down"}
_CHAIN = re.compile(r"^(?:\s*,\s*(?:and then\s+|then\s+|and after that\s+|after that\s+|afterwards\s+|and\s+)?"
                    r"|\s+(?:and then|then|and after that|after that|afterwards|and)\s+)")
_TIME = [(re.compile(r"early on|at the (?:beginning|start)|first of all|initially"), 0),
         (re.compile(r"midway(?: through)?|in the middle of the (?:clip|video)|halfway"), 1),
         (re.compile(r"near the end|towards? the end|at the end of the clip|finally|in the end"), 2)]
_END = re.compile(r"by the end|clip ends|video ends|at the end,|ends with|remains?\b|is left|are left")
_NOTHING_LEFT = re.compile(r"every shape has (?:vanished|disappeared)|no shapes|nothing (?:is )?left|"
                           r"all (?:the )?shapes? (?:have )?(?:vanished|disappeared)")
# what the camera does ("as the camera pans left", "while the view slowly zooms in", "static camera")
_CAMERA_MOVE = re.compile(
    r"\b(?:the\s+)?(?:camera|view)\s+(?:(?:is|keeps)\s+)?(?:slowly\s+|gradually\s+)?"
    r"(?:(?:pans|pan|panning)\s+(?:slowly\s+)?(?:(?:to|towards)\s+the\s+)?(?P<side>left|right)"
    r"|(?:zooms|zoom|zooming)\s+(?:slowly\s+)?(?P<io>in|out)\b(?:\s+(?:on|from)\s+the\s+(?:centre|center|middle))?)\b")
_CAMERA_STILL = re.compile(r"\b(?:static|still|fixed|steady)\s+camera\b|\bcamera\s+(?:is\s+|stays\s+)?"
                           r"(?:static|still|fixed|steady)\b|\b(?:camera|view)\s+(?:does not|doesnt|never)\s+move")
_FILLER = set("a an the on in of at to with there is are we see video shows clip this just only it its "
              "which starts first then after that before and begin to by end ends remains remain shapes shape "
              "photo picture image against front background plain one single".split())


@dataclass
class _Obj:
    shape: str
    colour: str | None = None
    size: str | None = None
    cell: tuple[int, int] | None = None
    end_cell: tuple[int, int] | None = None
    end_colour: str | None = None
    first_pos: int = 0


@dataclass
class _Ev:
    kind: str
    shape: str
    pos: int  # character position in the text (reading order)
    direction: str | None = None
    colour: str | None = None
    subject_colour: str | None = None
    third: int | None = None
    rank: float = 0.0


@dataclass
class Reading:
    """What the reader made of one caption."""

    text: str
    spec: SceneSpec
    read: list[str]  # facts stated by the text, e.g. "background", "colour of the circle", "event 1: move"
    unread: list[str]  # facts the text left open and the reader sampled
    ignored: list[str] = field(default_factory=list)  # words it did not use
    # only what the text itself says, before anything is sampled (the grounded score compares this, not the
    # spec, with a video's true spec): {"background": name | None, "shapes": {shape: {"colour", "end_colour",
    # "size", "cell"}}, "events": [{"kind", "shape", "direction", "colour"}]}
    stated: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"text": self.text, "spec": self.spec.to_dict(), "read": self.read, "unread": self.unread,
                "ignored": self.ignored, "stated": self.stated}


def vocabulary_summary() -> str:
    return (f"shapes {sorted(SHAPES)}, colours {sorted(COLOURS)}, plain backgrounds "
            f"{sorted(PLAIN_BACKGROUNDS)} ('a black background'), photo backgrounds {sorted(PHOTO_BACKGROUNDS)}, "
            "events appear/disappear/move left-right-up-down/grow/shrink/turn <colour>")


def _normalise(text: str) -> str:
    t = text.lower().replace("colour", "color").replace("color", "colour")  # both spellings -> colour
    t = re.sub(r"[\"'`]", "", t)
    t = re.sub(r"\s+", " ", t)
    return t.strip()


def _background(t: str) -> tuple[str | None, list[tuple[int, int]]]:
    """Background name and the character spans it used (so 'black' of 'black background' is no colour)."""
    m = re.search(rf"(?:plain\s+)?(?P<c>dark[ -]green|{'|'.join(map(re.escape, _PLAIN_BG))})\s+"
                  r"(?:background|backdrop|screen|canvas)", t)
    if m:
        return _PLAIN_BG[m.group("c")], [m.span()]
    for pat, name in _PHOTO_KEYS:
        m = re.search(pat, t)
        if m:
            # the whole photo phrase ("a photo of a cup of coffee") is background, not objects
            return name, [m.span()]
    return None, []


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in spans)


def _cell_after(t: str, start: int, stop: int) -> tuple[tuple[int, int] | None, int]:
    """The first position phrase in t[start:stop] (e.g. 'in the top left corner', 'on the left side')."""
    seg = t[start:stop]
    m = re.search(r"\b(?:in|at|on|near|towards)\s+the\s+(top left|upper left|top right|upper right|bottom left|"
                  r"lower left|bottom right|lower right|top|bottom|left|right|centre|center|middle)\b"
                  r"(?!\s+of the (?:clip|video))", seg)
    if not m:
        return None, -1
    return _CELLS[m.group(1)], start + m.start()


def _subject_events(t: str, mentions: list[re.Match]) -> list[_Ev]:
    """Events: a shape mention followed by a verb phrase, then chained verbs ('and then shrinks')."""
    evs: list[_Ev] = []
    for j, m in enumerate(mentions):
        stop = mentions[j + 1].start() if j + 1 < len(mentions) else len(t)
        rest_at = m.end()
        seg = t[rest_at:stop]
        # allow "which starts in the top left," and a position phrase between subject and verb
        cells = r"(?:top left|upper left|top right|upper right|bottom left|lower left|bottom right|lower right|" \
                r"top|bottom|left|right|centre|center|middle)(?:\s+(?:corner|side|edge))?"
        seg2 = re.sub(rf"^\s*,?\s*(?:which\s+)?starts\s+(?:in|at|on|near)\s+the\s+{cells}\s*,?\s*"
                      r"(?:and then\s+|and\s+|then\s+)?", "", seg)
        if seg2 == seg:
            seg2 = re.sub(rf"^\s*(?:in|at|on|near)\s+the\s+{cells}\s*,?\s*", "", seg)
        offset = rest_at + (len(seg) - len(seg2))
        cur = seg2.lstrip()
        offset += len(seg2) - len(cur)
        while True:
            hit = None
            for kind, pat in _VERBS:
                vm = pat.match(cur)
                if vm:
                    hit = (kind, vm)
                    break
            if hit is None:
                break
            kind, vm = hit
            d = vm.groupdict().get("dir")
            d = _DIR_NORMAL.get(d, d) if d else None
            col = vm.groupdict().get("col")
            evs.append(_Ev(kind=kind, shape=_SHAPE_WORDS[m.group("shape")], pos=offset,
                           direction=d, colour=_COLOUR_WORDS[col] if col else None,
                           subject_colour=_COLOUR_WORDS[m.group("colour")] if m.group("colour") else None))
            adv = vm.end()
            cur2 = cur[adv:]
            # "then <verb>" continues the same subject; "then the <shape>" starts a new clause
            cm = _CHAIN.match(cur2)
            if not cm:
                break
            nxt = cur2[cm.end():]
            offset += adv + cm.end()
            cur = nxt
    return evs


def _order_events(t: str, evs: list[_Ev]) -> None:
    """Rank events in time: reading order, except 'X after Y' (not 'After Y, X') which reverses a pair."""
    for e in evs:
        e.rank = float(e.pos)
    for m in re.finditer(r"\bafter\b(?! that)", t):
        if m.start() == 0 or t[max(0, m.start() - 2):m.start()].strip() in (".", ";", ","):
            continue  # sentence-initial "After Y, X": reading order is time order
        before = [e for e in evs if e.pos < m.start()]
        after = [e for e in evs if e.pos > m.start()]
        if before and after:
            a, b = before[-1], after[0]
            a.rank, b.rank = b.rank, a.rank - 0.5
    for e in evs:
        for pat, third in _TIME:
            hits = [mm for mm in pat.finditer(t) if mm.end() <= e.pos]
            if hits:
                last = hits[-1]
                later = [x for x in evs if last.end() <= x.pos < e.pos]
                # a time word applies to the next event and to those joined to it with "then"
                # ("then" after a timed event stays in that third until another time word comes)
                e.third = third if not later or all(x.third == third for x in later) else e.third
    evs.sort(key=lambda e: e.rank)


def read_caption(text: str, rng: np.random.Generator | int | None = None) -> Reading:
    """Read one caption into a scene spec; sample what it leaves open; list what it read and did not.

    Raises VlgapError when the text names neither a shape nor a background (nothing to render)."""
    if not isinstance(text, str) or not text.strip():
        raise VlgapError(f"caption {text!r} is empty; the reader understands {vocabulary_summary()}")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    t = _normalise(text)
    camera, t = _camera(t)
    bg, bg_spans = _background(t)
    mentions = [m for m in _MENTION.finditer(t) if not _inside(m.start("shape"), bg_spans)]
    if bg is None and not mentions:
        raise VlgapError(f"cannot read caption {text!r}: it names no shape and no background; the reader "
                         f"understands {vocabulary_summary()}")
    end_at = (_END.search(t).start() if _END.search(t) else len(t))
    nothing_left = bool(_NOTHING_LEFT.search(t))
    objs: dict[str, _Obj] = {}
    for m in mentions:
        shape = _SHAPE_WORDS[m.group("shape")]
        o = objs.setdefault(shape, _Obj(shape, first_pos=m.start()))
        colour = _COLOUR_WORDS[m.group("colour")] if m.group("colour") else None
        in_end = m.start() >= end_at
        if m.group("size") and o.size is None:
            o.size = _SIZE_WORDS[m.group("size")]
        if in_end:
            o.end_colour = o.end_colour or colour
        elif colour and o.colour is None:
            o.colour = colour
    evs = _subject_events(t, mentions)
    _order_events(t, evs)
    # start colour: the colour before an object's first recolour is what its subject said
    for shape, o in objs.items():
        recs = [e for e in evs if e.shape == shape and e.kind == "recolor"]
        if recs and recs[0].subject_colour:
            o.colour = recs[0].subject_colour
    # start cells: a position phrase right after a (non end-state) mention, before any verb of it
    for j, m in enumerate(mentions):
        shape = _SHAPE_WORDS[m.group("shape")]
        stop = mentions[j + 1].start() if j + 1 < len(mentions) else len(t)
        mine = [e.pos for e in evs if m.end() <= e.pos < stop]
        cell, at = _cell_after(t, m.end(), stop)
        if cell is None:
            continue
        o = objs[shape]
        if m.start() >= end_at:
            o.end_cell = o.end_cell or cell
        elif o.cell is None:
            kinds_here = [e.kind for e in evs if m.end() <= e.pos < stop]
            # "appears in the top left" states where it appears (its start cell); "moves ... to the left"
            # is a direction, never a cell; a position after a move verb is not a start position
            if mine and at > min(mine) and kinds_here[:1] != ["appear"]:
                continue
            o.cell = cell
    # how many shapes
    count = None
    m = re.search(r"\b(one|single|two|three|four|five|six|seven|eight|[1-8])\s+(?:different\s+)?shapes?\b", t)
    if m:
        count = _NUMBER_WORDS[m.group(1)]
    if re.search(r"\bonly one shape\b|\bjust one shape\b|\ba single shape\b", t):
        count = 1
    return _build(text, t, bg, objs, evs, count, nothing_left, rng, mentions, camera)


def _camera(t: str) -> tuple[str | None, str]:
    """(the camera the text states, or None; the text with that phrase blanked out, positions kept, so
    that "pans to the left" is never read as a shape's position or direction)."""
    m = _CAMERA_MOVE.search(t)
    if m:
        camera = f"pan {m.group('side')}" if m.group("side") else f"zoom {m.group('io')}"
    else:
        m = _CAMERA_STILL.search(t)
        camera = "static" if m else None
    if m:
        t = t[:m.start()] + " " * (m.end() - m.start()) + t[m.end():]
    return camera, t


def _build(text, t, bg, objs, evs, count, nothing_left, rng, mentions, camera) -> Reading:
    stated = {"background": bg,
              "shapes": {s: {"colour": o.colour, "end_colour": o.end_colour, "size": o.size,
                             "cell": list(o.cell) if o.cell else None} for s, o in objs.items()},
              "events": [{"kind": e.kind, "shape": e.shape, "direction": e.direction, "colour": e.colour}
                         for e in evs]
              + [{"kind": "disappear", "shape": s, "direction": None, "colour": None} for s in objs
                 if nothing_left and not any(e.shape == s and e.kind == "disappear" for e in evs)]}
    read, unread = [], []
    if bg is None:
        photo = rng.random() < 0.5
        bg = str(rng.choice(list(PHOTO_BACKGROUNDS) if photo else list(PLAIN_BACKGROUNDS)))
        unread.append("background")
    else:
        read.append("background")
    from vlgap.data.shapes.spec import _contrast_ok

    shapes = list(objs)
    if not shapes:
        unread.append("shapes")
    n_target = max(len(shapes), count or 0, 1)
    if count is not None:
        read.append("number of shapes")
    elif shapes:
        unread.append("number of shapes (assumed: only the shapes named)")
    while len(shapes) < n_target:
        shapes.append(str(rng.choice([s for s in SHAPES if s not in shapes])))
        objs[shapes[-1]] = _Obj(shapes[-1])
    ok_colours = [c for c in COLOURS if _contrast_ok(c, bg)]
    # positions: stated start cells; an end cell with only moves before it gives the start cell back
    taken = {o.cell for o in objs.values() if o.cell is not None}
    objects = []
    for shape in shapes:
        o = objs[shape]
        name = f"the {shape}"
        mine = [e for e in evs if e.shape == shape]
        if o.cell is None and o.end_cell is not None:
            r, c = o.end_cell
            for e in reversed(mine):
                if e.kind == "move":
                    dx, dy = DIRECTIONS[e.direction]
                    r, c = r - dy, c - dx
            if 0 <= r <= 2 and 0 <= c <= 2:  # two shapes may end in one cell
                o.cell = (r, c)
                read.append(f"position of {name} (from its end position)")
                taken.add(o.cell)
        if o.colour is None and o.end_colour is not None and not any(e.kind == "recolor" for e in mine):
            o.colour = o.end_colour
        for what, val in (("colour", o.colour), ("size", o.size), ("position", o.cell)):
            (read if val is not None else unread).append(f"{what} of {name}")
        colour = o.colour or str(rng.choice(ok_colours))
        size = o.size or str(rng.choice(list(SIZES)))
        cell = o.cell
        if cell is None:
            cell = _valid_start_cell(mine, taken, rng)
            taken.add(cell)
        jitter = rng.uniform(-0.04, 0.04, size=2)
        objects.append(SceneObject(shape=shape, colour=colour, size=size,
                                   x=round((cell[1] + 0.5) / 3 + float(jitter[0]), 4),
                                   y=round((cell[0] + 0.5) / 3 + float(jitter[1]), 4)))
    index = {s: k for k, s in enumerate(shapes)}
    ev_list = list(evs)
    if nothing_left:
        for s in shapes:
            if not any(e.shape == s and e.kind == "disappear" for e in ev_list):
                ev_list.append(_Ev("disappear", s, pos=10**6, rank=10**6, third=None))
    if not ev_list:
        unread.append("events")
    else:
        read.extend(f"event {j + 1}: {e.kind} of the {e.shape}" for j, e in enumerate(ev_list))
    ev_list = _implied_size_steps(ev_list, unread)
    events = _timeline(ev_list, index, rng)
    if any(e.third is not None for e in ev_list):
        read.append("timing")
    if camera is None:  # the writer names only moving cameras; sample_spec's default is static
        unread.append("camera (assumed static)")
    else:
        read.append("camera")
    spec = SceneSpec(background=bg, objects=tuple(objects), events=tuple(events), camera=camera or "static")
    try:
        validate_spec(spec)
    except VlgapError as exc:
        raise VlgapError(f"caption {text!r} describes an impossible scene ({exc}); read: {read}") from None
    used = set()
    for m in mentions:
        used.update(m.group(0).split())
    ignored = sorted({w for w in re.findall(r"[a-z-]+", t)
                      if w not in _FILLER and w not in used and w not in _VOCAB_WORDS})
    return Reading(text=text, spec=spec, read=read, unread=unread, ignored=ignored, stated=stated)


def _implied_size_steps(evs: list[_Ev], unread: list[str]) -> list[_Ev]:
    """A true caption may name two shrinks (or grows) of a shape and leave out the opposite step before
    them ("becomes smaller and then gets smaller" of a diamond that grew, shrank, shrank), which alone is
    more than the one net size step a scene allows. The unstated opposite step is put before the shape's
    first stated size change (and reported in `unread`), the one offset of -1 / +1 that keeps every size
    level within one step of the start; a sequence no single step can fix is left to validate_spec."""
    out = list(evs)
    for shape in dict.fromkeys(e.shape for e in evs):
        levels = np.cumsum([1 if e.kind == "grow" else -1 for e in out if e.shape == shape
                            and e.kind in ("grow", "shrink")])
        if len(levels) == 0 or (levels.max() <= 1 and levels.min() >= -1):
            continue
        offset = next((o for o in (1, -1) if (levels + o).max() <= 1 and (levels + o).min() >= -1), None)
        if offset is None:
            continue
        first = next(j for j, e in enumerate(out) if e.shape == shape and e.kind in ("grow", "shrink"))
        kind = "grow" if offset == 1 else "shrink"
        out.insert(first, _Ev(kind, shape, pos=out[first].pos, third=out[first].third, rank=out[first].rank))
        unread.append(f"an earlier {kind} of the {shape} (implied by the size changes stated)")
    return out


def _valid_start_cell(mine: list[_Ev], taken, rng) -> tuple[int, int]:
    """A free cell from which every stated move stays inside the 3x3 grid."""
    free = [(r, c) for r in range(3) for c in range(3) if (r, c) not in taken]
    good = []
    for r, c in free:
        rr, cc, ok = r, c, True
        for e in mine:
            if e.kind == "move":
                dx, dy = DIRECTIONS[e.direction]
                rr, cc = rr + dy, cc + dx
                ok &= 0 <= rr <= 2 and 0 <= cc <= 2
        if ok:
            good.append((r, c))
    pool = good or free
    return pool[int(rng.integers(len(pool)))]


def _timeline(evs: list[_Ev], index: dict[str, int], rng) -> list[Event]:
    """Events in consecutive slots; a stated third (early/midway/end) puts the event's slot inside it."""
    n = len(evs)
    if n == 0:
        return []
    thirds = [e.third for e in evs]
    # slots: equal ones like sample_spec unless stated thirds need explicit placement
    if all(th is None for th in thirds):
        spans = [((j + 0.1) / n, (j + 0.9) / n) for j in range(n)]
    else:
        spans = []
        for j, th in enumerate(thirds):
            # fill each third left to right with the events stated in it
            same = [k for k in range(n) if thirds[k] == th] if th is not None else []
            if th is None:
                lo = spans[-1][1] if spans else 0.0
                hi = lo + (1.0 - lo) / (n - j + 1)
                spans.append((lo + 0.01, max(lo + 0.02, hi)))
                continue
            pos, m = same.index(j), len(same)
            a, b = th / 3, (th + 1) / 3
            width = (b - a) / m
            spans.append((round(a + width * (pos + 0.1), 4), round(a + width * (pos + 0.9), 4)))
        # keep the reading order monotone even when an untimed event sits between timed ones
        for j in range(1, n):
            if spans[j][0] < spans[j - 1][1]:
                s0 = spans[j - 1][1] + 0.001
                spans[j] = (s0, max(s0 + 0.001, spans[j][1]))
        spans = [(round(min(a, 0.998), 4), round(min(max(b, a + 0.001), 1.0), 4)) for a, b in spans]
    out = []
    for e, (a, b) in zip(evs, spans):
        out.append(Event(kind=e.kind, obj=index[e.shape], start=float(a), end=float(b), direction=e.direction,
                         colour=e.colour))
    return out


_VOCAB_WORDS = set(" ".join(list(_SHAPE_WORDS) + list(_COLOUR_WORDS) + list(_SIZE_WORDS) + list(_PLAIN_BG) +
                            list(_CELLS) + ["corner", "side", "edge", "appears", "pops", "up", "fades", "in",
                                            "disappears", "vanishes", "away", "moves", "slides", "rises", "drops",
                                            "down", "grows", "gets", "bigger", "expands", "shrinks", "smaller",
                                            "becomes", "turns", "changes", "colour", "early", "midway",
                                            "through", "near", "towards", "beginning", "middle", "every",
                                            "has", "vanished", "no", "two", "three", "four", "shapes",
                                            "which", "starts", "there", "after", "before", "then", "remains", "as",
                                            "while"]
                            ).split())


def read_captions(texts: list[str], seed: int = 0) -> list[Reading]:
    """Read many captions; caption i samples its open facts from its own stream (seed, i)."""
    return [read_caption(t, np.random.default_rng([seed, i])) for i, t in enumerate(texts)]
