"""The `shapes` world: procedural videos of coloured shapes whose captions are written from the same spec.

A scene is a JSON-serialisable `SceneSpec`: a background (a plain colour or one of scikit-image's real
photos), 1-4 objects (shape, colour, size, start position) and a timeline of events (appear, disappear,
move left/right/up/down, grow, shrink, change colour), each in its own time slot so that their order is
describable. `render(spec)` draws any spec with numpy masks (deterministic, uint8 [T,H,W,3]);
`write_captions(spec, seed)` writes 10 different captions, each stating a different subset of the facts
(`caption_facts` lists them) so that more captions genuinely describe more; `generate_shapes` samples
specs by seed and writes mp4 files plus a manifest whose items carry the spec in `meta["spec"]`.

Modules: `spec` (vocabulary, spec types, validation, sampler), `render` (frames), `captions` (caption
writer, facts, reorder negatives), `write` (mp4, manifest, dataset). Every public name is re-exported here.
"""
from vlgap.data.shapes.captions import (N_CAPTIONS, all_facts, caption_facts, caption_set, reorder_captions,
                                        swap_event_order, write_captions)
from vlgap.data.shapes.render import parse_frame_size, photo_path, render
from vlgap.data.shapes.spec import (CELL_NAMES, COLOURS, DIRECTIONS, EVENT_KINDS, GROW_FACTOR, MIN_CONTRAST,
                                    MOVE_DISTANCE, PHOTO_BACKGROUNDS, PLAIN_BACKGROUNDS, SHAPES, SIZES, Event,
                                    ObjState, SceneObject, SceneSpec, cell, item_rng, sample_spec, simulate,
                                    spec_from_dict, validate_spec)
from vlgap.data.shapes.write import cached_shapes_manifest, generate_shapes, write_manifest_lines, write_mp4

__all__ = [
    "CELL_NAMES", "COLOURS", "DIRECTIONS", "EVENT_KINDS", "GROW_FACTOR", "MIN_CONTRAST", "MOVE_DISTANCE",
    "N_CAPTIONS", "PHOTO_BACKGROUNDS", "PLAIN_BACKGROUNDS", "SHAPES", "SIZES", "Event", "ObjState",
    "SceneObject", "SceneSpec", "all_facts", "cached_shapes_manifest", "caption_facts", "caption_set", "cell",
    "generate_shapes", "item_rng", "parse_frame_size", "photo_path", "render", "reorder_captions",
    "sample_spec", "simulate", "spec_from_dict", "swap_event_order", "validate_spec", "write_captions",
    "write_manifest_lines", "write_mp4",
]
