"""Subprocess entry for the kill-and-resume tests: extract with a toy encoder.

argv: manifest cache delay [pause]. `pause` says where the run stops, prints "PAUSED ..." and blocks
until killed, so a test kills it at a known point without polling or timing:

- P (an integer > 0): right after its P-th chunk file is written;
- "features-temp": while writing features.safetensors, its temporary file full size on disk;
- "unsealed": features.safetensors renamed into place, its seal not yet written;
- "chunks-left": the entry sealed, its chunk files not yet removed.
"""
import sys

from toy_encoders import ToyVision

from vlgap import reuse
from vlgap.features import chunk_steps
from vlgap.features import store as store_mod
from vlgap.features.extract import extract

chunk_steps.CHUNK_FRAMES = 16  # 2 items per chunk: many resume points

manifest, cache, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
pause = sys.argv[4] if len(sys.argv) > 4 else "0"


def pause_here(what):
    print("PAUSED", what, flush=True)
    sys.stdin.read()  # blocks until the test kills this process (stdin stays open)


if pause.isdigit() and int(pause):
    written = 0
    write_chunk = store_mod.Entry.write_chunk

    def write_then_maybe_pause(self, *args, **kwargs):
        global written
        write_chunk(self, *args, **kwargs)
        written += 1
        if written == int(pause):
            pause_here(written)

    store_mod.Entry.write_chunk = write_then_maybe_pause
elif pause == "features-temp":
    from vlgap.io_utils import _open_temp_beside

    atomic_write_bytes = reuse.atomic_write_bytes

    def write_temp_then_pause(path, data):
        if path.name == "features.safetensors":
            fd, tmp = _open_temp_beside(path)
            with open(fd, "wb") as f:
                f.write(data)
            pause_here("features-temp")
        atomic_write_bytes(path, data)

    reuse.atomic_write_bytes = write_temp_then_pause
elif pause == "unsealed":
    seal_file = reuse.seal_file

    def pause_before_seal(path, *args, **kwargs):
        if path.name == "features.safetensors":
            pause_here("unsealed")
        seal_file(path, *args, **kwargs)

    reuse.seal_file = pause_before_seal
elif pause == "chunks-left":
    remove_chunks = store_mod.Entry.remove_chunks

    def pause_before_removing(self):
        if self.features_path.exists():
            pause_here("chunks-left")
        return remove_chunks(self)

    store_mod.Entry.remove_chunks = pause_before_removing

res = extract(manifest, "toy", n_frames=[1, 3, 8], cache_dir=cache, loaded_encoder=ToyVision(delay=delay),
              progress=False, batch_size=4, allow_repeated_frames=True)
print("DONE", res.n)
