"""What the benchmarks share: timing a command, and the yardstick they print beside their
figures, the time of ``python -c "import torch"`` on the same machine in the same run."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(command: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    """Run ``command`` in the repository's root; its wall-clock seconds and its result."""
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    return time.perf_counter() - started, result


def import_torch_s(runs: int = 3) -> float:
    """The best of ``runs`` timings of ``python -c "import torch"``."""
    return min(timed([sys.executable, "-c", "import torch"])[0] for _ in range(runs))
