"""CLIPScore / RefCLIPScore and EMScore: vlgap (official conventions, the defaults) vs the ported official
procedure (tests/helpers/official_caption_ports.py: jmhessel/clipscore's batches of 64 pictures and
256 captions; ShiYaya/emscore's EMScorer.score, every frame, batches of 64), wall time in the same
process, same random-weight CLIP (no CLIP weights ship offline; a ViT-B/32-shaped tower by default,
fewer layers) and the same inputs. Numbers are checked equal (1e-4) before the times are reported.
Both sides include loading the model, reading the pictures and decoding the videos.

    python benchmarks/caption_clip.py [--pictures 256] [--videos 16] [--frames 30] [--width 256] [--layers 4]

Prints seconds per side and the ratio official / vlgap (>= 1: vlgap at least as fast).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
import official_caption_ports as port  # noqa: E402

WORDS = "a the dog cat man woman red blue car street grass plate food horse beach sky night runs sits on with".split()


def _captions(rng, n):
    return [" ".join(rng.choice(WORDS, rng.integers(3, 12))) for _ in range(n)]


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pictures", type=int, default=256)
    ap.add_argument("--videos", type=int, default=16)
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--image-size", type=int, default=224)
    args = ap.parse_args()

    import av
    import torch
    from PIL import Image

    import vlgap
    from vlgap.captions.clip_model import write_random_clip

    torch.set_grad_enabled(False)
    rng = np.random.default_rng(0)
    tmp = Path(tempfile.mkdtemp(prefix="vlgap-caption-clip-"))
    folder = write_random_clip(tmp / "clip", image_size=args.image_size, patch_size=32, width=args.width,
                               layers=args.layers, aligned=True)
    pics = tmp / "pictures"
    pics.mkdir()
    paths = []
    for i in range(args.pictures):
        h, w = int(rng.integers(200, 480)), int(rng.integers(200, 640))
        img = Image.fromarray(rng.integers(0, 256, (h // 8, w // 8, 3), dtype=np.uint8)).resize((w, h))
        paths.append(pics / f"{i}.jpg")
        img.save(paths[-1], quality=90)
    cands = _captions(rng, args.pictures)
    refs = [_captions(rng, 5) for _ in range(args.pictures)]

    print(f"CLIP: width {args.width}, {args.layers} layers, {args.image_size} px / 32; {args.pictures} pictures x 5 refs; "
          f"{args.videos} videos x {args.frames} frames; torch threads {torch.get_num_threads()}")
    t_port, (per, ref) = _timed(lambda: port.clipscore_main(folder, paths, cands, refs))
    t_ours, res = _timed(lambda: vlgap.caption_eval(
        {str(i): c for i, c in enumerate(cands)}, {str(i): r for i, r in enumerate(refs)}, "clipscore,refclipscore",
        images=pics, clip=f"hf:{folder}", per_item=True))
    rows = {r["id"]: r for r in res["per_item"]}
    ids = [str(i) for i in range(args.pictures)]
    np.testing.assert_allclose([rows[i]["CLIPScore"] for i in ids], per, atol=1e-4)
    np.testing.assert_allclose([rows[i]["RefCLIPScore"] for i in ids], ref, atol=1e-4)
    print(f"CLIPScore + RefCLIPScore: official port {t_port:.2f} s, vlgap {t_ours:.2f} s, ratio {t_port / t_ours:.2f}")

    lines, frames = [], []
    for v in range(args.videos):
        path = tmp / f"v{v}.mp4"
        with av.open(str(path), "w") as c:
            s = c.add_stream("mpeg4", rate=10)
            s.width, s.height, s.pix_fmt = 320, 240, "yuv420p"
            for _ in range(args.frames):
                img = np.repeat(np.repeat(rng.integers(0, 256, (30, 40, 3), dtype=np.uint8), 8, 0), 8, 1)
                for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                    c.mux(p)
            for p in s.encode():
                c.mux(p)
        lines.append({"id": f"v{v}", "video": path.name, "captions": _captions(rng, 2)})
    manifest = tmp / "videos.jsonl"
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    vcands = _captions(rng, args.videos)

    def official():
        decoded = []
        for x in lines:  # encode_video decodes every frame (OpenCV there, PyAV here)
            with av.open(str(tmp / x["video"])) as c:
                decoded.append([Image.fromarray(f.to_ndarray(format="rgb24")) for f in c.decode(video=0)])
        return port.emscore_score(folder, vcands, [x["captions"] for x in lines], decoded)

    t_port, (vid, both) = _timed(official)
    t_ours, res = _timed(lambda: vlgap.caption_eval(
        {x["id"]: c for x, c in zip(lines, vcands)}, None, "emscore", videos=manifest, clip=f"hf:{folder}",
        per_item=True, frame_cache=False))
    np.testing.assert_allclose([r["EMScore"] for r in res["per_item"]], vid, atol=1e-4)
    np.testing.assert_allclose([r["EMScore-Ref"] for r in res["per_item"]], both, atol=1e-4)
    print(f"EMScore + EMScore-Ref: official port {t_port:.2f} s, vlgap {t_ours:.2f} s, ratio {t_port / t_ours:.2f}")


if __name__ == "__main__":
    main()
