"""Writing the shapes dataset: mp4 encoding (PyAV), manifest lines, and `generate_shapes`, which samples
specs by seed, renders them and writes captions plus a manifest whose items carry the spec."""
from __future__ import annotations

import io
import json
import os
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from vlgap.data.shapes.caption_groups import CAPTION_MODES, GROUPS, caption_groups
from vlgap.data.shapes.captions import caption_set, reorder_captions
from vlgap.data.shapes.render import parse_frame_size, render
from vlgap.data.shapes.spec import item_rng, sample_spec
from vlgap.data.shapes.style import STYLES
from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_bytes, atomic_write_text, cache_root, make_folder, process_alive


#: with caption_mode="both": the same items with the paraphrase group as captions
PARAPHRASE_MANIFEST = "manifest_paraphrase.jsonl"

#: the most videos one make-data run writes (a count above it is a typo, not a dataset: the paper uses 1024)
MAX_VIDEOS = 1_000_000


def check_video_request(n_frames: int, size: tuple[int, int], *, n: int | None = None) -> None:
    """Refuse, before anything is written, a count or a frame size whose rendering cannot fit: n videos in
    [1, MAX_VIDEOS]; one video's uint8 frames (n_frames x H x W x 3, held whole before encoding) plus a
    frame of float32 scratch within vlgap.counts.MAX_ALLOCATION_BYTES."""
    from vlgap.counts import check_allocation, check_count

    if n is not None:
        check_count("n", n, 1, flag="--n", example=256)
        if n > MAX_VIDEOS:
            raise VlgapError(f"--n {n}: at most {MAX_VIDEOS:,} videos per run (the paper uses 1024)")
    check_count("n_frames", n_frames, 1, flag="--n-frames", example=32)
    h, w = size
    check_allocation("--size", n_frames * h * w * 3 + h * w * 3 * 4, f"rendering {n_frames} frames of {h} x {w} px")


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the `.NAME.PID.tmp` files that a killed write_mp4 left in `folder` (their process is gone)."""
    removed = []
    for p in folder.glob(".*.tmp") if folder.is_dir() else []:
        pid = p.name[:-len(".tmp")].rsplit(".", 1)[-1]
        if pid.isdigit() and not process_alive(int(pid)):
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


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
    """Encode uint8 [T,H,W,3] frames (even H, W) to an mp4 (yuv420p), encoded in memory, then written atomically."""
    import av

    path = Path(path)
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise VlgapError(f"{path.name}: frames must be uint8 [T,H,W,3], got {frames.dtype} {frames.shape}")
    parse_frame_size(frames.shape[1:3])
    codec = codec or _default_codec()
    buf = io.BytesIO()  # encoded in memory (a few hundred kB), then written by the one writer
    with av.open(buf, "w", format="mp4") as container:
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
    atomic_write_bytes(path, buf.getvalue())
    return path


def write_manifest_lines(path: str | os.PathLike, items: list[dict[str, Any]]) -> Path:
    """Write manifest items as JSON lines, atomically."""
    path = Path(path)
    atomic_write_text(path, "".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items))
    return path


def generate_shapes(out_dir: str | os.PathLike, n: int, seed: int = 0, n_frames: int = 32,
                    size: int | Sequence[int] = 128, fps: int = 8, photo_fraction: float = 0.5,
                    codec: str | None = None, progress: Callable[[int, int], None] | None = None,
                    camera_fraction: float = 0.0, style: str = "synthetic", caption_mode: str = "diverse") -> Path:
    """Sample `n` scenes by seed, render each to `out_dir/videos/<id>.mp4`, write 10 captions each, and
    write `out_dir/manifest.jsonl` (meta: spec, caption_seed, caption_facts, reorder pair when the scene
    has two or more events; camera when it moves; style and style_seed when not "synthetic").
    camera_fraction: share of scenes whose camera pans or zooms; style: a render style (STYLES).
    caption_mode (`caption_groups.CAPTION_MODES`): "diverse" (default) writes the ten captions of different
    facts; "paraphrase" writes ten paraphrases of the first of them instead; "both" writes the diverse
    captions and keeps both groups in meta["caption_groups"] (facts in meta["caption_group_facts"]), and
    also writes manifest_paraphrase.jsonl (same items, the paraphrases as captions).
    Returns the manifest path."""
    if n < 1:
        raise VlgapError(f"n must be at least 1, got {n}")
    if not 0.0 <= photo_fraction <= 1.0:
        raise VlgapError(f"photo_fraction must lie in [0, 1], got {photo_fraction}")
    if style not in STYLES:
        raise VlgapError(f"unknown render style {style!r}; valid: {list(STYLES)}")
    if caption_mode not in CAPTION_MODES:
        raise VlgapError(f"unknown caption mode {caption_mode!r}; valid: {', '.join(CAPTION_MODES)}")
    h, w = parse_frame_size(size)
    check_video_request(n_frames, (h, w), n=n)
    out_dir = Path(out_dir)
    make_folder(out_dir / "videos")
    remove_stale_temporaries(out_dir / "videos")  # an interrupted run's half-written video
    t0 = time.perf_counter()

    def make(i: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Item i: its video written, its manifest item (and the paraphrase manifest's, if any)."""
        rng = item_rng(seed, i)
        spec = sample_spec(rng, photo_fraction=photo_fraction, camera_fraction=camera_fraction)
        caption_seed = int(rng.integers(2**31 - 1))
        item_id = f"shapes_{i:05d}"
        rel = f"videos/{item_id}.mp4"
        # the style's own randomness is keyed by the spec too, so the caption seed can serve as its seed
        write_mp4(out_dir / rel, render(spec, n_frames, (h, w), style=style, style_seed=caption_seed), fps=fps,
                  codec=codec)
        caps = caption_set(spec, caption_seed)
        # like VATEX's ten annotators, captions come in no fixed order of kind: the paper takes the
        # first n_c, which must then be a random subset of kinds, not always the background caption
        order = [int(j) for j in np.random.default_rng([caption_seed, 0xA770]).permutation(len(caps))]
        caps = [caps[j] for j in order]
        meta: dict[str, Any] = {"spec": spec.to_dict(), "caption_seed": caption_seed, "caption_kinds": order,
                                "caption_facts": [f for _, f in caps], "n_frames": n_frames,
                                "size": [h, w], "fps": fps, "generator": "shapes", "seed": seed}
        if spec.camera != "static":  # defaults add no key: existing manifests stay byte-identical
            meta["camera"] = spec.camera
        if style != "synthetic":
            meta["style"], meta["style_seed"] = style, caption_seed
        if len(spec.events) >= 2:
            try:
                pos, neg, pair = reorder_captions(spec, caption_seed)
                meta["reorder"] = {"positive": pos, "negative": neg, "swapped_events": list(pair)}
            except VlgapError:
                pass  # no valid swap (e.g. appear followed by the same object's disappear)
        captions = [t for t, _ in caps]
        para_item = None
        if caption_mode != "diverse":  # the default adds no key: existing manifests stay byte-identical
            groups = caption_groups(spec, caption_seed)
            meta["caption_groups"] = {g: groups[g] for g in GROUPS}
            meta["caption_group_facts"] = groups["facts"]
            meta["paraphrase_kind"] = groups["paraphrase_kind"]
            meta["paraphrase_wordings"] = groups["paraphrase_wordings"]
            meta["caption_mode"] = caption_mode
            para_meta = dict(meta, caption_kinds=[groups["paraphrase_kind"]] * len(groups["paraphrase"]),
                             caption_facts=groups["facts"]["paraphrase"])
            para_item = {"id": item_id, "video": rel, "captions": groups["paraphrase"], "meta": para_meta}
            if caption_mode == "paraphrase":
                captions, meta, para_item = groups["paraphrase"], para_meta, None
        return {"id": item_id, "video": rel, "captions": captions, "meta": meta}, para_item

    made = _each_in_order(make, n, progress)
    items = [item for item, _ in made]
    paraphrase_items = [para for _, para in made if para is not None]
    manifest = write_manifest_lines(out_dir / "manifest.jsonl", items)
    if paraphrase_items:
        write_manifest_lines(out_dir / PARAPHRASE_MANIFEST, paraphrase_items)
    about = {"generator": "shapes", "n": n, "seed": seed, "n_frames": n_frames, "size": [h, w], "fps": fps,
             "photo_fraction": photo_fraction, "camera_fraction": camera_fraction, "style": style,
             "codec": codec or _default_codec()}
    if caption_mode != "diverse":
        about["caption_mode"] = caption_mode
    atomic_write_text(out_dir / "generator.json", json.dumps(
        {**about, "seconds": round(time.perf_counter() - t0, 3)}, indent=2) + "\n")
    return manifest


