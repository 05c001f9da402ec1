"""The worker process's side (worker_process.py): it ends with its parent."""

import os
import signal
import subprocess
import sys
import time

import pytest

from test_worker import _running


ABANDONED = """
import sys
import newrllama4 as nl
model = nl.Model(sys.argv[1])
fast = nl.Context(model, n_ctx=256, n_seq_max=2, batch_invariant=False)
print(fast.worker_pid, flush=True)
fast.generate_parallel(["hello how are you"] * 4000, max_tokens=200)  # minutes of work
"""


def test_a_worker_whose_parent_is_killed_mid_call_ends_too(tiny_model_path):
    parent = subprocess.Popen([sys.executable, "-c", ABANDONED, tiny_model_path], stdout=subprocess.PIPE, text=True)
    worker = int(parent.stdout.readline())
    time.sleep(1)  # mid-call
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _running(worker):
        time.sleep(0.2)
    if _running(worker):
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the worker went on with its call after its parent was killed")
