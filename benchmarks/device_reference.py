"""Benchmark: the reference of every assignment graded on a device, and a student child's start.

    python benchmarks/device_reference.py [--device cuda] [--copies 4] [--jobs 2] [--starts 10]
                                          [--compare cpu] [--json FILE]

For each assignment, ``grade batch`` grades ``--copies`` copies of the reference (each made
distinct by a comment) on ``--device``; it prints seconds per submission, the scores (the
reference must get full marks: a shortfall is printed with the failing tests' messages) and
the grading time the reports give. A second table times one student process's start on the
device: a fork of the submission's zygote, the sandbox layers, the program loaded and, on
CUDA, the process's own CUDA context, which a fork cannot inherit. ``--compare cpu`` grades
the same on the CPU in the same run, so the two sets of figures come from one machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, import_torch_s, timed

from grader.core.assignment import Assignment
from grader.core.ingest import Cell, Program
from grader.engine.options import DEFAULT
from grader.sandbox.child_process import ChildProcess
from grader.sandbox.isolation import choose
from grader.sandbox.limits import Limits
from grader.sandbox.workspace import Workspace
from grader.sandbox.zygote import Zygote
from reference import PACKAGE_DIR, as_submission

ASSIGNMENTS = ("01", "02", "03", "04", "05", "06", "07")
# A program that does what each child does first, on the device: make a tensor there.
PROBE = "import torch\nx = torch.ones(4, device={device!r}) + 1\n"


def grade_references(assignment_id: str, device: str, copies: int, jobs: int) -> dict:
    """Grade ``copies`` copies of the reference; what the batch and its reports say."""
    assignment = Assignment.load(ROOT / "assignments" / assignment_id)
    source = as_submission(assignment.reference_module.removeprefix("reference."))
    with tempfile.TemporaryDirectory() as tmp:
        folder, out = Path(tmp, "submissions"), Path(tmp, "results")
        for index in range(copies):
            student = folder / f"student{index:02d}"
            student.mkdir(parents=True)
            (student / assignment.module).write_text(f"# copy {index}\n{source}")
        seconds, result = timed([sys.executable, "-m", "grader.cli", "batch", str(assignment.directory), str(folder),
                                 "--out", str(out), "--jobs", str(jobs), "--device", device])
        if result.returncode not in (0, 1):
            return {"assignment": assignment_id, "error": result.stderr[-2000:] or result.stdout[-2000:]}
        reports = [json.loads(path.read_text()) for path in sorted(out.glob("reports/*.json"))]
    shortfalls = [_shortfall(report) for report in reports if report.get("score") != report.get("max_score")]
    return {
        "assignment": assignment_id,
        "device": sorted({report.get("device") for report in reports}),
        "batch_s": seconds,
        "per_submission_s": seconds / copies,
        "grading_s": statistics.median(report.get("duration_s", 0.0) for report in reports) if reports else None,
        "scores": sorted({f"{report.get('score')}/{report.get('max_score')}" for report in reports}),
        "shortfalls": shortfalls[:1],
    }


def _shortfall(report: dict) -> dict:
    """Where a report of the reference lost points: the failing tests and their messages."""
    failing = [{"test": test.get("name"), "message": str(test.get("message", ""))[:600]}
               for part in report.get("parts", []) for test in part.get("tests", [])
               if test.get("outcome") not in ("passed", None)]
    return {"status": report.get("status"), "error": str(report.get("error", ""))[:1000], "failing": failing[:8]}


def child_starts(device: str, starts: int) -> dict:
    """Seconds for a student process to start on ``device`` and answer: ``starts`` times, each
    a fresh child of the same submission zygote, with the default sandbox layers."""
    layers = choose(DEFAULT.sandbox, PACKAGE_DIR)
    limits = Limits()
    workspace = Workspace.open(layers, limits, (), device, (str(PACKAGE_DIR),))
    zygote = Zygote.open(workspace.control, workspace.config)
    program = Program("module", (Cell(PROBE.format(device=device), "probe.py"),))
    seconds = []
    try:
        for _ in range(starts):
            child = ChildProcess(zygote, program, limits)
            started = time.perf_counter()
            child.start()
            seconds.append(time.perf_counter() - started)
            child.close()
    finally:
        zygote.stop()
        workspace.release()
    return {"device": device, "starts": starts, "median_s": statistics.median(seconds), "min_s": min(seconds),
            "max_s": max(seconds), "layers": str(layers)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--compare", action="append", default=[], help="another device to measure in the same run")
    parser.add_argument("--assignments", nargs="*", default=ASSIGNMENTS)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    figures: dict = {"import_torch_s": import_torch_s(), "grading": [], "child_starts": []}
    print(f"python -c 'import torch': {figures['import_torch_s']:.2f} s (best of 3)", flush=True)
    for device in (args.device, *args.compare):
        figures["child_starts"].append(child_starts(device, args.starts))
        start = figures["child_starts"][-1]
        print(f"child start on {device}: median {start['median_s']:.3f} s (min {start['min_s']:.3f}, "
              f"max {start['max_s']:.3f}, {args.starts} starts; {start['layers']})", flush=True)
    print(f"\n{'assignment':<11}{'device':<8}{'per submission':>15}{'grading':>9}  scores", flush=True)
    for assignment_id in args.assignments:
        for device in (args.device, *args.compare):
            row = dict(grade_references(assignment_id, device, args.copies, args.jobs), asked=device)
            figures["grading"].append(row)
            if "error" in row:
                print(f"{assignment_id:<11}{device:<8} grade batch failed: {row['error']}", flush=True)
                continue
            print(f"{assignment_id:<11}{device:<8}{row['per_submission_s']:>14.2f}s{row['grading_s']:>8.2f}s  "
                  f"{', '.join(row['scores'])} (reports say {', '.join(map(str, row['device']))})", flush=True)
            for shortfall in row["shortfalls"]:
                print(json.dumps(shortfall, indent=1)[:3000], flush=True)
    print(f"\n{args.copies} copies of each reference, grade batch --jobs {args.jobs}; 'per submission' is the "
          "batch's wall clock over the copies, grader start and torch import included; 'grading' the "
          "median duration_s of the reports.")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
