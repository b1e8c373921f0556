"""Per-chunk steps of extraction, shared by this process and Ray: `decode_one` per item (frames or
texts, on any CPU worker), `collect` per chunk (bad items reported or refused), `encode_chunk` with a
loaded encoder (every layer, every n_f or n_c). Chunk sizes are also the resume granularity."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vlgap.data.manifest import Item
from vlgap.data.sampling import check_n_f, draw_captions, sample_frames, subclips
from vlgap.data.video import count_frames, keyframe_info, read_frames
from vlgap.errors import BadItemError, VlgapError
from vlgap.features.temporal_pooling import describe as describe_pooling
from vlgap.features.temporal_pooling import pool_frames

#: what each frame-sampling strategy does, as recorded with the features
FRAME_SAMPLING_POLICIES = {
    "uniform": "uniform linear interpolation over the whole video, nearest frame (Dynamic Reflections 3.4)",
    "random": "n_f distinct frames at random (seeded by the item id), in time order",
    "stride": "n_f frames S apart, the run centred in the video",
    "keyframes": "the container's key frames (spread uniformly over them), completed by the frames of largest "
                 "scene-change score when there are fewer than n_f",
}

#: frames held in memory per chunk (vision) and texts per chunk: also the resume granularity
CHUNK_FRAMES = 256
CHUNK_TEXTS = 64
#: the frame orders: the paper's, and the two controls (see `vlgap.extract`)
FRAME_ORDERS = ("ordered", "reversed", "shuffled")


@dataclass
class Decoded:
    """One chunk after decoding: per value, the ids kept and the bad items; the payloads to encode."""

    ids: dict[int, list[str]]
    bad: dict[int, list[dict]]
    payload: Any
    frame_log: dict[int, dict[str, list[int]]] = field(default_factory=dict)
    #: per value, the kept videos with fewer frames than n_f: [{"id", "frames", "n_f"}]
    repeated: dict[int, list[dict]] = field(default_factory=dict)

    @staticmethod
    def join(parts: list["Decoded"]) -> "Decoded":
        return join_decoded(parts)


def join_decoded(parts: list[Decoded]) -> Decoded:
    """One chunk from its consecutive parts (decoded separately), exactly as if collected at once."""
    first = parts[0]
    ids = {v: [i for p in parts for i in p.ids[v]] for v in first.ids}
    bad = {v: [b for p in parts for b in p.bad[v]] for v in first.bad}
    log = {v: {i: x for p in parts for i, x in p.frame_log[v].items()} for v in first.frame_log}
    repeated = {v: [x for p in parts for x in p.repeated.get(v, [])] for v in first.repeated}
    if isinstance(first.payload, dict):  # text: per value
        payload = {v: [x for p in parts for x in p.payload[v]] for v in first.payload}
    else:
        payload = [x for p in parts for x in p.payload]
    return Decoded(ids, bad, payload, log, repeated)


def bad_item_message(bad: dict) -> str:
    """The one-line error a run without --skip-bad gives for a bad item (fresh or cached alike)."""
    reason = str(bad["reason"])
    text = reason if reason.startswith(f"item {bad['id']!r}") else str(BadItemError(bad["id"], reason))
    return f"{text} (pass --skip-bad to skip and report such items)"


def repeated_frames_message(item_id: str, frames: int, n_f: int) -> str:
    """The one-line error for a video with fewer frames than n_f (fresh or cached alike)."""
    return (f"item {item_id!r}: its video has {frames} frame{'s' if frames != 1 else ''} but n_f={n_f} were "
            f"requested, so frames would repeat; request n_f <= {frames}, pass --allow-repeated-frames "
            "(allow_repeated_frames=True) to keep it with repeated frames (warned and recorded), or --skip-bad "
            "to skip such items")


def _bad(item_id: str, reason: str, skip_bad: bool) -> dict:
    bad = {"id": item_id, "reason": reason}
    if not skip_bad:
        raise VlgapError(bad_item_message(bad))
    return bad


class VisionSteps:
    def __init__(self, values: list[int], n0: int, is_video: bool, frame_order: str = "ordered",
                 skip_bad: bool = False, temporal_pooling: str = "mean", allow_repeated_frames: bool = False,
                 frame_sampling: str = "uniform"):
        self.values, self.n0, self.is_video = values, n0, is_video
        self.frame_sampling = frame_sampling
        self.frame_order, self.skip_bad, self.temporal_pooling = frame_order, skip_bad, temporal_pooling
        self.allow_repeated_frames = allow_repeated_frames
        if self.is_video:
            for v in values:
                check_n_f(v, self.n0)
        self.frame_log: dict[int, dict[str, list[int]]] = {v: {} for v in values}

    def chunk_items(self) -> int:
        per_item = max(self.values) if not self.is_video else max(max(self.values), self.n0)
        return int(np.clip(CHUNK_FRAMES // per_item, 1, 64))

    def policy(self, v: int) -> dict:
        return {"sampling": {
            "policy": FRAME_SAMPLING_POLICIES[self.frame_sampling.split(":")[0]],
            **({"frame_sampling": self.frame_sampling} if self.frame_sampling != "uniform" else {}),
            "n_f": v, "n0": self.n0, "frame_order": self.frame_order,
            "aggregation": ("mean over n_f/n0 sub-clips" if self.is_video else describe_pooling(self.temporal_pooling)),
            "temporal_pooling": self.temporal_pooling,
            "frame_indices": self.frame_log[v],
        }}

    def _sample(self, item: Item, total: int, keys=None) -> dict[int, np.ndarray]:
        out = {}
        for v in self.values:
            try:
                idx = sample_frames(total, v, self.frame_sampling, item.id, *(keys or (None, None)))
            except VlgapError as err:  # e.g. a stride longer than this video: a bad item, named
                raise BadItemError(item.id, str(err).split(": ", 1)[-1]) from None
            if self.frame_order == "reversed":
                idx = idx[::-1].copy()
            elif self.frame_order == "shuffled":
                seed = int.from_bytes(hashlib.sha256(f"{item.id}|{v}".encode()).digest()[:8], "little")
                idx = idx[np.random.default_rng(seed).permutation(len(idx))]
            out[v] = idx
        return out

    def sample_decoded(self, item: Item, frames: np.ndarray):
        """`decode_one` for a video its caller decoded already (every frame, [T, H, W, 3] uint8): the same
        frame indices per n_f, the same outcome tuple."""
        total = len(frames)
        if total < 1:
            return ("bad", item.id, "has no frames")
        if self.frame_sampling == "keyframes":  # the container's key frames are gone once decoded
            raise VlgapError("frame sampling 'keyframes' needs the video file (its container's key frames); "
                             "give paths rather than decoded frames, or another strategy")
        self._refuse_too_short(item, total)
        per_value = self._sample(item, total)
        union = np.unique(np.concatenate(list(per_value.values())))
        pos = {v: np.searchsorted(union, idx) for v, idx in per_value.items()}
        return ("ok", np.ascontiguousarray(frames[union]), pos, per_value, total)

    def _too_short(self, item: Item, total: int) -> int | None:
        """The first n_f longer than this video (None when none is, or when the flags keep such items)."""
        if item.kind == "image" or self.allow_repeated_frames or self.skip_bad:
            return None
        return next((v for v in self.values if total < v), None)

    def _refuse_too_short(self, item: Item, total: int) -> None:
        """The error `collect` gives a video shorter than an n_f, said once its length is known and before
        any frame index is drawn: `--n-frames 1000000000` on a 32-frame video is refused at once instead of
        drawing (and allocating) a billion indices first. With --allow-repeated-frames or --skip-bad the
        item is sampled as asked (the entry's content does not depend on the flags)."""
        v = self._too_short(item, total)
        if v is not None:
            raise VlgapError(repeated_frames_message(item.id, total, v))

    def decode_one(self, item: Item, preprocess=None):
        """Decode the union of the frames all n_f need (and preprocess them when given the encoder's
        `preprocess`). Returns ("ok", frames or pixels, positions per n_f, indices per n_f) or
        ("bad", item id, reason)."""
        try:
            keys = None
            if self.frame_sampling == "keyframes":  # one small decoding pass: key frames + scene changes
                key_pos, change, total = keyframe_info(item)
                keys = (key_pos, change)
            else:
                total = count_frames(item)
            if total < 1:
                raise BadItemError(item.id, f"{item.media} has no frames")
            if self._too_short(item, total) and item.media.is_file():  # the container's count: make sure
                _, total = read_frames(item, None, max_side=16)
            self._refuse_too_short(item, total)
            per_value = self._sample(item, total, keys)
            union = np.unique(np.concatenate(list(per_value.values())))
            try:
                frames, _ = read_frames(item, union)
            except BadItemError as err:
                if "beyond its end" not in err.reason:
                    raise
                # the container's frame count overstated the stream: count by decoding, then sample again
                _, total = read_frames(item, None, max_side=16)
                per_value = self._sample(item, total, keys)
                union = np.unique(np.concatenate(list(per_value.values())))
                frames, _ = read_frames(item, union)
        except BadItemError as err:
            return ("bad", err.item_id, err.reason)
        payload = preprocess(frames) if preprocess is not None else frames
        pos = {v: np.searchsorted(union, idx) for v, idx in per_value.items()}
        return ("ok", payload, pos, per_value, total)

    def collect(self, items: list[Item], outcomes: list) -> Decoded:
        """One chunk's decoded items. Undecodable items are refused (or listed with --skip-bad); a video
        with fewer frames than an n_f is refused unless --allow-repeated-frames or --skip-bad, and else
        kept and listed in `repeated` (the flags are applied again to whatever is reused later, see
        features.extract.apply_item_policy, so a chunk's content does not depend on them)."""
        prepared, ids, bad = [], [], []
        log: dict[int, dict[str, list[int]]] = {v: {} for v in self.values}
        repeated: dict[int, list[dict]] = {v: [] for v in self.values}
        for item, out in zip(items, outcomes):
            if out[0] == "bad":
                bad.append(_bad(out[1], out[2], self.skip_bad))
                continue
            total = int(out[4])
            for v in self.values:
                if item.kind != "image" and total < v:  # a still image is one frame by declaration
                    if not (self.allow_repeated_frames or self.skip_bad):
                        raise VlgapError(repeated_frames_message(item.id, total, v))
                    repeated[v].append({"id": item.id, "frames": total, "n_f": v})
            prepared.append(out[1:4])
            ids.append(item.id)
            for v in self.values:
                log[v][item.id] = out[3][v].tolist()
        return Decoded({v: ids for v in self.values}, {v: bad for v in self.values}, prepared, log, repeated)

    def encode_chunk(self, enc, decoded: Decoded, batch_size: int) -> tuple[dict[int, list[np.ndarray]], int]:
        """Every layer for every n_f of one chunk; uint8 frames are preprocessed here (float arrays are
        pixels preprocessed elsewhere, e.g. by a Ray decoding task). An image encoder whose preprocessing
        maps each frame on its own (`framewise_preprocess`) gets the chunk's frames preprocessed batch by
        batch as they are encoded (`chunk_frames`): the same pixels and batches as item by item, without
        a second copy of the chunk's pixels or a preprocessing call per item."""
        import torch

        with torch.inference_mode():
            if self.is_video:
                prepared = [(_pixels(enc, p), pos, pv) for p, pos, pv in decoded.payload]
                return self._encode_video(enc, prepared, batch_size), 0
            return self._encode_frames(enc, decoded.payload, batch_size), 0

    @staticmethod
    def _forward(enc, x, batch_size, preprocess=None):
        """Every layer's output for the rows of x, `batch_size` at a time; `preprocess` (when given) turns
        each batch of x (uint8 frames) into pixels first."""
        import torch

        outs = []
        for s in range(0, x.shape[0], batch_size):
            batch = x[s:s + batch_size]
            if preprocess is not None:
                batch = preprocess(batch)
            outs.append([t.float().cpu() for t in enc.forward_layers(batch.to(enc.device, enc.dtype))])
        return [torch.cat([o[li] for o in outs]) for li in range(len(outs[0]))] if outs else []

    def _encode_frames(self, enc, prepared, batch_size):
        """prepared: per item (uint8 frames or pixels, positions per n_f, indices per n_f)."""
        import torch

        n_layers = enc.num_layers
        if not prepared:
            return {v: [np.zeros((0, 0), np.float32)] * n_layers for v in self.values}
        frames = chunk_frames(enc, [p[0] for p in prepared])
        if frames is not None:
            feats = self._forward(enc, frames, batch_size, enc.preprocess)
        else:
            feats = self._forward(enc, torch.cat([_pixels(enc, p[0]) for p in prepared]), batch_size)
        offsets = np.cumsum([0] + [len(p[0]) for p in prepared])
        out = {}
        for v in self.values:
            # each item's rows, its frames in sampled order (after any frame-order control)
            rows = [offsets[k] + p[1][v] for k, p in enumerate(prepared)]
            if self.temporal_pooling == "mean" and len({len(r) for r in rows}) == 1:
                # every item at once: [items, frames, D].mean(1) sums each item's rows in the same order
                # as its own f[rows].mean(0), so the same numbers for a fraction of the calls
                index = torch.as_tensor(np.concatenate(rows))
                layers = [f[index].view(len(rows), len(rows[0]), -1).mean(1) for f in feats]
            else:
                layers = [torch.stack([pool_frames(f[torch.as_tensor(r)], self.temporal_pooling) for r in rows])
                          for f in feats]
            out[v] = [t.numpy().astype(np.float32, copy=False) for t in layers]
        return out

    def _encode_video(self, enc, prepared, batch_size):
        import torch

        n_layers = enc.num_layers
        out = {}
        for v in self.values:
            if not prepared:
                out[v] = [np.zeros((0, 0), np.float32)] * n_layers
                continue
            clips, owner = [], []
            for k, (pixels, pos, _) in enumerate(prepared):
                for clip in subclips(pos[v], self.n0):
                    if len(clip) < self.n0:  # fewer frames than the model's fixed length: nearest repeat
                        clip = clip[np.floor(np.arange(self.n0) * len(clip) / self.n0).astype(int)]
                    clips.append(pixels[torch.as_tensor(clip)])
                    owner.append(k)
            feats = self._forward(enc, torch.stack(clips), batch_size)
            owner_t = torch.as_tensor(owner)
            layers = []
            for f in feats:
                sums = torch.zeros(len(prepared), f.shape[1]).index_add_(0, owner_t, f)
                counts = torch.bincount(owner_t, minlength=len(prepared)).unsqueeze(1)
                layers.append((sums / counts).numpy().astype(np.float32))
            out[v] = layers
        return out


def framewise_preprocess(enc) -> bool:
    """Whether the encoder's preprocessing maps every frame on its own (its `preprocessor` says
    `framewise`), so that a frame's pixels do not depend on which frames are preprocessed with it."""
    return bool(getattr(getattr(enc, "preprocessor", None), "framewise", False))


def chunk_frames(enc, payloads: list) -> np.ndarray | None:
    """A chunk's frames as one uint8 [N, H, W, 3] array, for `VisionSteps._forward` to preprocess batch by
    batch: when every item holds uint8 frames of one size and the encoder preprocesses frame by frame.
    Else None (each item is preprocessed on its own)."""
    if not framewise_preprocess(enc):
        return None
    if not all(isinstance(p, np.ndarray) and p.dtype == np.uint8 and p.ndim == 4 for p in payloads):
        return None
    if len({p.shape[1:] for p in payloads}) != 1:
        return None
    return payloads[0] if len(payloads) == 1 else np.concatenate(payloads)


def _pixels(enc, payload):
    """A decoded item's pixels as the encoder's input tensor."""
    import torch

    if isinstance(payload, np.ndarray):
        return enc.preprocess(payload) if payload.dtype == np.uint8 else torch.from_numpy(payload)
    return payload


class TextSteps:
    def __init__(self, values: list[int], skip_bad: bool, pooling: str | None = None,
                 caption_draw: tuple[int, int] | None = None):
        self.values, self.skip_bad, self.pooling = values, skip_bad, pooling
        #: None: the first n_c captions (the paper); (seed, draw number): a random draw of n_c captions
        self.caption_draw = caption_draw

    def chunk_items(self) -> int:
        return CHUNK_TEXTS

    def policy(self, v: int) -> dict:
        if self.caption_draw is None:
            return {"captions": {"policy": "first n_c captions, each ended with a full stop, joined by a space",
                                 "n_c": v, "pooling": self.pooling}}
        seed, draw = self.caption_draw
        return {"captions": {"policy": "n_c captions drawn at random per item (seeded by item id, seed and draw; "
                                       "kept in their order), each ended with a full stop, joined by a space",
                             "n_c": v, "pooling": self.pooling, "caption_draw": {"seed": seed, "draw": draw}}}

    def decode_one(self, item: Item, preprocess=None):
        """Per n_c: the joined text, or the reason the item cannot give it."""
        out = {}
        for v in self.values:
            try:
                if not item.captions:
                    raise BadItemError(item.id, "has no captions")
                out[v] = ("ok", draw_captions(item.captions, v, item.id, self.caption_draw))
            except VlgapError as err:
                out[v] = ("bad", str(err))
        return out

    def collect(self, items: list[Item], outcomes: list) -> Decoded:
        texts, ids, bad = {}, {}, {}
        for v in self.values:
            texts[v], ids[v], bad[v] = [], [], []
            for item, out in zip(items, outcomes):
                status, value = out[v]
                if status == "ok":
                    texts[v].append(value)
                    ids[v].append(item.id)
                elif not self.skip_bad:
                    raise VlgapError(bad_item_message({"id": item.id, "reason": value}))
                else:
                    bad[v].append({"id": item.id, "reason": value})
        return Decoded(ids, bad, texts)

    def encode_chunk(self, enc, decoded: Decoded, batch_size: int) -> tuple[dict[int, list[np.ndarray]], int]:
        import torch

        before = int(getattr(enc, "n_truncated", 0) or 0)
        out = {}
        shared = self._encode_shared_prefixes(enc, decoded, batch_size)
        for v in self.values:
            if v in shared:
                out[v] = shared[v]
                continue
            texts = decoded.payload[v]
            # length-sorted mini-batches waste less padding; pooling is mask-aware so order is free
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            chunks = []
            with torch.inference_mode():
                for s in range(0, len(order), batch_size):
                    idx = order[s:s + batch_size]
                    chunks.append((idx, [t.float().cpu().numpy() for t in enc.encode([texts[i] for i in idx])]))
            layers = []
            for li in range(enc.num_layers):
                if not texts:
                    layers.append(np.zeros((0, 0), np.float32))
                    continue
                width = chunks[0][1][li].shape[1]
                arr = np.empty((len(texts), width), np.float32)
                for idx, outs in chunks:
                    arr[idx] = outs[li]
                layers.append(arr)
            out[v] = layers
        return out, int(getattr(enc, "n_truncated", 0) or 0) - before

    def _encode_shared_prefixes(self, enc, decoded: Decoded, batch_size: int) -> dict[int, list[np.ndarray]]:
        """A causal LM's features for every n_c from one pass over the longest texts, when each item's
        shorter texts tokenise to prefixes of its longest one (the first n_c captions joined: n_c = 1 is
        a prefix of n_c = 8). The states of a prefix's tokens do not see the tokens after it, so the
        pooled vectors equal a separate pass's up to float rounding, at the cost of the longest texts
        alone (the sum over n_c = 1, 2, 4, 8 is 1.9 times that). Otherwise (an encoder that attends both
        ways, random caption draws, a text cut at max_length, items differing between n_c) nothing is
        shared and each n_c runs on its own."""
        import torch

        values = sorted(self.values)
        if len(values) < 2 or not getattr(enc, "causal", False) or not hasattr(enc, "encode_prefixes"):
            return {}
        top = values[-1]
        if any(decoded.ids[v] != decoded.ids[top] for v in values) or not decoded.payload[top]:
            return {}
        tokens = {v: enc.token_ids(decoded.payload[v]) for v in values}
        full = tokens[top]
        if any(len(t) > enc.max_length for t in full):
            return {}
        if any(t[:len(p)] != p for v in values[:-1] for t, p in zip(full, tokens[v])):
            return {}
        n = len(full)
        order = sorted(range(n), key=lambda i: len(full[i]))
        layers: dict[int, list[np.ndarray]] = {}
        with torch.inference_mode():
            for s in range(0, n, batch_size):
                idx = order[s:s + batch_size]
                pooled = enc.encode_prefixes([decoded.payload[top][i] for i in idx],
                                             [[len(tokens[v][i]) for i in idx] for v in values])
                for v, per_layer in zip(values, pooled):
                    if v not in layers:
                        layers[v] = [np.empty((n, t.shape[1]), np.float32) for t in per_layer]
                    for arr, t in zip(layers[v], per_layer):
                        arr[idx] = t.float().cpu().numpy()
        return layers


def requested_values(n_frames, n_captions) -> tuple[str, list[int]]:
    """("n_f", values) or ("n_c", values), sorted and distinct, from an extraction's n_frames or n_captions
    (one of them; a list or a single int), each an integer >= 1."""
    if (n_frames is None) == (n_captions is None):
        raise VlgapError("give either n_frames (vision encoder) or n_captions (text encoder), e.g. n_frames=[8]")
    from vlgap.counts import count_list

    param = "n_f" if n_frames is not None else "n_c"
    name = "n_frames" if n_frames is not None else "n_captions"
    return param, sorted(count_list(name, n_frames if n_frames is not None else n_captions, 1))


def make_steps(encoder: str, param: str, values: list[int], info: dict, frame_order: str = "ordered",
               temporal_pooling: str = "mean", skip_bad: bool = False, allow_repeated_frames: bool = False,
               frame_sampling: str = "uniform", caption_draw: tuple[int, int] | None = None
               ) -> VisionSteps | TextSteps:
    """The per-chunk steps for `values` of `param` ("n_f" or "n_c") with an encoder described by
    `encoder_info` (no model needed); shared by `Job.steps` and `vlgap.distributed.EncoderUDF`."""
    if (param == "n_f") != (info["modality"] == "vision"):
        raise VlgapError(
            f"encoder {encoder!r} is a {info['modality']} encoder: use "
            + ("--n-frames" if info["modality"] == "vision" else "--n-captions")
        )
    if temporal_pooling != "mean" and info["kind"] == "video":
        raise VlgapError(f"temporal pooling {temporal_pooling!r} applies to image encoders; {encoder!r} "
                         "is a video encoder (its sub-clips are averaged): use 'mean'")
    if param == "n_f":
        return VisionSteps(values, info["n0"], info["kind"] == "video", frame_order, skip_bad, temporal_pooling,
                           allow_repeated_frames, frame_sampling)
    return TextSteps(values, skip_bad, info["record"].get("pooling"), caption_draw)


def encoder_info(enc) -> dict:
    """What orchestration needs to know about a loaded encoder (small, JSON-able)."""
    return {"modality": enc.modality, "kind": getattr(enc, "kind", "image"),
            "n0": int(getattr(enc, "native_clip_len", 1) or 1), "num_layers": enc.num_layers,
            "record": enc.record()}
