"""Benchmark: batch-grade N generated submissions of assignment 03.

    python benchmarks/batch_03.py [--count 200] [--jobs 2] [--mix course|mistakes]

Prints seconds per submission next to the time of `python -c "import torch"` measured
in the same run, on the same machine. The course mix: a quarter each of correct modules,
buggy modules (the example with its sqrt(d_model) mistake), correct notebooks and
untouched stub notebooks. The mistakes mix: the reference with each of 03's named mistakes
in turn (reference/hidden/a03/mutants.py), so a failing test is often run again with the
grader's stock parts. While the batch runs, the driver (the `grade batch` process) is
looked at twice a second: its resident memory and how many reports it has written, so a
class of 1000 shows whether memory stays flat, whether time grows linearly, and how long the
results folder and class report take once the last report is in.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from common import ROOT, import_torch_s
from nbformat.v4 import new_code_cell, new_notebook

from reference import as_submission
from reference.hidden.a03.mutants import MUTANTS


def make_submissions(folder: Path, count: int, mix: str = "course") -> None:
    correct = as_submission("multihead")
    if mix == "mistakes":
        kinds = [("py", correct.replace(old, new)) for (old, new), _ in MUTANTS.values()]
    else:
        kinds = [
            ("py", correct),
            ("py", (ROOT / "examples/03/submission.py").read_text()),
            ("ipynb", nbformat.writes(new_notebook(cells=[new_code_cell(correct)]))),
            ("ipynb", (ROOT / "assignments/03/mha.ipynb").read_text()),
        ]
    for index in range(count):
        suffix, text = kinds[index % len(kinds)]
        student = folder / f"student{index:04d}"
        student.mkdir(parents=True)
        # A comment makes every file distinct, as real submissions are.
        if suffix == "py":
            text = f"# student {index}\n{text}"
        (student / f"mha.{suffix}").write_text(text)


def resident_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def run_watched(command: list[str], reports: Path) -> tuple[float, subprocess.CompletedProcess, list[tuple]]:
    """Run the batch; its wall time, its result, and (seconds, reports written, driver MiB)
    twice a second."""
    samples = []
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, text=True, cwd=ROOT)
        while process.poll() is None:
            written = sum(1 for _ in reports.glob("*.json")) if reports.is_dir() else 0
            samples.append((time.perf_counter() - started, written, resident_mib(process.pid)))
            time.sleep(0.5)
        elapsed = time.perf_counter() - started
        stdout.seek(0)
        stderr.seek(0)
        result = subprocess.CompletedProcess(command, process.returncode, stdout.read(), stderr.read())
    return elapsed, result, samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--mix", choices=("course", "mistakes"), default="course")
    args = parser.parse_args()

    import_s = import_torch_s()
    with tempfile.TemporaryDirectory() as tmp:
        folder, out = Path(tmp, "submissions"), Path(tmp, "results")
        make_submissions(folder, args.count, args.mix)
        batch_s, result, samples = run_watched(
            [sys.executable, "-m", "grader.cli", "batch", "assignments/03", str(folder), "--out", str(out),
             "--jobs", str(args.jobs), "--device", "cpu"], out / "reports")
        if result.returncode != 0:
            sys.exit(f"grade batch failed ({result.returncode}):\n{result.stderr[-3000:]}")
        summary = json.loads(result.stdout)
    per_submission = batch_s / args.count
    print(f"python -c 'import torch':   {import_s:.2f} s (best of 3)")
    print(f"grade batch, {args.count} submissions, --jobs {args.jobs}: {batch_s:.1f} s in total "
          f"(includes starting the grader and importing torch once)")
    print(f"seconds per submission:     {per_submission:.3f} s = {per_submission / import_s:.2f} x the torch import")
    print(f"statuses: {summary['counts']}, mean score {summary['score']['mean']} / {summary['score']['max_score']}")
    print_growth(samples, args.count)


def print_growth(samples: list[tuple], count: int) -> None:
    """Time and the driver's memory at each quarter of the class, and after the last report."""
    def at(fraction: float) -> tuple:
        return next(sample for sample in samples if sample[1] >= fraction * count)

    if not samples or samples[-1][1] < count:
        return
    print("reports written   seconds   s per report since the last row   driver memory")
    previous = None
    for fraction in (0.25, 0.5, 0.75, 1.0):
        seconds, written, mib = at(fraction)
        rate = "" if previous is None else f"{(seconds - previous[0]) / max(written - previous[1], 1):.3f}"
        print(f"{written:>15}   {seconds:>7.1f}   {rate:>32}   {mib or 0:>9.0f} MiB")
        previous = (seconds, written)
    last = at(1.0)
    print(f"after the last report: {samples[-1][0] - last[0] + 0.5:.1f} s at most to write the results folder, "
          f"the class report and exit; peak driver memory {max(s[2] or 0 for s in samples):.0f} MiB")


if __name__ == "__main__":
    main()
