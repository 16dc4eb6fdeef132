"""The child-start benchmark runs, and prints the CPU a session costs."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_child_start_benchmark_prints_the_cpu_of_a_session():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "child_start.py"), "--sessions", "3"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    machine = re.search(r"machine CPU per session: ([\d.]+) ms; wall per session: ([\d.]+) ms", result.stdout)
    assert machine and float(machine[1]) > 0 and float(machine[2]) > 0, result.stdout
    cgroup = re.search(r"cgroup, CPU per session: median ([\d.]+) ms \(quartiles ([\d.]+)-([\d.]+)\)", result.stdout)
    assert cgroup or "none here" in result.stdout, result.stdout
    if cgroup:
        low, median, high = float(cgroup[2]), float(cgroup[1]), float(cgroup[3])
        assert 0 < low <= median <= high, result.stdout
