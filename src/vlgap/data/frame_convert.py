"""Decoded video frames -> uint8 RGB arrays, as the ffmpeg command line shows them.

`ffmpeg -i VIDEO -pix_fmt rgb24 -f rawvideo -` does two things to a decoded frame that a bare
`frame.to_ndarray(format="rgb24")` does not:

- it turns the picture upright (its `-autorotate`, on by default): a display matrix in the stream's or
  frame's side data (a phone filming upright writes "rotate by -90 degrees" beside landscape pixels)
  becomes a `transpose`, `hflip` / `vflip` or, for an angle that is no multiple of 90 degrees, a
  `rotate` filter (the picture turned inside its own width and height, the corners black);
  `display_filters` is that rule, read from the command line's source (fftools, `get_rotation` and
  the autorotate block of the input filter), so every orientation and flip of the eight a matrix can
  hold comes out as ffmpeg shows it;
- it converts with libavfilter's `scale` filter at swscale's default flags (bicubic): where the
  chroma must be interpolated (4:2:0 with an odd height, 4:2:2 with an odd width, a 4:2:0 MPEG-4 or
  MPEG-2 stream, whose chroma is marked left-sited), PyAV's own converter (bilinear; in recent PyAV
  also honouring the frame's chroma location, which the scale filter does not) differs by up to tens
  of levels at sharp colour edges (a few on natural video). The colour matrix and range are the frame's
  own tags (BT.601 when untagged, limited range unless the stream says full), as ffmpeg takes them.

So each video runs through one small filter graph built with PyAV from the same FFmpeg libraries:
`buffer -> [orientation] -> scale -> format=rgb24 -> buffersink`, set up at the first frame and again
only when a frame's size, pixel format, colour tags or display matrix change; turning happens on the
YUV planes before the conversion, as in ffmpeg, so odd sizes turned sideways match too. Per frame the
graph costs a little more than a reused swscale context (a push and a pull), little next to decoding,
and only frames that are kept are converted.

A frame downscaled while decoding (`max_side`, for callers that only need small frames) is turned
first and then scaled to fit, bilinear as before; only full-size frames are promised to equal
ffmpeg's bytes.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

#: what decoded pixels depend on besides the file's bytes; part of the key of every cache entry made
#: from decoded pixels (vision features, sweep cells, CLIPScore frame embeddings), so that entries made
#: by an earlier reader are recomputed rather than reused. 1 (absent from older keys): PyAV's bilinear
#: swscale conversion, display matrix ignored (phone videos sideways), pictures' EXIF orientation
#: ignored. 2: as the ffmpeg command line shows them (this module), pictures EXIF-transposed.
DECODING = 2


def _c_round(x: float) -> float:
    """C's round(): halves away from zero (Python's round() takes halves to even)."""
    return math.copysign(math.floor(abs(x) + 0.5), x)


def display_rotation(matrix: Sequence[int]) -> float | None:
    """The counter-clockwise angle in degrees that a display matrix turns the picture by, as
    libavutil's `av_display_rotation_get` computes it (None where the matrix has a zero column)."""
    m = [v / 65536.0 for v in matrix[:6]]
    s0, s1 = math.hypot(m[0], m[3]), math.hypot(m[1], m[4])
    if s0 == 0.0 or s1 == 0.0:
        return None
    return -math.degrees(math.atan2(m[1] / s1, m[0] / s0))


