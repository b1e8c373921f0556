"""Subprocess entry for the killed-driver test: a Ray extraction joining the test session's cluster."""
import sys

import ray

from vlgap.features import chunk_steps
from vlgap.features import extract as extract_mod

chunk_steps.CHUNK_FRAMES = 6  # 2 items per chunk at n_f = 3: several resume points

manifest, cache, address = sys.argv[1], sys.argv[2], sys.argv[3]
ray.init(address=address, logging_level="WARNING")
res = extract_mod.extract(manifest, "mobilenet_v2", n_frames=[1, 3], image_size=64, cache_dir=cache, threads=1,
                          progress=False, ray="auto", ray_workers=1)
print("DONE", res.chunks_computed, res.chunks_total)
