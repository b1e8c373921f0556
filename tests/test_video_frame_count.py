"""count_frames: the container's frame count where it equals the number of decoded frames (mp4, mov), a
decoding count elsewhere and wherever the count would be wrong (edit lists, open-GOP cuts, cut-off
files); checked against decoding every frame."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vlgap.data.manifest import Item


def _write(path: Path, codec: str, n: int, options=None, rate: int = 25, fmt=None) -> Path:
    import av

    rng = np.random.default_rng(len(path.name) + n)
    with av.open(str(path), "w", format=fmt) as c:
        s = c.add_stream(codec, rate=rate, options=options or {})
        s.width, s.height, s.pix_fmt = 64, 48, "yuv420p"
        base = rng.integers(0, 256, (48, 64, 3)).astype(np.int16)
        for t in range(n):
            if t % 20 == 0:  # a cut every 20 frames, slow drift between
                base = rng.integers(0, 256, (48, 64, 3)).astype(np.int16)
            img = np.clip(base + 3 * (t % 20) + rng.integers(-4, 4, base.shape), 0, 255).astype(np.uint8)
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def _remux_from_key(src: Path, dst: Path, key: int, options=None) -> Path:
    """Copy src's packets from its key-th key frame on (timestamps shifted to start there), without
    decoding: what `ffmpeg -ss T -c copy` makes. The B-frames that follow that key frame in decode order
    but show before it refer to frames left behind."""
    import av

    with av.open(str(src)) as inp, av.open(str(dst), "w", options=options or {}) as out:
        ist = inp.streams.video[0]
        ost = out.add_stream_from_template(ist)
        seen, shift = -1, None
        for p in inp.demux(ist):
            if p.size == 0:
                continue
            seen += p.is_keyframe
            if shift is None:
                if seen < key or not p.is_keyframe:
                    continue
                shift = p.pts
            p.pts -= shift
            p.dts -= shift
            p.stream = ost
            out.mux(p)
    return dst


def _item(path: Path) -> Item:
    return Item(id="x", media=path, kind="video", captions=())


def _decoded(path: Path) -> int:
    import av

    with av.open(str(path)) as c:
        return sum(1 for _ in c.decode(video=0))


def _metadata(path: Path):
    import av

    from vlgap.data.video import metadata_frame_count

    with av.open(str(path)) as c:
        return metadata_frame_count(c)


def _available(codec: str) -> bool:
    import av

    return codec in av.codecs_available


OPEN_GOP = {"x264-params": "open-gop=1:keyint=30:min-keyint=30:bframes=3:scenecut=0"}


def test_mp4_and_mov_counts_come_from_the_container_and_are_exact(tmp_path):
    files = [_write(tmp_path / "a.mp4", "mpeg4", 17), _write(tmp_path / "b.mp4", "mpeg4", 30, {"bf": "2"}),
             _write(tmp_path / "c.mov", "mpeg4", 23), _write(tmp_path / "d.m4v", "mpeg4", 12, fmt="mp4")]
    if _available("libx264"):  # B-frames and open GOPs inside the file: every sample still decodes
        files += [_write(tmp_path / "e.mp4", "libx264", 90, OPEN_GOP), _write(tmp_path / "f.mov", "libx264", 23)]
    for path in files:
        assert _metadata(path) == _decoded(path), path.name


def test_other_containers_are_counted_by_decoding(tmp_path, monkeypatch):
    import vlgap.data.video as video

    files = [_write(tmp_path / "a.avi", "mpeg4", 17), _write(tmp_path / "b.mkv", "mpeg4", 19),
             _write(tmp_path / "c.ts", "mpeg2video", 21), _write(tmp_path / "d.mpg", "mpeg2video", 30, {"bf": "2"})]
    if _available("libvpx"):
        files.append(_write(tmp_path / "e.webm", "libvpx", 19))
    for path in files:
        assert _metadata(path) is None, path.name
        assert video.count_frames(_item(path)) == _decoded(path)
    mp4 = _write(tmp_path / "g.mp4", "mpeg4", 9)

    def no_decoding(*args, **kwargs):
        raise AssertionError("an mp4 whose count is exact was decoded")

    monkeypatch.setattr(video, "_decoded_count", no_decoding)
    assert video.count_frames(_item(mp4)) == 9


@pytest.mark.skipif(not _available("libx264"), reason="needs the libx264 encoder in PyAV's FFmpeg")
@pytest.mark.parametrize("edit_list", [True, False], ids=["edit-list", "no-edit-list"])
def test_a_cut_with_leading_pictures_is_counted_by_decoding(tmp_path, edit_list):
    from vlgap.data.video import count_frames

    source = _write(tmp_path / "long.mp4", "libx264", 120, OPEN_GOP)
    cut = _remux_from_key(source, tmp_path / "cut.mp4", 1, None if edit_list else {"use_editlist": "0"})
    import av

    with av.open(str(cut)) as c:
        declared = c.streams.video[0].frames
    decoded = _decoded(cut)
    assert declared > decoded  # the container's count is wrong here: the leading B-frames never show
    assert _metadata(cut) is None
    assert count_frames(_item(cut)) == decoded


def test_a_cut_off_file_is_not_counted_from_its_header(tmp_path):
    import av

    from vlgap.errors import BadItemError
    from vlgap.data.video import count_frames

    whole = _write(tmp_path / "whole.mp4", "mpeg4", 40)
    fast = tmp_path / "fast.mp4"  # the sample table first, then the samples: a cut keeps the full table
    with av.open(str(whole)) as inp, av.open(str(fast), "w", options={"movflags": "faststart"}) as out:
        ost = out.add_stream_from_template(inp.streams.video[0])
        for p in inp.demux(inp.streams.video[0]):
            if p.size:
                p.stream = ost
                out.mux(p)
    data = fast.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[:len(data) * 2 // 3])
    with av.open(str(cut)) as c:
        assert c.streams.video[0].frames == 40  # the header still says 40
    assert _metadata(cut) is None
    try:
        counted = count_frames(_item(cut))
    except BadItemError:
        return  # FFmpeg refuses the damaged tail: refused by name, never counted as 40
    assert counted < 40