def display_filters(matrix: Sequence[int] | None) -> list[tuple[str, str | None]]:
    """The filters (name, arguments) ffmpeg's autorotate puts before the conversion for a 3x3 display
    matrix (9 integers, 16.16 fixed point as FFmpeg stores it; None: no matrix, nothing to do).
    theta: the clockwise angle rounded to whole degrees in [0, 360); 90 -> transpose (clockwise, or
    counter-clockwise then vertical flip where the matrix mirrors), 180 -> hflip and / or vflip by the
    signs of the diagonal, 270 -> transpose (counter-clockwise, or clockwise then vertical flip),
    any other angle above 1 degree -> rotate (same width and height, black corners), 0 -> vflip where
    the matrix mirrors vertically."""
    if matrix is None:
        return []
    m = [int(v) for v in matrix]
    if len(m) != 9:
        raise ValueError(f"a display matrix has 9 entries, got {len(m)}")
    angle = display_rotation(m)
    if angle is None:  # NaN in ffmpeg: every test below fails, so only the last branch applies
        return [("vflip", None)] if m[4] < 0 else []
    theta = -_c_round(angle) + 0.0  # + 0.0: -0.0 -> 0.0
    theta -= 360 * math.floor(theta / 360 + 0.9 / 360)
    if abs(theta - 90) < 1.0:
        return [("transpose", "cclock_flip" if m[3] > 0 else "clock")]
    if abs(theta - 180) < 1.0:
        return ([("hflip", None)] if m[0] < 0 else []) + ([("vflip", None)] if m[4] < 0 else [])
    if abs(theta - 270) < 1.0:
        return [("transpose", "clock_flip" if m[3] < 0 else "cclock")]
    if abs(theta) > 1.0:
        return [("rotate", f"{theta:f}*PI/180")]
    return [("vflip", None)] if m[4] < 0 else []


def display_matrix(frame) -> tuple[int, ...] | None:
    """The display matrix a decoded frame carries in its side data (FFmpeg attaches the stream's to
    every frame), or None."""
    from av.sidedata.sidedata import Type

    for sd in frame.side_data:
        if sd.type == Type.DISPLAYMATRIX:
            return tuple(int(v) for v in np.frombuffer(bytes(sd), dtype="<i4", count=9))
    return None


def _turned_size(width: int, height: int, filters: list[tuple[str, str | None]]) -> tuple[int, int]:
    """Width and height after the orientation filters (a transpose swaps them; rotate keeps them)."""
    if any(name == "transpose" for name, _ in filters):
        return height, width
    return width, height


class FrameConverter:
    """Decoded frames of one video -> upright uint8 RGB arrays [H, W, 3] through one filter graph,
    reused frame after frame (see the module docstring). `threads`: the graph's threads (None:
    FFmpeg's choice, one per core); the pixels are the same either way."""

    def __init__(self, threads: int | None = None):
        self._threads = threads
        self._graph = None
        self._state: tuple | None = None

    def __call__(self, frame, max_side: int | None = None) -> np.ndarray:
        matrix = display_matrix(frame)
        state = (frame.width, frame.height, frame.format.name, int(frame.colorspace), int(frame.color_range),
                 matrix, max_side)
        if state != self._state:
            self._graph = self._build(frame, matrix, max_side)
            self._state = state
        self._graph.vpush(frame)
        return self._graph.vpull().to_ndarray()

    def _build(self, frame, matrix, max_side: int | None):
        import av

        graph = av.filter.Graph()
        if self._threads is not None and hasattr(graph, "threads"):  # PyAV 15 on; before, FFmpeg's choice
            graph.threads = self._threads
        source = {"video_size": f"{frame.width}x{frame.height}", "pix_fmt": frame.format.name,
                  "time_base": str(frame.time_base or "1/1000"), "pixel_aspect": "1/1"}
        if av.library_versions["libavfilter"] >= (10, 1):
            # FFmpeg 7.0 on: the source is told the frames' colour tags, as ffmpeg tells it (the scale filter
            # converts by each frame's own tags either way; untold, FFmpeg warns that they "changed")
            source.update(colorspace=str(int(frame.colorspace)), range=str(int(frame.color_range)))
        nodes = [graph.add("buffer", **source)]
        turns = display_filters(matrix)
        nodes += [graph.add(name, args) for name, args in turns]
        width, height = _turned_size(frame.width, frame.height, turns)
        if max_side is not None and max(width, height) > max_side:
            s = max_side / max(width, height)
            nodes.append(graph.add("scale", f"w={max(2, round(width * s))}:h={max(2, round(height * s))}"
                                            ":flags=bilinear"))
        else:
            nodes.append(graph.add("scale", "flags=bicubic"))
        nodes += [graph.add("format", "rgb24"), graph.add("buffersink")]
        graph.link_nodes(*nodes)
        graph.configure()
        return graph
