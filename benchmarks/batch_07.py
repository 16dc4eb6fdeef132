"""Benchmark: batch-grade N copies of 07's reference, against its bare training.

    python benchmarks/batch_07.py [--count 20] [--jobs 2] [--mix reference|mistakes]

07's end_to_end trains the student's GPT for 100 AdamW steps in the student's process: the
floor of grading it. This prints seconds per submission of `grade batch` next to that
training alone (the stock loop, on the reference's GPT, one CPU thread, in a warm process),
measured in the same run, and their ratio, then the seconds per report in each quarter of the
batch: the first quarter's include starting the grader. The mistakes mix grades the reference with each of
07's named mistakes in turn (reference/hidden/a07/mutants.py) instead: a class whose failing
tests run again with the grader's stock parts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from common import print_growth, run_watched, steady_s_per_report, timed

from reference import as_submission
from reference.hidden.a07.mutants import MUTANTS

# The end_to_end test's own model, corpus and loop: imported, so this measures what it runs.
BARE_TRAINING = """
import time, torch
from reference.gpt import GPT
from reference.hidden.a07 import helpers
from reference.hidden.a07.test_end_to_end import (BATCH, CHARS, CONTEXT, CORPUS, D_MODEL, HEADS, LAYERS, LR, SEED,
                                                  STEPS, encode)
torch.set_num_threads(1)
times = []
for _ in range(3):
    torch.manual_seed(SEED)
    model = GPT(len(CHARS), D_MODEL, HEADS, LAYERS, CONTEXT)
    data = encode(CORPUS, "cpu")
    started = time.perf_counter()
    helpers.train(model, data, STEPS, BATCH, CONTEXT, LR, SEED)
    times.append(time.perf_counter() - started)
print(min(times))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--mix", choices=("reference", "mistakes"), default="reference")
    args = parser.parse_args()

    _, result = timed([sys.executable, "-c", BARE_TRAINING])
    if result.returncode != 0:
        sys.exit(f"the bare training failed:\n{result.stderr[-3000:]}")
    training_s = float(result.stdout.split()[-1])
    reference = as_submission("gpt")
    sources = ([reference.replace(old, new) for (old, new), _ in MUTANTS.values()] if args.mix == "mistakes"
               else [reference])
    with tempfile.TemporaryDirectory() as tmp:
        folder, out = Path(tmp, "submissions"), Path(tmp, "results")
        for index in range(args.count):
            student = folder / f"student{index:04d}"
            student.mkdir(parents=True)
            (student / "gpt.py").write_text(f"# student {index}\n{sources[index % len(sources)]}")
        batch_s, result, samples = run_watched([sys.executable, "-m", "grader.cli", "batch", "assignments/07",
                                                str(folder), "--out", str(out), "--jobs", str(args.jobs),
                                                "--device", "cpu"], out / "reports")
        if result.returncode != 0:
            sys.exit(f"grade batch failed ({result.returncode}):\n{result.stderr[-3000:]}")
        reports = [json.loads(path.read_text()) for path in out.glob("reports/*.json")]
    per_submission = batch_s / args.count
    grading = statistics.median(report["duration_s"] for report in reports)
    scores = sorted({f"{report['score']}/{report['max_score']}" for report in reports})
    print(f"bare training (100 AdamW steps of the reference's GPT, 1 thread, best of 3): {training_s:.3f} s")
    print(f"grade batch, {args.count} submissions ({args.mix}), --jobs {args.jobs}: {batch_s:.1f} s in total")
    print(f"seconds per submission: {per_submission:.2f} s = {per_submission / training_s:.1f} x the bare training "
          f"({per_submission * args.jobs / training_s:.1f} x per job); one grading (median duration_s): "
          f"{grading:.2f} s = {grading / training_s:.1f} x")
    steady = steady_s_per_report(samples, args.count)
    if steady is not None:
        print(f"once the grader has started (from the first quarter on): {steady:.2f} s per report = "
              f"{steady / training_s:.1f} x the bare training")
    print(f"scores: {', '.join(scores)}")
    print_growth(samples, args.count)


if __name__ == "__main__":
    main()
