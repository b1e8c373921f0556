"""Subprocess entry for the kill-and-resume test: extract with a slow toy encoder."""
import sys

from toy_encoders import ToyVision

from vlgap.features import extract as extract_mod
from vlgap.features.extract import extract

extract_mod.CHUNK_FRAMES = 16  # 2 items per chunk: many resume points

manifest, cache, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
res = extract(manifest, "toy", n_frames=[1, 3, 8], cache_dir=cache, loaded_encoder=ToyVision(delay=delay),
              progress=False, batch_size=4)
print("DONE", res.n)
