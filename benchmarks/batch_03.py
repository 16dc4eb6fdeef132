"""Benchmark: batch-grade N generated submissions of assignment 03.

    python benchmarks/batch_03.py [--count 200] [--jobs 2] [--mix course|mistakes] [--floor]

Prints seconds per submission next to the time of `python -c "import torch"` measured
in the same run, on the same machine. The course mix: a quarter each of correct modules,
buggy modules (the example with its sqrt(d_model) mistake), correct notebooks and
untouched stub notebooks. The mistakes mix: the reference with each of 03's named mistakes
in turn (reference/hidden/a03/mutants.py), so a failing test is often run again with the
grader's stock parts. While the batch runs, the driver (the `grade batch` process) is
looked at twice a second: its resident memory and how many reports it has written, so a
class of 1000 shows whether memory stays flat, whether time grows linearly, and how long the
results folder and class report take once the last report is in.

With ``--floor``, the same submissions are graded against a suite of one test that makes one
call into the student's code: what grading costs a submission before any test's own work (its
processes, its sandbox, pytest's run, the report), which no suite can go below.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat
from common import ROOT, import_torch_s, print_growth, run_watched, steady_s_per_report
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


# The floor's suite: one test, one call into the student's code, through 03's own fixtures.
FLOOR_TEST = """import pytest

pytestmark = pytest.mark.part("split_heads")


def test_one_call(student, make_input):
    student.call("split_heads", make_input(2, 5, 12, seed=1), 3)
"""


def floor_checkout(folder: Path) -> Path:
    """A folder to run the grader from whose ``reference`` package (found first, from the
    working directory) is the repository's with 03's hidden suite cut to :data:`FLOOR_TEST`."""
    reference = folder / "reference"
    shutil.copytree(ROOT / "reference", reference, ignore=shutil.ignore_patterns("__pycache__"))
    for test in (reference / "hidden" / "a03").glob("test_*.py"):
        test.unlink()
    (reference / "hidden" / "a03" / "test_floor.py").write_text(FLOOR_TEST)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--mix", choices=("course", "mistakes"), default="course")
    parser.add_argument("--floor", action="store_true", help="grade against a suite of one test and one call")
    args = parser.parse_args()

    import_s = import_torch_s()
    with tempfile.TemporaryDirectory() as tmp:
        folder, out = Path(tmp, "submissions"), Path(tmp, "results")
        make_submissions(folder, args.count, args.mix)
        batch_s, result, samples = run_watched(
            [sys.executable, "-m", "grader.cli", "batch", str(ROOT / "assignments/03"), str(folder), "--out", str(out),
             "--jobs", str(args.jobs), "--device", "cpu"], out / "reports",
            floor_checkout(Path(tmp, "floor")) if args.floor else ROOT)
        if result.returncode != 0:
            sys.exit(f"grade batch failed ({result.returncode}):\n{result.stderr[-3000:]}")
        summary = json.loads(result.stdout)
    per_submission = batch_s / args.count
    print(f"python -c 'import torch':   {import_s:.2f} s (best of 3)")
    suite = "a suite of one test and one call (--floor)" if args.floor else "03's hidden suite"
    print(f"grade batch, {args.count} submissions, {suite}, --jobs {args.jobs}: {batch_s:.1f} s in total "
          f"(includes starting the grader and importing torch once)")
    print(f"seconds per submission:     {per_submission:.3f} s = {per_submission / import_s:.2f} x the torch import")
    steady = steady_s_per_report(samples, args.count)
    if steady is not None:
        print(f"once the grader has started (from the first quarter on): {steady:.3f} s per report = "
              f"{steady / import_s:.2f} x the torch import")
    print(f"statuses: {summary['counts']}, mean score {summary['score']['mean']} / {summary['score']['max_score']}")
    print_growth(samples, args.count)


if __name__ == "__main__":
    main()
