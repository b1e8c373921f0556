"""A video of random colour blocks, for the caption-metric parity tests and their benchmark
(benchmarks/caption_clip.py): content no encoder has seen, in any container PyAV writes."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def write_noise_video(path: Path, codec: str, n_frames: int, rng: np.random.Generator, *,
                      blocks: tuple[int, int] = (30, 40), scale: int = 8) -> Path:
    """`n_frames` frames at 10 fps, each blocks[0] x blocks[1] random colours drawn from `rng`, every block
    scale x scale pixels (so the frame is blocks * scale pixels high and wide), encoded with `codec`."""
    import av

    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=10)
        s.height, s.width, s.pix_fmt = blocks[0] * scale, blocks[1] * scale, "yuv420p"
        for _ in range(n_frames):
            img = np.repeat(np.repeat(rng.integers(0, 256, (*blocks, 3), dtype=np.uint8), scale, 0), scale, 1)
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path
