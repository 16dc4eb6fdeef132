"""The wire format's benchmark runs, and prints a figure for each kind of message."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_protocol_benchmark_prints_each_message_kind():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "protocol_message.py"), "--repeat", "20"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: [float(n) for n in line.split()[1:]] for line in result.stdout.splitlines()
            if re.match(r"(request|reply)\s", line)}
    assert set(rows) == {"request", "reply"}
    for figures in rows.values():
        assert len(figures) == 6 and all(figure > 0 for figure in (figures[0], figures[4], figures[5]))
