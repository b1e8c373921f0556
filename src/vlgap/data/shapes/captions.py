"""The caption writer of the shapes world: ten captions per scene, each stating a different subset of
the spec's facts (`caption_facts` names them), and VideoComp-style reorder negatives (`swap_event_order`,
`reorder_captions`)."""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from vlgap.data.shapes.spec import (CELL_NAMES, PHOTO_BACKGROUNDS, PLAIN_BACKGROUNDS, ObjState, SceneSpec, cell,
                                    simulate, spec_from_dict, validate_spec)
from vlgap.errors import VlgapError

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

    def __init__(self, spec: SceneSpec, seed: int, slot: int, before: dict[int, ObjState]):
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
        row, col = cell(x, y)
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
#: captions that also say what a moving camera does (static scenes: no caption mentions the camera)
CAMERA_SLOTS = (0, 9)
_CAMERA_PHRASES = {
    "pan left": ("the camera pans left", "the camera slowly pans to the left", "the view pans to the left"),
    "pan right": ("the camera pans right", "the camera slowly pans to the right", "the view pans to the right"),
    "zoom in": ("the camera zooms in", "the camera slowly zooms in", "the view zooms in"),
    "zoom out": ("the camera zooms out", "the camera slowly zooms out", "the view zooms out"),
}


def camera_fact(spec: SceneSpec) -> str | None:
    """Fact id of a moving camera ("camera:pan left"); None for a static one."""
    return None if spec.camera == "static" else f"camera:{spec.camera}"


def _compose_with_camera(spec: SceneSpec, seed: int, slot: int, before, final) -> tuple[str, list[str]]:
    text, facts = _compose(spec, seed, slot, before, final)
    fact = camera_fact(spec)
    if fact is None or slot not in CAMERA_SLOTS:
        return text, facts
    # its own stream, so the rest of the wording is what the same scene with a static camera gets
    rng = np.random.default_rng([seed, slot, 2000])
    phrases = _CAMERA_PHRASES[spec.camera]
    phrase = phrases[int(rng.integers(len(phrases)))]
    joint = ", as " if slot == 0 else ", while "
    return text[:-1] + joint + phrase + ".", [*facts, fact]


def caption_set(spec: SceneSpec, seed: int) -> list[tuple[str, list[str]]]:
    """(caption, fact ids) for the N_CAPTIONS slots of `write_captions`."""
    final, before = simulate(spec)
    out: list[tuple[str, list[str]]] = []
    seen: set[str] = set()
    for slot in range(N_CAPTIONS):
        text, facts = _compose_with_camera(spec, seed, slot, before, final)
        retry = 0
        while text in seen and retry < 20:  # same words by chance: draw another wording
            retry += 1
            text, facts = _compose_with_camera(spec, seed + 7919 * retry, slot, before, final)
        if text in seen:
            text = text[:-1] + " in this clip."
        seen.add(text)
        out.append((text, facts))
    return out


def write_captions(spec: SceneSpec | dict, seed: int = 0) -> list[str]:
    """Ten different captions of a scene, each stating a different subset of its facts:
    0 gist (an object + background), 1 count and identities, 2 first event, 3 background + last event,
    4 sizes and start positions, 5 order of two consecutive events, 6 end state, 7 the busiest object's
    story, 8 when each event happens, 9 summary. Together they state every fact of the spec. When the
    camera moves, captions 0 and 9 also say how ("..., as the camera pans left.")."""
    if isinstance(spec, dict):
        spec = spec_from_dict(spec)
    return [t for t, _ in caption_set(spec, seed)]


def caption_facts(spec: SceneSpec | dict, seed: int = 0) -> list[list[str]]:
    """Fact ids stated by each caption of `write_captions(spec, seed)`: bg, count, obj<k>, size<k>,
    pos<k> (start cell), ev<i>, order<i>-<j> (event i happens before event j), time<i> (which third of
    the clip), end (final state), camera:<camera> (a moving camera, e.g. "camera:pan left")."""
    if isinstance(spec, dict):
        spec = spec_from_dict(spec)
    return [f for _, f in caption_set(spec, seed)]


def all_facts(spec: SceneSpec) -> set[str]:
    """Every fact id a caption of this spec can state."""
    n_obj = len(spec.objects)
    order = spec.time_order()
    facts = {"bg", "count", "end"}
    facts |= {f"{p}{k}" for k in range(n_obj) for p in ("obj", "size", "pos")}
    facts |= {f"ev{i}" for i in order} | {f"time{i}" for i in order}
    facts |= set(_order_facts(order))
    if camera_fact(spec) is not None:
        facts.add(camera_fact(spec))
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
    final, before = simulate(spec)
    return before, final
