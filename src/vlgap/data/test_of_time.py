"""Test of Time (Bagad et al., 2023) as the Dynamic Reflections paper describes it: 180 (video, caption) pairs.

Each video has 30 frames on a black square. One coloured circle fades in over frames 0-14 in one quadrant
(upper left, upper right, bottom left, bottom right); over frames 15-29 a second circle of another colour
fades in in another quadrant. As in the authors' generation notebook (bpiyush/TestOfTime,
notebooks/generate_synthetic_data_example.ipynb), the second half is drawn on a fresh black frame, so the
first circle is gone when the second appears (`keep_first=True` keeps it on screen instead).

How 180 arises (our reading; the paper gives the total, not the factors). The paper says that "for each
color pair and location, there are four captions -- two permutations of the colors with 'after' and two with
the equivalent 'before' construction", that "the videos may be identical or different depending on shape
locations", and that at k = 3 each example has about three related neighbours. So items come in groups of
four that share a colour pair and a placement:

    video "c1 first, then c2":  "A c2 circle appears after a c1 circle"  /  "A c1 circle appears before a c2 circle"
    video "c2 first, then c1":  "A c1 circle appears after a c2 circle"  /  "A c2 circle appears before a c1 circle"

Within a group, each caption has one logically equivalent caption (the same video) and two related
captions of the opposite meaning: the same words with the colours swapped (the bag-of-words neighbour)
and the same colour order with the other relation word. 180 = 45 groups x 4 captions, 90 distinct videos.
We take 45 = 15 colour pairs (6 colours) x 3 placements of the two circles (side by side, one above the
other, diagonal); the seed picks which row, column or diagonal each group uses and which colour sits where.
"""
from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from vlgap.data.shapes import COLOURS, parse_frame_size, write_manifest_lines, write_mp4
from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_text, cache_root

TOT_COLOURS = ("red", "yellow", "green", "blue", "purple", "white")
QUADRANTS = {"upper left": (0, 0), "upper right": (0, 1), "bottom left": (1, 0), "bottom right": (1, 1)}
PLACEMENTS = ("side by side", "one above the other", "diagonal")
#: the three logically related items of an item (meta keys), in the order used everywhere
RELATIONS = ("equivalent", "colour_swap", "relation_swap")
N_FRAMES = 30
RADIUS = 0.2  # fraction of the side; a quadrant is 0.5 wide, so circles stay inside their quadrant


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def tot_caption(subject: str, relation: str, other: str) -> str:
    """'A <subject> circle appears <relation> a <other> circle'."""
    return (f"{_article(subject).capitalize()} {subject} circle appears {relation} "
            f"{_article(other)} {other} circle")


def _placement_quadrants(placement: str, rng: np.random.Generator) -> tuple[str, str]:
    if placement == "side by side":
        row = ("upper", "bottom")[int(rng.integers(2))]
        pair = (f"{row} left", f"{row} right")
    elif placement == "one above the other":
        col = ("left", "right")[int(rng.integers(2))]
        pair = (f"upper {col}", f"bottom {col}")
    else:
        pair = (("upper left", "bottom right"), ("upper right", "bottom left"))[int(rng.integers(2))]
    return pair if rng.random() < 0.5 else (pair[1], pair[0])


def render_tot(first: tuple[str, str], second: tuple[str, str], size: int = 128,
               keep_first: bool = False, n_frames: int = N_FRAMES) -> np.ndarray:
    """uint8 [n_frames, size, size, 3]: circle `first` = (colour, quadrant) fades in during the first half,
    then `second` fades in during the second half."""
    h, w = parse_frame_size(size)
    half = n_frames // 2
    if half < 2:
        raise VlgapError(f"Test of Time videos need at least 4 frames, got {n_frames}")
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32) + 0.5
    r = RADIUS * min(h, w)

    def disc(quadrant: str) -> np.ndarray:
        row, col = QUADRANTS[quadrant]
        cy, cx = (row + 0.5) * h / 2, (col + 0.5) * w / 2
        return ((xx - cx) ** 2 + (yy - cy) ** 2 <= r * r).astype(np.float32)[..., None]

    m1, m2 = disc(first[1]), disc(second[1])
    c1 = np.asarray(COLOURS[first[0]], np.float32)
    c2 = np.asarray(COLOURS[second[0]], np.float32)
    frames = np.zeros((n_frames, h, w, 3), np.float32)
    a1 = np.linspace(0.0, 1.0, half, dtype=np.float32)
    a2 = np.linspace(0.0, 1.0, n_frames - half, dtype=np.float32)
    frames[:half] = a1[:, None, None, None] * m1 * c1
    if keep_first:
        frames[half:] = m1 * c1
    frames[half:] = frames[half:] * (1 - a2[:, None, None, None] * m2) + a2[:, None, None, None] * m2 * c2
    return np.clip(np.rint(frames), 0, 255).astype(np.uint8)


