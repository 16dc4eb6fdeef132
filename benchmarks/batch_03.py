"""Benchmark: batch-grade N generated submissions of assignment 03.

    python benchmarks/batch_03.py [--count 200] [--jobs 2]

Prints seconds per submission next to the time of `python -c "import torch"` measured
in the same run, on the same machine. The mix: a quarter each of correct modules,
buggy modules (the example with its sqrt(d_model) mistake), correct notebooks and
untouched stub notebooks.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import nbformat
from common import ROOT, import_torch_s, timed
from nbformat.v4 import new_code_cell, new_notebook

from reference import as_submission


def make_submissions(folder: Path, count: int) -> None:
    correct = as_submission("multihead")
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()

    import_s = import_torch_s()
    with tempfile.TemporaryDirectory() as tmp:
        folder, out = Path(tmp, "submissions"), Path(tmp, "results")
        make_submissions(folder, args.count)
        batch_s, result = timed([sys.executable, "-m", "grader.cli", "batch", "assignments/03", str(folder),
                                 "--out", str(out), "--jobs", str(args.jobs), "--device", "cpu"])
        if result.returncode != 0:
            sys.exit(f"grade batch failed ({result.returncode}):\n{result.stderr[-3000:]}")
        summary = json.loads(result.stdout)
    per_submission = batch_s / args.count
    print(f"python -c 'import torch':   {import_s:.2f} s (best of 3)")
    print(f"grade batch, {args.count} submissions, --jobs {args.jobs}: {batch_s:.1f} s in total "
          f"(includes starting the grader and importing torch once)")
    print(f"seconds per submission:     {per_submission:.3f} s = {per_submission / import_s:.2f} x the torch import")
    print(f"statuses: {summary['counts']}, mean score {summary['score']['mean']} / {summary['score']['max_score']}")


if __name__ == "__main__":
    main()
