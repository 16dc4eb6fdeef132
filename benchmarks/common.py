"""What the benchmarks share: timing a command, and the yardstick they print beside their
figures, the time of ``python -c "import torch"`` on the same machine in the same run."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# This checkout's grader, not whichever one the environment installed (an editable install of
# another worktree, say): a benchmark compared across two checkouts measures each one.
sys.path.insert(0, str(ROOT))


def timed(command: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    """Run ``command`` in the repository's root; its wall-clock seconds and its result."""
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    return time.perf_counter() - started, result


def import_torch_s(runs: int = 3) -> float:
    """The best of ``runs`` timings of ``python -c "import torch"``."""
    return min(timed([sys.executable, "-c", "import torch"])[0] for _ in range(runs))


def resident_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def run_watched(command: list[str], reports: Path,
                cwd: Path = ROOT) -> tuple[float, subprocess.CompletedProcess, list[tuple]]:
    """Run the batch in ``cwd``; its wall time, its result, and (seconds, reports written,
    driver MiB) twice a second."""
    samples = []
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, text=True, cwd=cwd)
        while process.poll() is None:
            written = sum(1 for _ in reports.glob("*.json")) if reports.is_dir() else 0
            samples.append((time.perf_counter() - started, written, resident_mib(process.pid)))
            time.sleep(0.5)
        elapsed = time.perf_counter() - started
        # The last reports may land after the last look: one more, now that it has ended.
        samples.append((elapsed, sum(1 for _ in reports.glob("*.json")) if reports.is_dir() else 0, None))
        stdout.seek(0)
        stderr.seek(0)
        result = subprocess.CompletedProcess(command, process.returncode, stdout.read(), stderr.read())
    return elapsed, result, samples


def _first_look_with(samples: list[tuple], reports: float) -> tuple:
    """The first sample that saw at least ``reports`` reports written."""
    return next(sample for sample in samples if sample[1] >= reports)


def steady_s_per_report(samples: list[tuple], count: int) -> float | None:
    """Seconds per report from the first quarter of the class to the last report: the batch
    once the grader has started (its imports, the suite's collection, the first forks)."""
    if not samples or samples[-1][1] < count:
        return None
    first, last = _first_look_with(samples, 0.25 * count), _first_look_with(samples, count)
    if last[1] <= first[1]:  # a class so small that one look saw its first quarter and its end
        return None
    return (last[0] - first[0]) / (last[1] - first[1])


def print_growth(samples: list[tuple], count: int) -> None:
    """Time and the driver's memory at each quarter of the class, and after the last report."""
    def at(fraction: float) -> tuple:
        return _first_look_with(samples, fraction * count)

    if not samples or samples[-1][1] < count:
        return
    print("reports written   seconds   s per report since the last row   driver memory")
    previous = None
    for fraction in (0.25, 0.5, 0.75, 1.0):
        seconds, written, mib = at(fraction)
        rate = "" if previous is None else f"{(seconds - previous[0]) / max(written - previous[1], 1):.3f}"
        memory = f"{mib:.0f} MiB" if mib else "(it had ended)"
        print(f"{written:>15}   {seconds:>7.1f}   {rate:>32}   {memory:>13}")
        previous = (seconds, written)
    last = at(1.0)
    print(f"after the last report: {samples[-1][0] - last[0] + 0.5:.1f} s at most to write the results folder, "
          f"the class report and exit; peak driver memory {max(s[2] or 0 for s in samples):.0f} MiB")
