"""Videos as ffmpeg shows them (vlgap.data.frame_convert, vlgap.data.video): a display matrix turns the
picture upright, colours are converted at swscale's default flags with the stream's own colour tags,
pictures follow their EXIF orientation.

References: geometry (numpy's rot90 and flips of the drawn picture, or of the same coded pixels without a
matrix; scipy's rotate for an odd angle), the published BT.601 / BT.709 equations, PyAV's own swscale
conversion at ffmpeg's flags; the ffmpeg command line and OpenCV where installed (skipped otherwise)."""
from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from vlgap.data.frame_convert import FrameConverter, display_filters, display_matrix
from vlgap.data.manifest import read_manifest
from vlgap.data.video import keyframe_info, read_frames


# ---- media made here --------------------------------------------------------------------------------
def _picture(h: int, w: int, t: int = 0) -> np.ndarray:
    """An asymmetric picture: red rises left to right, green top to bottom, a blue block in the top-left
    corner and a white bar along the bottom; `t` shifts the block (frames differ)."""
    y, x = np.mgrid[0:h, 0:w]
    img = np.zeros((h, w, 3), np.uint8)
    img[..., 0] = 40 + 170 * x // max(1, w - 1)
    img[..., 1] = 40 + 170 * y // max(1, h - 1)
    img[2 + t:h // 3 + t, 2:w // 4, 2] = 230
    img[h - h // 6:, w // 3:, :] = 250
    return img


def _write(path, frames, codec="mpeg4", rotation=None, hflip=False, vflip=False, pix_fmt="yuv420p"):
    """Frames (RGB arrays) into a video; `rotation`: a display matrix turning the picture that many degrees
    counter-clockwise, then mirrored (PyAV's Stream.set_display_rotation), as phones write it."""
    import av

    h, w = frames[0].shape[:2]
    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=10)
        s.width, s.height, s.pix_fmt = w, h, pix_fmt
        if codec == "mpeg4":
            s.options = {"qscale": "2"}
        if rotation is not None:
            if not hasattr(s, "set_display_rotation"):
                pytest.skip("this PyAV cannot write a display matrix (Stream.set_display_rotation)")
            s.set_display_rotation(rotation, hflip=hflip, vflip=vflip)
        for img in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def _item(tmp_path, name):
    man = tmp_path / f"{name}.jsonl"
    man.write_text(json.dumps({"id": "x", "video": name, "captions": ["c"]}) + "\n")
    return read_manifest(man).items[0]


def _decode(tmp_path, name, **kw) -> np.ndarray:
    return read_frames(_item(tmp_path, name), None, **kw)[0]


def _shown(img: np.ndarray, degrees: int, hflip: bool, vflip: bool) -> np.ndarray:
    """What a display matrix set by Stream.set_display_rotation(degrees, hflip, vflip) shows: the picture
    turned counter-clockwise, then mirrored."""
    out = np.rot90(img, (degrees // 90) % 4, axes=(-3, -2))
    if hflip:
        out = out[..., :, ::-1, :]
    if vflip:
        out = out[..., ::-1, :, :]
    return out


def _pyav_frames(path):
    import av

    with av.open(str(path)) as c:
        return list(c.decode(c.streams.video[0]))


def _unsited(frame):
    """The same YUV planes in a new frame that carries no chroma location (colour tags kept)."""
    import av

    out = av.VideoFrame(frame.width, frame.height, frame.format.name)
    for src, dst in zip(frame.planes, out.planes):
        rows = np.frombuffer(src, np.uint8).reshape(-1, src.line_size)
        buf = np.zeros((dst.height, dst.line_size), np.uint8)
        n = min(src.line_size, dst.line_size)
        buf[:, :n] = rows[:dst.height, :n]
        dst.update(buf.tobytes())
    out.colorspace, out.color_range = frame.colorspace, frame.color_range
    return out


# ---- rotation ---------------------------------------------------------------------------------------
def test_phone_portrait_video_comes_out_upright(tmp_path):
    """An iPhone filming upright stores landscape pixels with "rotate by -90 degrees": the frames come out
    portrait, equal to the drawn picture turned clockwise (and far from the other way round)."""
    drawn = [_picture(48, 64, t) for t in range(3)]
    _write(tmp_path / "phone.mp4", drawn, rotation=-90)
    frames = _decode(tmp_path, "phone.mp4")
    assert frames.shape == (3, 64, 48, 3)
    upright = np.rot90(np.stack(drawn), -1, axes=(1, 2)).astype(int)
    err = np.abs(frames.astype(int) - upright).mean()
    wrong = np.abs(frames.astype(int) - np.rot90(np.stack(drawn), 1, axes=(1, 2))).mean()
    assert err < 3 and wrong > 30, (err, wrong)
    # requested frames and the small frames of keyframe_info are upright too
    some = read_frames(_item(tmp_path, "phone.mp4"), np.array([2, 0]))[0]
    assert np.array_equal(some, frames[[2, 0]])
    small = read_frames(_item(tmp_path, "phone.mp4"), None, max_side=32)[0]
    assert small.shape == (3, 32, 24, 3)
    assert keyframe_info(_item(tmp_path, "phone.mp4"), max_side=16)[2] == 3


@pytest.mark.parametrize("degrees", [0, 90, 180, 270, -90])
def test_every_orientation_and_mirror_of_a_display_matrix(tmp_path, degrees):
    """Each turn and mirror equals the same coded pixels without a matrix, turned and mirrored by numpy,
    bit for bit (even sizes: turning the YUV planes commutes with the conversion)."""
    drawn = [_picture(48, 64, t) for t in range(2)]
    _write(tmp_path / "plain.mp4", drawn)
    plain = _decode(tmp_path, "plain.mp4")
    for hflip in (False, True):
        for vflip in (False, True):
            name = f"r{degrees}{int(hflip)}{int(vflip)}.mp4"
            _write(tmp_path / name, drawn, rotation=degrees, hflip=hflip, vflip=vflip)
            got = _decode(tmp_path, name)
            want = _shown(plain, degrees, hflip, vflip)
            assert got.shape == want.shape and np.array_equal(got, want), (degrees, hflip, vflip)


def test_odd_size_turned_sideways(tmp_path):
    """47 x 63 MPEG-4 turned 90 degrees: 63 x 47 frames, the picture turned (chroma interpolated along the
    turned axis, as ffmpeg turns the planes before converting: close, not bit-equal, to turning after)."""
    drawn = [_picture(47, 63, t) for t in range(2)]
    _write(tmp_path / "plain.mp4", drawn)
    _write(tmp_path / "turned.mp4", drawn, rotation=90)
    got = _decode(tmp_path, "turned.mp4")
    want = np.rot90(_decode(tmp_path, "plain.mp4"), 1, axes=(1, 2)).astype(int)
    assert got.shape == (2, 63, 47, 3)
    assert np.abs(got.astype(int) - want).mean() < 1.5


def test_angle_that_is_no_multiple_of_90_rotates_inside_the_frame(tmp_path):
    """ffmpeg turns 30 degrees with its rotate filter: same width and height, black corners, the picture
    turned counter-clockwise about its centre (scipy's rotate of the unturned frame agrees, the other
    direction does not)."""
    from scipy import ndimage

    drawn = [_picture(96, 128)]
    _write(tmp_path / "plain.mp4", drawn)
    _write(tmp_path / "tilted.mp4", drawn, rotation=30)
    got = _decode(tmp_path, "tilted.mp4")[0].astype(float)
    plain = _decode(tmp_path, "plain.mp4")[0].astype(float)
    assert got.shape == plain.shape
    assert got[0, 0].max() < 8 and got[-1, -1].max() < 8  # corners outside the turned picture: black
    inner = (slice(28, 68), slice(40, 88))
    err = {a: np.abs(got[inner] - ndimage.rotate(plain, a, axes=(1, 0), reshape=False, order=1)[inner]).mean()
           for a in (30, -30, 0)}
    assert err[30] < 6 and err[-30] > 3 * err[30] and err[0] > 3 * err[30], err


def test_display_filters_are_ffmpegs_autorotate_rule():
    """The filters the ffmpeg command line inserts (fftools: get_rotation and the autorotate block), for
    matrices as libavutil writes them (16.16 fixed point, w in 2.30)."""
    one, z = 1 << 16, 1 << 30
    assert display_filters(None) == [] and display_filters([one, 0, 0, 0, one, 0, 0, 0, z]) == []
    assert display_filters([0, one, 0, -one, 0, 0, 0, 0, z]) == [("transpose", "clock")]  # iPhone portrait
    assert display_filters([0, -one, 0, one, 0, 0, 0, 0, z]) == [("transpose", "cclock")]
    assert display_filters([-one, 0, 0, 0, -one, 0, 0, 0, z]) == [("hflip", None), ("vflip", None)]
    assert display_filters([-one, 0, 0, 0, one, 0, 0, 0, z]) == [("hflip", None)]
    assert display_filters([one, 0, 0, 0, -one, 0, 0, 0, z]) == [("vflip", None)]
    assert display_filters([0, -one, 0, -one, 0, 0, 0, 0, z]) == [("transpose", "clock_flip")]
    assert display_filters([0, one, 0, one, 0, 0, 0, 0, z]) == [("transpose", "cclock_flip")]
    c, s = round(np.cos(np.pi / 6) * one), round(np.sin(np.pi / 6) * one)
    assert display_filters([c, -s, 0, s, c, 0, 0, 0, z]) == [("rotate", "330.000000*PI/180")]
    assert display_filters([0] * 8 + [z]) == []  # no angle (NaN in ffmpeg): nothing
    with pytest.raises(ValueError, match="9 entries"):
        display_filters([1, 2, 3])


def test_display_matrix_read_from_the_frames(tmp_path):
    _write(tmp_path / "phone.mp4", [_picture(16, 32)], rotation=-90)
    _write(tmp_path / "plain.mp4", [_picture(16, 32)])
    assert display_filters(display_matrix(_pyav_frames(tmp_path / "phone.mp4")[0])) == [("transpose", "clock")]
    assert display_matrix(_pyav_frames(tmp_path / "plain.mp4")[0]) is None


# ---- colours ----------------------------------------------------------------------------------------
def _noise(h, w, n=3, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(n)]


@pytest.mark.parametrize("codec,ext", [("libvpx", "webm"), ("libvpx-vp9", "webm")])
def test_odd_height_vp8_vp9_convert_at_swscale_default_flags(tmp_path, codec, ext):
    """4:2:0 with an odd height interpolates chroma: the frames equal swscale's conversion at its
    default flags (bicubic, what ffmpeg and OpenCV use), not the bilinear one PyAV defaults to."""
    name = f"odd.{ext}"
    _write(tmp_path / name, _noise(47, 63), codec=codec)
    got = _decode(tmp_path, name)
    decoded = _pyav_frames(tmp_path / name)
    bicubic = np.stack([f.reformat(format="rgb24", interpolation="BICUBIC").to_ndarray() for f in decoded])
    bilinear = np.stack([f.to_ndarray(format="rgb24") for f in decoded])
    assert np.array_equal(got, bicubic)
    assert np.abs(got.astype(int) - bilinear).max() > 2  # the test tells the two apart


def test_odd_height_mpeg4_ignores_chroma_siting_as_ffmpeg_does(tmp_path):
    """MPEG-4 marks its chroma left-sited; ffmpeg's scale filter converts as for centred chroma, and so
    does vlgap: equal to the same planes converted without a chroma location at swscale's default flags
    (PyAV 18's own conversion honours the siting; PyAV 13's ignores it), not PyAV's default."""
    _write(tmp_path / "odd.mp4", _noise(47, 63))
    got = _decode(tmp_path, "odd.mp4")
    decoded = _pyav_frames(tmp_path / "odd.mp4")
    centred = np.stack([_unsited(f).reformat(format="rgb24", interpolation="BICUBIC").to_ndarray() for f in decoded])
    assert np.array_equal(got, centred)
    assert np.abs(got.astype(int) - np.stack([f.to_ndarray(format="rgb24") for f in decoded])).max() > 2


@pytest.mark.parametrize("threads", [None, 1, 2])
def test_even_size_pixels_unchanged_and_threads_do_not_matter(tmp_path, threads):
    """Where no chroma is interpolated (even-sized 4:2:0) ffmpeg and PyAV agree: the pixels are PyAV's
    `to_ndarray(format="rgb24")` bit for bit with any thread count; downscaled frames (`max_side`) equal
    swscale's bilinear scaling of the same planes; one converter serves a whole video."""
    from vlgap.data.video import decode_threads

    _write(tmp_path / "noise.mp4", _noise(40, 48, n=9))
    item = _item(tmp_path, "noise.mp4")
    decoded = _pyav_frames(tmp_path / "noise.mp4")
    with decode_threads(threads):
        full, total = read_frames(item, None)
        some, _ = read_frames(item, np.array([7, 2, 2]))
        small, _ = read_frames(item, None, max_side=20)
        keys, _, n = keyframe_info(item, max_side=20)
    ref = np.stack([f.to_ndarray(format="rgb24") for f in decoded])
    assert total == n == 9 and full.shape == (9, 40, 48, 3) and np.array_equal(full, ref)
    assert np.array_equal(some, ref[[7, 2, 2]])
    small_ref = np.stack([_unsited(f).reformat(width=20, height=17, format="rgb24", interpolation="BILINEAR")
                          .to_ndarray() for f in decoded])
    assert small.shape == (9, 17, 20, 3) and np.array_equal(small, small_ref)
    assert keys[0] == 0


def _flat_yuv_video(path, codec, yuv, colorspace, color_range):
    import av

    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=10)
        s.width, s.height, s.pix_fmt = 64, 48, "yuv420p"
        s.codec_context.colorspace, s.codec_context.color_range = colorspace, color_range
        for _ in range(2):
            f = av.VideoFrame(64, 48, "yuv420p")
            for plane, v in zip(f.planes, yuv):
                plane.update(np.full(plane.buffer_size, v, np.uint8).tobytes())
            f.colorspace, f.color_range = colorspace, color_range
            for p in s.encode(f):
                c.mux(p)
        for p in s.encode():
            c.mux(p)


def _rgb(yuv, kr, kb, full):
    """The published Y'CbCr -> R'G'B' equations (ITU-R BT.601 / BT.709), limited or full range, 8 bit."""
    y, u, v = (float(c) for c in yuv)
    if full:
        yy, cb, cr = y, u - 128, v - 128
    else:
        yy, cb, cr = (y - 16) * 255 / 219, (u - 128) * 255 / 224, (v - 128) * 255 / 224
    kg = 1 - kr - kb
    return np.array([yy + 2 * (1 - kr) * cr, yy - 2 * kb * (1 - kb) / kg * cb - 2 * kr * (1 - kr) / kg * cr,
                     yy + 2 * (1 - kb) * cb])


@pytest.mark.parametrize("codec,ext", [("libx264", "mp4"), ("libvpx-vp9", "webm")])
def test_colour_matrix_and_range_follow_the_streams_tags(tmp_path, codec, ext):
    """A flat Y'CbCr colour converts by the matrix and range the stream declares (BT.709, BT.601, full or
    limited); untagged is BT.601 limited, as ffmpeg takes it."""
    yuv = (120, 90, 170)
    bt601, bt709 = (0.299, 0.114), (0.2126, 0.0722)
    cases = {(1, 1): (*bt709, False), (1, 2): (*bt709, True), (6, 1): (*bt601, False), (5, 2): (*bt601, True),
             (2, 0): (*bt601, False)}
    for (cs, rng), (kr, kb, full) in cases.items():
        name = f"flat{cs}{rng}.{ext}"
        _flat_yuv_video(tmp_path / name, codec, yuv, cs, rng)
        got = _decode(tmp_path, name)[0, 24, 32].astype(float)
        want = _rgb(yuv, kr, kb, full)
        assert np.abs(got - want).max() <= 2, (cs, rng, got, want)
        others = [_rgb(yuv, *k) for k in [(*bt601, False), (*bt601, True), (*bt709, False), (*bt709, True)]
                  if k != (kr, kb, full)]
        assert all(np.abs(got - o).max() > 4 for o in others)  # the colour tells the cases apart


# ---- pictures ---------------------------------------------------------------------------------------
def test_picture_follows_its_exif_orientation(tmp_path):
    """A photo stored landscape with EXIF orientation 6 ("turn clockwise to view") comes out portrait,
    as viewers and OpenCV show it; without the tag it is read as stored."""
    from PIL import Image

    drawn = _picture(30, 40)
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(drawn).save(tmp_path / "turned.png", exif=exif)
    Image.fromarray(drawn).save(tmp_path / "plain.png")
    rows = [{"id": "t", "image": "turned.png", "captions": ["c"]}, {"id": "p", "image": "plain.png", "captions": ["c"]}]
    (tmp_path / "pics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    turned, plain = read_manifest(tmp_path / "pics.jsonl").items
    assert np.array_equal(read_frames(turned, np.array([0]))[0][0], np.rot90(drawn, -1))
    assert np.array_equal(read_frames(plain, np.array([0]))[0][0], drawn)


# ---- the ffmpeg command line and OpenCV, where installed ----------------------------------------------
def _reference_clips(tmp_path):
    """Clips whose full-size frames must equal ffmpeg's: turns and mirrors at odd and even sizes, an odd
    angle, odd-sized VP8 / VP9 / MPEG-4, 4:2:2 with an odd width, full-range BT.709."""
    clips = {}
    for deg, hf, h in ((-90, False, 48), (-90, False, 47), (90, True, 47), (180, False, 48), (0, True, 48),
                       (30, False, 48)):
        name = f"r{deg}{int(hf)}_{h}.mp4"
        clips[name] = _write(tmp_path / name, [_picture(h, h + 16, t) for t in range(2)], rotation=deg, hflip=hf)
    clips["vp8.webm"] = _write(tmp_path / "vp8.webm", _noise(47, 63), codec="libvpx")
    clips["vp9.webm"] = _write(tmp_path / "vp9.webm", _noise(47, 63), codec="libvpx-vp9")
    clips["m4.mp4"] = _write(tmp_path / "m4.mp4", _noise(47, 64))
    clips["422.webm"] = _write(tmp_path / "422.webm", _noise(48, 63), codec="libvpx-vp9", pix_fmt="yuv422p")
    _flat_yuv_video(tmp_path / "full.mp4", "libx264", (120, 90, 170), 1, 2)
    clips["full.mp4"] = tmp_path / "full.mp4"
    return clips


def test_frames_equal_the_ffmpeg_command_line(tmp_path):
    """`ffmpeg -i CLIP -pix_fmt rgb24 -f rawvideo -`, byte for byte, on every reference clip."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        pytest.skip("the ffmpeg command line is not installed (e.g. apt-get install ffmpeg)")
    for name, path in _reference_clips(tmp_path).items():
        got = _decode(tmp_path, name)
        raw = subprocess.run([ffmpeg, "-v", "error", "-i", str(path), "-pix_fmt", "rgb24", "-f", "rawvideo", "-"],
                             capture_output=True, check=True).stdout
        assert len(raw) == got.size, (name, len(raw), got.shape)
        assert np.array_equal(np.frombuffer(raw, np.uint8).reshape(got.shape), got), name


def test_frames_equal_opencv_where_opencv_follows_ffmpeg(tmp_path):
    """OpenCV turns 90 / 180 / 270 degrees (not mirrors, not other angles) and converts with swscale's
    bicubic default; it honours MPEG-4's left-sited chroma, which ffmpeg's scale filter does not, so
    MPEG-4 at odd heights is left out."""
    cv2 = pytest.importorskip("cv2", reason="OpenCV (opencv-python-headless) is not installed")
    clips = {n: p for n, p in _reference_clips(tmp_path).items()
             if n in ("vp8.webm", "vp9.webm", "422.webm", "full.mp4") or n.startswith(("r-900_48", "r1800_48"))}
    assert len(clips) == 6
    for name, path in clips.items():
        cap = cv2.VideoCapture(str(path))
        frames = []
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            frames.append(frame[..., ::-1])
        cap.release()
        assert np.array_equal(np.stack(frames), _decode(tmp_path, name)), name


def test_one_converter_follows_a_size_change(tmp_path):
    """A converter reused across frames of different sizes or orientations sets itself up again."""
    import av

    conv = FrameConverter(1)
    _write(tmp_path / "a.mp4", [_picture(16, 32)])
    _write(tmp_path / "b.mp4", [_picture(24, 40)], rotation=90)
    a, b = _pyav_frames(tmp_path / "a.mp4")[0], _pyav_frames(tmp_path / "b.mp4")[0]
    assert conv(a).shape == (16, 32, 3) and conv(b).shape == (40, 24, 3) and conv(a).shape == (16, 32, 3)
    assert isinstance(b, av.VideoFrame)