def _each_in_order(make: Callable[[int], Any], n: int, progress: Callable[[int, int], None] | None) -> list[Any]:
    """make(0..n-1), their results in order; in one worker thread per core (rendering and encoding release
    the interpreter lock for most of a video; each item is a pure function of its index, so the files and
    results do not depend on the number of threads). `progress(done, n)` as items finish."""
    from concurrent.futures import ThreadPoolExecutor

    from vlgap.runs.claims import available_cores

    workers = max(1, min(available_cores(), 4, n))
    if workers == 1:
        out = []
        for i in range(n):
            out.append(make(i))
            if progress is not None:
                progress(i + 1, n)
        return out
    with ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(make, i) for i in range(n)]
        try:
            for done, fut in enumerate(futures, 1):
                fut.result()
                if progress is not None:
                    progress(done, n)
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
        return [fut.result() for fut in futures]


def shapes_manifest_path(n: int, seed: int = 0, n_frames: int = 32, size: int = 128,
                         cache_dir: str | os.PathLike | None = None, camera_fraction: float = 0.0,
                         style: str = "synthetic") -> Path:
    """Where `cached_shapes_manifest` keeps the manifest of this dataset (written or not yet)."""
    name = f"shapes-n{n}-s{seed}-f{n_frames}-{size}px"
    name += f"-cam{camera_fraction:g}" if camera_fraction else ""
    name += f"-{style}" if style != "synthetic" else ""
    return cache_root(cache_dir) / "data" / name / "manifest.jsonl"


def cached_shapes_manifest(n: int, seed: int = 0, n_frames: int = 32, size: int = 128,
                           cache_dir: str | os.PathLike | None = None, log: Callable[[str], None] | None = None,
                           camera_fraction: float = 0.0, style: str = "synthetic",
                           progress: Callable[[int, int], None] | None = None) -> Path:
    """Generate the shapes dataset once per (n, seed, frames, size, camera_fraction, style) under the cache
    root; reuse it afterwards. `progress(done, total)` is called as videos are written."""
    manifest = shapes_manifest_path(n, seed, n_frames, size, cache_dir, camera_fraction, style)
    out = manifest.parent
    if not manifest.is_file():
        if log is not None:
            log(f"generating {n} shapes videos into {out}")
        generate_shapes(out, n, seed=seed, n_frames=n_frames, size=size, camera_fraction=camera_fraction,
                        style=style, progress=progress)
    return manifest
