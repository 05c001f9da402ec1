"""The benchmarks run under `make bench`, never in CI: each must at least import and build
its command line here, so that a rename across the engine cannot break one unseen (one
did: a sweep that renamed `choices=` to `labels=` reached an argparse call)."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).parents[1] / "benchmarks").glob("*.py"))


def test_every_benchmark_is_found():
    assert len(BENCHMARKS) >= 8


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda path: path.name)
def test_a_benchmark_imports_and_builds_its_command_line(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:")
