"""A CPU model job keeps the memory it frees (gna.jobs.script_job.keep_freed_memory): the next step's
tensors of the same sizes reuse it instead of faulting fresh pages in from the kernel."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

STEPS = """\
import resource, sys
import torch
from gna.jobs.script_job import keep_freed_memory

if sys.argv[1] == "keep":
    keep_freed_memory()
def step():  # temporaries of several sizes, freed each time, as a training step's (glibc's own
    for n in (1, 8, 48):  # reuse stops at 32 MB: larger blocks always come from the kernel)
        torch.ones(n << 18).sum()


for _ in range(3):  # warm up: the first allocations fault in whatever the process keeps
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_tensors_are_reused_not_faulted_in_again():
    def faults(mode):
        out = subprocess.run([sys.executable, "-c", STEPS, mode], capture_output=True, text=True, check=True,
                             env={"PYTHONPATH": str(ROOT / "workflow"), "OMP_NUM_THREADS": "1"})
        return int(out.stdout.split()[-1])

    default, kept = faults("default"), faults("keep")
    assert default > 20 * 10_000   # glibc's default: the 48 MB block is mapped afresh, 12,288 pages a step
    assert kept < default / 10
