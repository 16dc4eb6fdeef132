"""The benchmarks that time one piece of a grading run, and print a figure for each thing they time."""

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def run_benchmark(script: str, *args: str) -> str:
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_protocol_benchmark_prints_each_message_kind():
    stdout = run_benchmark("protocol_message.py", "--repeat", "20")
    rows = {line.split()[0]: [float(n) for n in line.split()[1:]] for line in stdout.splitlines()
            if re.match(r"(request|reply)\s", line)}
    assert set(rows) == {"request", "reply"}
    for figures in rows.values():
        assert len(figures) == 6 and all(figure > 0 for figure in (figures[0], figures[4], figures[5]))


@pytest.mark.slow
def test_child_start_benchmark_prints_the_cpu_of_a_session():
    stdout = run_benchmark("child_start.py", "--sessions", "3")
    machine = re.search(r"machine CPU per session: ([\d.]+) ms; wall per session: ([\d.]+) ms", stdout)
    assert machine and float(machine[1]) > 0 and float(machine[2]) > 0, stdout
    cgroup = re.search(r"cgroup, CPU per session: median ([\d.]+) ms \(quartiles ([\d.]+)-([\d.]+)\)", stdout)
    assert cgroup or "none here" in stdout, stdout
    if cgroup:
        low, median, high = float(cgroup[2]), float(cgroup[1]), float(cgroup[3])
        assert 0 < low <= median <= high, stdout
