"""Subprocess entry for the kill-and-resume test: extract with a toy encoder.

argv: manifest cache delay [pause_after]. With pause_after = P > 0 the run stops right after its
P-th chunk file is written, prints "PAUSED P" and blocks until killed, so the test kills it at a
known point without polling or timing."""
import sys

from toy_encoders import ToyVision

from vlgap.features import chunk_steps
from vlgap.features import store as store_mod
from vlgap.features.extract import extract

chunk_steps.CHUNK_FRAMES = 16  # 2 items per chunk: many resume points

manifest, cache, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
pause_after = int(sys.argv[4]) if len(sys.argv) > 4 else 0
if pause_after:
    written = 0
    write_chunk = store_mod.Entry.write_chunk

    def write_then_maybe_pause(self, *args, **kwargs):
        global written
        write_chunk(self, *args, **kwargs)
        written += 1
        if written == pause_after:
            print("PAUSED", written, flush=True)
            sys.stdin.read()  # blocks until the test kills this process (stdin stays open)

    store_mod.Entry.write_chunk = write_then_maybe_pause

res = extract(manifest, "toy", n_frames=[1, 3, 8], cache_dir=cache, loaded_encoder=ToyVision(delay=delay),
              progress=False, batch_size=4, allow_repeated_frames=True)
print("DONE", res.n)