def tot_items(seed: int = 0) -> list[dict[str, Any]]:
    """The 180 manifest items (without writing videos): id, video (relative path), one caption, meta."""
    rng = np.random.default_rng([seed, 180])
    items: list[dict[str, Any]] = []
    groups = list(itertools.product(itertools.combinations(TOT_COLOURS, 2), PLACEMENTS))
    for g, ((ca, cb), placement) in enumerate(groups):
        qa, qb = _placement_quadrants(placement, rng)
        where = {ca: qa, cb: qb}
        ids = {}
        for first, second in ((ca, cb), (cb, ca)):
            for relation in ("after", "before"):
                ids[(first, relation)] = f"tot_{g:02d}_{first}-{second}_{relation}"
        for first, second in ((ca, cb), (cb, ca)):
            video_key = f"tot_{g:02d}_{first}-{second}"
            for relation in ("after", "before"):
                # video "first then second": "second after first" == "first before second"
                subject, other = (second, first) if relation == "after" else (first, second)
                other_rel = "before" if relation == "after" else "after"
                related = {
                    "equivalent": ids[(first, other_rel)],  # same video, same meaning, other words
                    "colour_swap": ids[(second, relation)],  # same words, colours swapped: opposite meaning
                    "relation_swap": ids[(second, other_rel)],  # same colour order, other relation word
                }
                items.append({
                    "id": ids[(first, relation)],
                    "video": f"videos/{video_key}.mp4",
                    "captions": [tot_caption(subject, relation, other)],
                    "meta": {
                        "generator": "test-of-time", "seed": seed, "group": g, "placement": placement,
                        "video_key": video_key, "relation": relation,
                        "first": {"colour": first, "quadrant": where[first]},
                        "second": {"colour": second, "quadrant": where[second]},
                        "caption_subject": subject, "caption_object": other,
                        **related,
                        "related": [related["equivalent"], related["colour_swap"], related["relation_swap"]],
                    },
                })
    return items


def generate_test_of_time(out_dir: str | os.PathLike, seed: int = 0, size: int = 128, fps: int = 10,
                          keep_first: bool = False, codec: str | None = None,
                          progress: Callable[[int, int], None] | None = None) -> Path:
    """Write the 90 distinct videos (30 frames each) to `out_dir/videos/` and the 180-item manifest to
    `out_dir/manifest.jsonl`; each item's meta names its logically equivalent item and its two related
    opposite-meaning items. Returns the manifest path."""
    from vlgap.data.shapes.write import check_video_request, remove_stale_temporaries

    check_video_request(N_FRAMES, parse_frame_size(size))
    out_dir = Path(out_dir)
    remove_stale_temporaries(out_dir / "videos")  # an interrupted run's half-written video
    t0 = time.perf_counter()
    items = tot_items(seed)
    videos = {}
    for it in items:
        m = it["meta"]
        videos.setdefault(it["video"], ((m["first"]["colour"], m["first"]["quadrant"]),
                                        (m["second"]["colour"], m["second"]["quadrant"])))
    for j, (rel, (first, second)) in enumerate(videos.items()):
        write_mp4(out_dir / rel, render_tot(first, second, size, keep_first), fps=fps, codec=codec)
        if progress is not None:
            progress(j + 1, len(videos))
    for it in items:
        it["meta"].update({"n_frames": N_FRAMES, "size": [size, size], "fps": fps, "keep_first": keep_first})
    manifest = write_manifest_lines(out_dir / "manifest.jsonl", items)
    atomic_write_text(out_dir / "generator.json", json.dumps(
        {"generator": "test-of-time", "n_items": len(items), "n_videos": len(videos), "seed": seed,
         "size": size, "fps": fps, "keep_first": keep_first,
         "seconds": round(time.perf_counter() - t0, 3)}, indent=2) + "\n")
    return manifest


def tot_dataset(seed: int = 0, size: int = 128, cache_dir: str | os.PathLike | None = None) -> Path:
    """Generate the Test of Time set once per (seed, size) under the cache root; reuse it afterwards."""
    out = cache_root(cache_dir) / "data" / f"test-of-time-s{seed}-{size}px"
    manifest = out / "manifest.jsonl"
    if not manifest.is_file():
        generate_test_of_time(out, seed=seed, size=size)
    return manifest
