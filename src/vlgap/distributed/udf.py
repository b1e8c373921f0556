"""A vlgap encoder inside a user's own Ray Data pipeline: `EncoderUDF` for `Dataset.map_batches`.

    ds.map_batches(EncoderUDF, fn_constructor_kwargs={"encoder": "mobilenet_v2", "n_frames": [8]},
                   batch_size=chunk_rows("mobilenet_v2", n_frames=[8]),
                   compute=ray.data.ActorPoolStrategy(size=2))  # 2 actors (`concurrency=` is deprecated)

Each actor loads the encoder once (`vlgap.encoders.registry.get_encoder`, any spec) and encodes every
batch with the per-chunk steps of `vlgap extract` (`features/chunk_steps.py`: `decode_one` or
`sample_decoded`, `collect`, `encode_chunk`): the same frame sampling, preprocessing, sub-clips, temporal
pooling, caption joining and mini-batches of `batch_size`. A Ray batch is encoded as one extract chunk,
so features are bit-identical to `vlgap extract` (same encoder, dtype, device, torch threads) when the
Ray batches are extract's chunks: `batch_size=chunk_rows(...)` over rows in manifest order, in blocks
that are multiples of it. Other batchings give the same computation on different groups; encoders
whose numbers depend on the group (text encoders pad a mini-batch to its longest text) then differ in
the last bits. Nothing here imports Ray: the class is plain Python that Ray Data instantiates.

Rows (a batch: dict of numpy arrays, Ray Data's default, or a pandas DataFrame):
- vision, media files: `video` or `image` (a manifest's rows, e.g. `ray.data.read_json("x.jsonl")`),
  or `path` (an image by its suffix, else a video or frame folder); relative paths need `root=`
  (Ray's workers need not share the driver's working directory);
- vision, frames decoded by the pipeline: `frames`, every frame of one video per row ([T, H, W, 3]
  uint8), sampled as extract samples a decoded video;
- text: `captions` (a list per row) or `caption` (one string per row);
- `id` (optional; else the path, or the row's place in its batch): names the item in errors, and seeds
  frame_order="shuffled", so give the manifest's ids to match extract.
Output: the input's columns (less `frames`) and one float32 [rows, width] column per value and layer,
named by `feature_column`: "n_f=8/layer_0", ... ("n_c=..." for text). A bad item (undecodable video,
too few captions, fewer frames than n_f without allow_repeated_frames) raises the same one-line
`VlgapError` as extract: no row is dropped silently.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from vlgap.counts import check_count
from vlgap.data.manifest import Item
from vlgap.errors import VlgapError
from vlgap.features import chunk_steps
from vlgap.features.chunk_steps import FRAME_ORDERS, VisionSteps, encoder_info, make_steps, requested_values
from vlgap.features.temporal_pooling import parse_mode as parse_temporal_pooling

#: suffixes read as one still image in a `path` column (everything else: a video or a frame folder)
STILL_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}


def feature_column(param: str, value: int, layer: int) -> str:
    """The output column of one value (n_f or n_c) and layer, e.g. "n_f=8/layer_0"."""
    return f"{param}={value}/layer_{layer}"


def chunk_rows(encoder: str, *, n_frames: Iterable[int] | int | None = None,
               n_captions: Iterable[int] | int | None = None, **encoder_options: Any) -> int:
    """Items per chunk of `vlgap extract` for this encoder and these values: the `batch_size` that makes
    a Ray batch one extract chunk. Known from the name for image and text encoders; a video encoder's
    clip length is only known once loaded, so it is loaded here (`encoder_options` as for EncoderUDF)."""
    from vlgap.encoders.registry import expected_shape, get_encoder

    param, values = requested_values(n_frames, n_captions)
    if param == "n_c":
        return chunk_steps.CHUNK_TEXTS  # read at call time, as extract reads it
    shape = expected_shape(encoder)
    if shape is None or shape.get("modality") != "vision":
        shape = encoder_info(get_encoder(encoder, **encoder_options))
    if shape.get("modality") != "vision":
        raise VlgapError(f"encoder {encoder!r} is a text encoder: give n_captions, not n_frames")
    return VisionSteps(values, int(shape.get("n0", 1)), shape.get("kind") == "video").chunk_items()


class EncoderUDF:
    """Callable class for `ray.data.Dataset.map_batches`: loads a vlgap encoder once per actor and
    returns every layer for each batch (see the module doc for the columns).

    encoder: a registry name or spec (`vlgap list-encoders`); n_frames (vision) or n_captions (text):
    one value or several; the other keywords are `vlgap.extract`'s (device, dtype, pooling, image_size,
    frame_order, temporal_pooling, allow_repeated_frames, batch_size, threads, random_weights,
    trust_remote_code); root: the folder relative media paths are relative to."""

    def __init__(self, encoder: str, *, n_frames: Iterable[int] | int | None = None,
                 n_captions: Iterable[int] | int | None = None, device: str = "cpu", dtype: str = "float32",
                 pooling: str | None = None, image_size: int | None = None, frame_order: str = "ordered",
                 temporal_pooling: str | None = None, allow_repeated_frames: bool = False, batch_size: int = 32,
                 threads: int | None = None, random_weights: bool = False, trust_remote_code: bool = False,
                 root: str | Path | None = None):
        self.param, self.values = requested_values(n_frames, n_captions)
        self.batch_size = check_count("batch_size", batch_size, example=32)
        threads = check_count("threads", threads, example=1, allow_none=True)
        image_size = check_count("image_size", image_size, example=160, allow_none=True)
        if frame_order not in FRAME_ORDERS:
            raise VlgapError(f"frame_order must be one of {FRAME_ORDERS}, got {frame_order!r}")
        self.root = Path(root) if root is not None else None
        if threads:
            import torch

            torch.set_num_threads(threads)
        from vlgap.encoders.registry import get_encoder
        from vlgap.memory import reuse_freed_memory

        reuse_freed_memory()  # as extract does before the model's first activations (vlgap.memory)
        options: dict[str, Any] = {k: v for k, v in (("pooling", pooling), ("image_size", image_size)) if v}
        if random_weights:
            options["random_weights"] = True
        if trust_remote_code:
            options["trust_remote_code"] = True
        self.encoder_name = encoder
        self.enc = get_encoder(encoder, device=device, dtype=dtype, **options)
        self.info = encoder_info(self.enc)
        if (self.param == "n_f") != (self.info["modality"] == "vision"):
            wanted = "n_frames" if self.info["modality"] == "vision" else "n_captions"
            raise VlgapError(f"encoder {encoder!r} is a {self.info['modality']} encoder: give {wanted}")
        self.steps = make_steps(encoder, self.param, self.values, self.info, frame_order,
                                parse_temporal_pooling(temporal_pooling), False, allow_repeated_frames)

    @property
    def columns(self) -> list[str]:
        """The feature columns this UDF adds, value by value, layer by layer."""
        return [feature_column(self.param, v, li) for v in self.values for li in range(self.info["num_layers"])]

    def __call__(self, batch) -> dict[str, np.ndarray]:
        cols = _as_columns(batch)
        n = len(next(iter(cols.values()))) if cols else 0
        items, outcomes = [], []
        for k in range(n):
            item, frames = self._item(cols, k)
            items.append(item)
            if self.param == "n_c":
                outcomes.append(self.steps.decode_one(item))
            elif frames is not None:
                outcomes.append(self.steps.sample_decoded(item, frames))
            else:
                outcomes.append(self.steps.decode_one(item))  # uint8 frames; encode_chunk preprocesses them
        decoded = self.steps.collect(items, outcomes)
        out, _ = self.steps.encode_chunk(self.enc, decoded, self.batch_size)
        result = {c: np.asarray(x) for c, x in cols.items() if c != "frames"}
        for v, layers in out.items():
            for li, arr in enumerate(layers):
                result[feature_column(self.param, v, li)] = arr
        return result

    def _item(self, cols: dict, k: int) -> tuple[Item, np.ndarray | None]:
        given_id = str(cols["id"][k]) if "id" in cols else None
        if self.param == "n_c":
            item_id = given_id or f"row {k} of its batch"
            if "captions" in cols:
                caps = cols["captions"][k]
                caps = (caps,) if isinstance(caps, str) else tuple(str(c) for c in caps)
            elif "caption" in cols:
                caps = (str(cols["caption"][k]),)
            else:
                raise VlgapError(f"item {item_id!r}: a text encoder needs a 'captions' (list per row) or 'caption' "
                                 f"column; the batch has {sorted(cols)}")
            return Item(item_id, Path(), "video", caps), None
        if "frames" in cols:
            item_id = given_id or f"row {k} of its batch"
            frames = np.asarray(cols["frames"][k])
            if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
                raise VlgapError(f"item {item_id!r}: 'frames' must be one video's decoded frames as a [T, H, W, 3] "
                                 f"uint8 array, got {frames.dtype} {list(frames.shape)}")
            kind = str(cols["kind"][k]) if "kind" in cols else "video"
            return Item(item_id, Path(), kind, ()), frames
        for column, kind in (("video", "video"), ("image", "image"), ("path", None)):
            value = cols[column][k] if column in cols else None
            if isinstance(value, (str, os.PathLike)) and str(value):  # a manifest row has one of them (else None)
                path = Path(value)
                break
        else:
            raise VlgapError(f"item {given_id or f'row {k} of its batch'!r}: a vision encoder needs a 'video', 'image' "
                             f"or 'path' column (media files) or 'frames' (decoded); the batch has {sorted(cols)}")
        item_id = given_id or str(path)
        if not path.is_absolute():
            if self.root is None:
                raise VlgapError(f"item {item_id!r}: relative media path {str(path)!r}: give absolute paths, or "
                                 "root= (the folder they are relative to; Ray's workers need not share this "
                                 "process's working directory)")
            path = self.root / path
        if kind is None:
            kind = "image" if path.suffix.lower() in STILL_SUFFIXES else "video"
        return Item(item_id, path, kind, ()), None


def _as_columns(batch) -> dict[str, Any]:
    """A Ray Data batch (dict of numpy arrays, or a pandas DataFrame) as {column: sequence}."""
    if isinstance(batch, dict):
        return batch
    if hasattr(batch, "columns") and hasattr(batch, "to_dict"):  # pandas, without importing it
        return {c: batch[c].to_numpy() for c in batch.columns}
    raise VlgapError(f"EncoderUDF takes Ray Data batches as a dict of numpy arrays or a pandas DataFrame "
                     f"(batch_format='numpy' or 'pandas'), got {type(batch).__name__}")
