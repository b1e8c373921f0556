"""Decoding media into uint8 RGB frames with PyAV (videos, GIFs), Pillow (images, frame folders).

Frames come out as the ffmpeg command line shows them (`ffmpeg -i VIDEO -pix_fmt rgb24`): upright
where the stream carries a display matrix (phone videos), converted to RGB at swscale's default
flags (data.frame_convert); pictures are turned upright by their EXIF orientation, as viewers and
OpenCV show them. Each video is converted through one filter graph for all its frames, rather than a
new converter per frame: a third of the decoding time for small frames, the same pixels. How many
threads the codec and the converter use is FFmpeg's choice (one per core) unless `decode_threads` says
otherwise for the calling thread: extraction on the CPU decodes with one each in its decoding threads,
whose cores the encoder needs.
"""
from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import numpy as np

from vlgap.data.frame_convert import FrameConverter
from vlgap.data.manifest import IMAGE_SUFFIXES, Item
from vlgap.errors import BadItemError


_local = threading.local()


@contextlib.contextmanager
def decode_threads(n: int | None):
    """Within this block, videos decoded by the calling thread use `n` codec threads and `n` colour
    conversion threads (None: FFmpeg's choice, the default). The pixels are the same either way."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"decode threads must be None or an integer >= 1, got {n!r}")
    before = getattr(_local, "threads", None)
    _local.threads = n
    try:
        yield
    finally:
        _local.threads = before


def set_decode_threads(n: int | None) -> None:
    """`decode_threads(n)` for the rest of the calling thread's life (a worker pool's initializer)."""
    decode_threads(n).__enter__()


def _frame_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def _load_image(path: Path) -> np.ndarray:
    """A picture upright (its EXIF orientation applied, as a phone photo is shown), as RGB."""
    from PIL import Image, ImageOps

    with Image.open(path) as im:
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"))


#: containers whose frame count (nb_frames) is their sample table's: ISO BMFF (mp4, mov, m4v, 3gp)
_COUNTED_CONTAINERS = ("mov,mp4,m4a,3gp,3g2,mj2",)


def count_frames(item: Item) -> int:
    """Number of decoded frames. From the container's frame count where it is exact (metadata_frame_count:
    an mp4 or mov whose samples all decode and are all shown), else counted by decoding every frame."""
    path = item.media
    if item.kind == "image":
        if not path.exists():
            raise BadItemError(item.id, f"media file not found: {path}")
        return 1
    if path.is_dir():
        return len(_frame_files(path))
    if not path.exists():
        raise BadItemError(item.id, f"media file not found: {path}")
    import av

    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise ValueError("no video stream")
            known = metadata_frame_count(container)
        return known if known is not None else _decoded_count(path)
    except Exception as err:
        raise BadItemError(item.id, f"cannot decode {path}: {type(err).__name__}: {err}") from None


def _decoded_count(path: Path) -> int:
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"  # the same frames, decoded on every core
        threads = getattr(_local, "threads", None)
        if threads is not None:
            stream.codec_context.thread_count = threads
        return sum(1 for _ in container.decode(stream))


def metadata_frame_count(container) -> int | None:
    """The first video stream's frame count from the container, where it equals the decoded count; else
    None. Only ISO BMFF containers (mp4, mov) are asked: their count is the sample table's. It is
    trusted when every sample can be read (a cut-off file stops short), none is marked to be dropped
    (an edit list that starts later than the first sample: ffmpeg -ss with -c copy), the first is a key
    frame (a decoder drops what comes before one), none is shown before it (the leading pictures of an
    open GOP cut out of a longer stream refer to frames the file lacks: the decoder drops them) and the
    number read equals the count. Reading the samples moves no pixel through a decoder. Matroska, WebM,
    MPEG-PS/TS, AVI (whose index counts placeholder chunks too) and the rest give None: the frames are
    then counted by decoding them."""
    stream = container.streams.video[0]
    declared = int(stream.frames or 0)
    if container.format.name not in _COUNTED_CONTAINERS or declared <= 0:
        return None
    n, first = 0, None
    for packet in container.demux(stream):
        if packet.size == 0:  # the demuxer's end-of-stream packet
            continue
        if packet.is_discard or packet.is_corrupt or packet.pts is None:
            return None
        if first is None:
            if not packet.is_keyframe:
                return None
            first = packet.pts
        elif packet.pts < first:
            return None
        n += 1
    return declared if n == declared else None


def read_frames(item: Item, indices: np.ndarray | None = None, max_side: int | None = None) -> tuple[np.ndarray, int]:
    """Return (frames [len(indices), H, W, 3] uint8, total frame count). `indices` are positions in the
    decoded frame sequence (None: all frames). Frames are decoded sequentially and only the requested
    ones kept, so memory is bounded by the number requested. `max_side` downscales large frames
    while decoding (the encoders resize anyway) to save memory and time."""
    path = item.media
    if not path.exists():
        raise BadItemError(item.id, f"media file not found: {path}")
    try:
        if item.kind == "image":
            frames = [_load_image(path)]
            total = 1
        elif path.is_dir():
            files = _frame_files(path)
            total = len(files)
            if total == 0:
                raise BadItemError(item.id, f"frame folder {path} holds no image files ({sorted(IMAGE_SUFFIXES)})")
            wanted = range(total) if indices is None else indices
            frames = [_load_image(files[int(i)]) for i in wanted]
        else:
            frames, total = _decode_video(path, indices, max_side)
    except BadItemError:
        raise
    except Exception as err:  # PyAV/Pillow raise many types; the item and cause are what matter
        raise BadItemError(item.id, f"cannot decode {path}: {type(err).__name__}: {err}") from None
    if total == 0 or not frames:
        raise BadItemError(item.id, f"{path} has no decodable frames")
    if indices is not None and item.kind == "image":
        frames = frames * len(indices)  # an image is a one-frame video: every index is frame 0
    out = np.stack([_fit(f, max_side) for f in frames])
    return out, total


def _fit(frame: np.ndarray, max_side: int | None) -> np.ndarray:
    if max_side is None or max(frame.shape[:2]) <= max_side:
        return frame
    from PIL import Image

    h, w = frame.shape[:2]
    s = max_side / max(h, w)
    return np.asarray(Image.fromarray(frame).resize((max(1, round(w * s)), max(1, round(h * s))), Image.BILINEAR))


def _decode_video(path: Path, indices: np.ndarray | None, max_side: int | None) -> tuple[list[np.ndarray], int]:
    import av

    threads = getattr(_local, "threads", None)
    convert = FrameConverter(threads)
    with av.open(str(path)) as container:
        if not container.streams.video:
            raise ValueError("no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        if threads is not None:
            stream.codec_context.thread_count = threads
        want: dict[int, list[int]] | None = None
        if indices is not None:
            want = {}
            for pos, idx in enumerate(indices):
                want.setdefault(int(idx), []).append(pos)
            last = max(want)
        kept: list[np.ndarray | None] = [None] * (len(indices) if indices is not None else 0)
        all_frames: list[np.ndarray] = []
        total = 0
        for frame in container.decode(stream):
            if want is None:
                all_frames.append(convert(frame, max_side))
            elif total in want:
                arr = convert(frame, max_side)
                for pos in want[total]:
                    kept[pos] = arr
            total += 1
            if want is not None and total > last:
                break
    if want is None:
        return all_frames, total
    missing = [int(indices[p]) for p, a in enumerate(kept) if a is None]
    if missing:
        raise ValueError(f"video has {total} decodable frames, indices {missing[:5]} are beyond its end")
    return kept, total  # type: ignore[return-value]


def keyframe_info(item: Item, max_side: int = 32) -> tuple[np.ndarray, np.ndarray, int]:
    """(the container's key-frame positions, per-frame scene-change scores, frame count), in the decoded
    frame sequence, from one decoding pass at a small size (the scores only need coarse frames). Frame
    folders and images have no key frames: the scores alone then choose (data.sampling.keyframe_indices)."""
    from vlgap.data.sampling import scene_change_scores

    path = item.media
    if not path.exists():
        raise BadItemError(item.id, f"media file not found: {path}")
    if item.kind == "image" or path.is_dir():
        frames, total = read_frames(item, None, max_side=max_side)
        small = np.stack([_fit(f, max_side) for f in frames])
        return np.zeros(0, np.int64), scene_change_scores(small), total
    import av

    keys, small = [], []
    convert = FrameConverter(getattr(_local, "threads", None))
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise ValueError("no video stream")
            for pos, frame in enumerate(container.decode(container.streams.video[0])):
                if frame.key_frame:
                    keys.append(pos)
                small.append(convert(frame, max_side))
    except Exception as err:
        raise BadItemError(item.id, f"cannot decode {path}: {type(err).__name__}: {err}") from None
    if not small:
        raise BadItemError(item.id, f"{path} has no decodable frames")
    if len({f.shape for f in small}) > 1:
        raise BadItemError(item.id, f"{path}: its frames change size mid-stream; keyframes sampling needs one size")
    return np.asarray(keys, np.int64), scene_change_scores(np.stack(small)), len(small)
