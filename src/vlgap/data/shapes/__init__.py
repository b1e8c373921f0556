"""The `shapes` world: procedural videos of coloured shapes whose captions are written from the same spec.

A scene is a JSON-serialisable `SceneSpec`: a background (a plain colour or one of scikit-image's real
photos), 1-4 objects (shape, colour, size, start position) and a timeline of events (appear, disappear,
move left/right/up/down, grow, shrink, change colour), each in its own time slot so that their order is
describable. `render(spec)` draws any spec with numpy masks (deterministic, uint8 [T,H,W,3]);
`write_captions(spec, seed)` writes 10 different captions, each stating a different subset of the facts
(`caption_facts` lists them) so that more captions genuinely describe more; `generate_shapes` samples
specs by seed and writes mp4 files plus a manifest whose items carry the spec in `meta["spec"]`.

A scene's camera (`CAMERAS`: static, pan left/right, zoom in/out) moves the view over the clip, and
`render(spec, style=...)` draws it in a render style (`STYLES`: "synthetic", the clean look, or "real",
a camera-like domain with shake, blur, noise, lighting drift, compression and textured backgrounds);
`CAMERA_DESCRIPTIONS` / `STYLE_DESCRIPTIONS` give each a short phrase.

Modules: `spec` (vocabulary, spec types, validation, sampler), `backgrounds`, `render` (frames, camera),
`style` (render styles), `captions` (caption writer, facts, reorder negatives), `caption_groups` (ten
diverse captions vs ten paraphrases of one fact set, `make-data shapes --caption-mode`), `write` (mp4, manifest,
dataset). Every public name is re-exported here.
"""
from vlgap.data.shapes.caption_groups import CAPTION_MODES, caption_groups, paraphrases
from vlgap.data.shapes.backgrounds import TEXTURE_PHOTOS, background, photo_path, textured_background
from vlgap.data.shapes.captions import (CAMERA_SLOTS, N_CAPTIONS, all_facts, camera_fact, caption_facts, caption_set,
                                        reorder_captions, swap_event_order, write_captions)
from vlgap.data.shapes.render import PAN_FRACTION, ZOOM_FACTOR, camera_windows, parse_frame_size, render
from vlgap.data.shapes.spec import (CAMERA_DESCRIPTIONS, CAMERAS, CELL_NAMES, COLOURS, DIRECTIONS, EVENT_KINDS,
                                    GROW_FACTOR, MIN_CONTRAST, MOVE_DISTANCE, PHOTO_BACKGROUNDS, PLAIN_BACKGROUNDS,
                                    SHAPES, SIZES, Event, ObjState, SceneObject, SceneSpec, cell, item_rng,
                                    sample_spec, simulate, spec_from_dict, validate_spec)
from vlgap.data.shapes.style import STYLE_DESCRIPTIONS, STYLES, apply_real_style
from vlgap.data.shapes.write import cached_shapes_manifest, generate_shapes, write_manifest_lines, write_mp4

__all__ = [
    "CAPTION_MODES", "caption_groups", "paraphrases",
    "CAMERAS", "CAMERA_DESCRIPTIONS", "CAMERA_SLOTS", "CELL_NAMES", "COLOURS", "DIRECTIONS", "EVENT_KINDS",
    "GROW_FACTOR", "MIN_CONTRAST", "MOVE_DISTANCE", "N_CAPTIONS", "PAN_FRACTION", "PHOTO_BACKGROUNDS",
    "PLAIN_BACKGROUNDS", "SHAPES", "SIZES", "STYLES", "STYLE_DESCRIPTIONS", "TEXTURE_PHOTOS", "ZOOM_FACTOR",
    "Event", "ObjState", "SceneObject", "SceneSpec", "all_facts", "apply_real_style", "background",
    "cached_shapes_manifest", "camera_fact", "camera_windows", "caption_facts", "caption_set", "cell",
    "generate_shapes", "item_rng", "parse_frame_size", "photo_path", "render", "reorder_captions",
    "sample_spec", "simulate", "spec_from_dict", "swap_event_order", "textured_background", "validate_spec",
    "write_captions", "write_manifest_lines", "write_mp4",
]
