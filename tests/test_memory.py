"""vlgap.memory: freed model-sized blocks stay in the process (no page faults when reused), opt-out works."""
import json
import os
import platform
import subprocess
import sys

import pytest

PROBE = r"""
import json, resource, sys
import numpy as np
from vlgap.memory import reuse_freed_memory

raised = reuse_freed_memory()
again = reuse_freed_memory()
faults = []
for _ in range(3):  # a 64 MiB block, written, freed, then asked for again
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a = np.ones(8 << 20)
    del a
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"raised": raised, "again": again, "faults": faults}))
"""

glibc = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                           reason="mallopt thresholds are glibc's")


def _run(env_extra: dict) -> dict:
    env = dict(os.environ, **env_extra)
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@glibc
def test_a_freed_large_block_is_reused_without_page_faults():
    # page faults, not pages: numpy asks for huge pages on large arrays, so one fault may map 2 MiB
    tuned = _run({"VLGAP_MALLOC": ""})
    assert tuned["raised"] is True and tuned["again"] is True
    first = tuned["faults"][0]
    assert first > 16  # the first allocation grows the heap: it is faulted in
    assert max(tuned["faults"][1:]) <= first // 10  # later ones reuse it
    default = _run({"VLGAP_MALLOC": "default"})
    assert default["raised"] is False
    # glibc's own behaviour: each 64 MiB block is a fresh mmap, faulted in again every time
    assert min(default["faults"]) >= default["faults"][0] // 2 > 8
