"""CLIPScore / RefCLIPScore and EMScore: vlgap (official conventions, the defaults) against the official-style
baseline in the same process: the faithful ports of jmhessel/clipscore (batches of 64 pictures, 256
captions padded to the context) and ShiYaya/emscore (EMScorer.score: every frame, batches of 64, the idf
dict) in tests/helpers/official_caption_ports.py, which load their model on every call as the official
scripts do. Same random-weight CLIP (no CLIP weights ship offline; a ViT-B/32-shaped tower by default,
fewer layers and narrower; a BPE vocabulary learnt from the captions' words), same inputs: JPEG pictures of many sizes, videos in mp4, mkv and webm. Per-item
numbers are checked equal (1e-5) before any time is reported. Both sides include loading the model,
reading the pictures and decoding the videos.

Each side runs twice: the first call in the process (cold: vlgap loads its model, the baseline its own)
and a second, warm call (vlgap keeps the loaded model: captions.clip_model.load_clip(reuse=True); the
baseline loads again, as each official run does). Wall and CPU seconds (this process, all threads) per
side and phase; ratios baseline / vlgap (>= 1: vlgap at least as fast). A shared machine inflates wall
times: the load average and the CPU are printed with the figures.

    python benchmarks/caption_clip.py [--pictures 256] [--videos 16] [--frames 30] [--width 256] [--layers 4]
                                      [--threads N]

On a machine whose cores other jobs share, two torch threads wait on each other (OpenMP spins while its
partner is descheduled): --threads 1 gives both sides the steadier figures there.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
import official_caption_ports as port  # noqa: E402
from noise_video import write_noise_video  # noqa: E402
from tiny_clip import learn_merges  # noqa: E402

WORDS = "a the dog cat man woman red blue car street grass plate food horse beach sky night runs sits on with".split()
CONTAINERS = (("mp4", "mpeg4"), ("mkv", "mpeg4"), ("webm", "libvpx"))


def _captions(rng, n):
    return [" ".join(rng.choice(WORDS, rng.integers(3, 12))) for _ in range(n)]


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return (time.perf_counter() - wall, time.process_time() - cpu), out


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load() -> str:
    try:
        return "/".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _report(name: str, runs: dict[str, tuple[tuple[float, float], tuple[float, float]]]) -> None:
    for phase, ((pw, pc), (vw, vc)) in runs.items():
        print(f"{name}, {phase}: official-style {pw:.2f} s wall / {pc:.2f} s CPU, vlgap {vw:.2f} s wall / "
              f"{vc:.2f} s CPU; ratio {pw / vw:.2f} wall, {pc / vc:.2f} CPU")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pictures", type=int, default=256)
    ap.add_argument("--videos", type=int, default=16)
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default, one per core)")
    args = ap.parse_args()

    import av
    import torch
    import transformers  # noqa: F401  (imported before either clock, for both sides)
    from PIL import Image

    import vlgap
    import vlgap.captions.embedding_eval  # noqa: F401
    import vlgap.captions.emscore_eval  # noqa: F401
    from vlgap.captions.clip_model import write_random_clip

    torch.set_grad_enabled(False)
    if args.threads:
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    tmp = Path(tempfile.mkdtemp(prefix="vlgap-caption-clip-"))
    # merges learnt from the captions' words: about a token per word, as CLIP's vocabulary gives English
    merges = learn_merges(["A photo depicts " + " ".join(WORDS)] * 4 + _captions(rng, 200), 400)
    folder = write_random_clip(tmp / "clip", image_size=args.image_size, patch_size=32, width=args.width,
                               layers=args.layers, aligned=True, merges=merges)
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
    containers = [(s, c) for s, c in CONTAINERS if c in av.codecs_available]
    lines = []
    for v in range(args.videos):
        suffix, codec = containers[v % len(containers)]
        write_noise_video(tmp / f"v{v}.{suffix}", codec, args.frames, rng)
        lines.append({"id": f"v{v}", "video": f"v{v}.{suffix}", "captions": _captions(rng, 2)})
    manifest = tmp / "videos.jsonl"
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    vcands = _captions(rng, args.videos)

    print(f"CPU: {_cpu_model()}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()}; load before "
          f"{_load()}; vlgap {vlgap.__version__}")
    print(f"CLIP: width {args.width}, {args.layers} layers, {args.image_size} px / 32; {args.pictures} pictures x 5 "
          f"refs; {args.videos} videos ({', '.join(s for s, _ in containers)}) x {args.frames} frames")

    ids = [str(i) for i in range(args.pictures)]

    def official_clip():
        return port.clipscore_main(folder, paths, cands, refs)

    def vlgap_clip():
        return vlgap.caption_eval(dict(zip(ids, cands)), dict(zip(ids, refs)), "clipscore,refclipscore",
                                  images=pics, clip=f"hf:{folder}", per_item=True)

    def official_em():
        decoded = []
        for x in lines:  # encode_video decodes every frame (OpenCV there, PyAV here)
            with av.open(str(tmp / x["video"])) as c:
                decoded.append([Image.fromarray(f.to_ndarray(format="rgb24")) for f in c.decode(video=0)])
        return port.emscore_score(folder, vcands, [x["captions"] for x in lines], decoded)

    def vlgap_em(cache=None):
        return vlgap.caption_eval({x["id"]: c for x, c in zip(lines, vcands)}, None, "emscore", videos=manifest,
                                  clip=f"hf:{folder}", per_item=True, frame_cache=cache is not None,
                                  cache_dir=cache)

    clip_runs, em_runs = {}, {}
    for phase in ("cold (first call)", "warm (second call)"):
        t_port, (per, ref) = _timed(official_clip)
        t_ours, res = _timed(vlgap_clip)
        rows = {r["id"]: r for r in res["per_item"]}
        np.testing.assert_allclose([rows[i]["CLIPScore"] for i in ids], per, atol=1e-5, rtol=0)
        np.testing.assert_allclose([rows[i]["RefCLIPScore"] for i in ids], ref, atol=1e-5, rtol=0)
        clip_runs[phase] = (t_port, t_ours)
        t_port, (vid, both) = _timed(official_em)
        t_ours, res = _timed(vlgap_em)
        np.testing.assert_allclose([r["EMScore"] for r in res["per_item"]], vid, atol=1e-5, rtol=0)
        np.testing.assert_allclose([r["EMScore-Ref"] for r in res["per_item"]], both, atol=1e-5, rtol=0)
        em_runs[phase] = (t_port, t_ours)
    _report("CLIPScore + RefCLIPScore", clip_runs)
    _report("EMScore + EMScore-Ref", em_runs)
    total = {phase: tuple(tuple(a + b for a, b in zip(clip_runs[phase][side], em_runs[phase][side]))
                          for side in (0, 1)) for phase in clip_runs}
    _report("all four scores", total)
    cache = tmp / "cache"
    vlgap_em(cache)  # fills vlgap's frame-embedding cache (official code has none)
    t_cached, _ = _timed(lambda: vlgap_em(cache))
    print(f"EMScore + EMScore-Ref, vlgap with its frame cache filled: {t_cached[0]:.2f} s wall / {t_cached[1]:.2f} s "
          f"CPU (official-style warm {em_runs['warm (second call)'][0][0]:.2f} s wall)")
    print(f"load after {_load()}")


if __name__ == "__main__":
    main()
