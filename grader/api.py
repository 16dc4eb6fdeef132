"""The grader as a library: ``grade(assignment, submission) -> GradeReport``.

The CLI, batch grading and remote workers all call :func:`grade`; its signature holds
the defaults. Where a submission is loaded: :mod:`grader.ingest`; where it runs:
:mod:`grader.sandbox`; where it is scored: :mod:`grader.runner` and :mod:`grader.scoring`;
where the report is written: :meth:`grader.report.GradeReport.write_json`.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import torch

from grader import scoring
from grader.assignment import REFERENCE_DIR, Assignment
from grader.flags import bounded
from grader.ingest import Program, Ungradable, parse_submission, read_submission, submission_sha256
from grader.report import Flag, GradeReport, Outcome, Status, TestResult
from grader.runner import ForkedRun, SuiteError, preload_suite, run_suite
from grader.sandbox.isolation import Isolation, choose
from grader.sandbox.limits import Limits
from grader.sandbox.workspace import Workspace
from grader.sandbox.zygote import ZygoteUnavailable

DEFAULT_TOTAL_TIMEOUT_S = 900.0
NO_RESULT = {"tests": [], "notes": [], "output": "", "flags": []}  # a suite run that produced nothing


def grader_version() -> str:
    try:
        return metadata.version("transformer-grader")
    except metadata.PackageNotFoundError:
        return "unknown"


def resolve_device(device: str) -> str:
    """``auto`` means CUDA when available. Checked via NVML, so forks stay CUDA-clean."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for, but CUDA is not available here")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}: use auto, cpu or cuda")
    return device


def grade(
    assignment: Assignment | str | Path,
    submission: str | Path | None = None,
    *,
    device: str = "auto",
    limits: Limits = Limits(),
    sandbox: str = "basic",
    total_timeout_s: float = DEFAULT_TOTAL_TIMEOUT_S,
) -> GradeReport:
    """Grade one submission (default: the student's working copy in the assignment).

    Call it from a process that has not run multi-threaded torch ops (the grader forks
    from it, and GNU OpenMP is not fork-safe: the child would hang on its first parallel
    op), such as the ``grade`` command.
    """
    pending = start_grading(assignment, submission, device=device, limits=limits, sandbox=sandbox,
                            total_timeout_s=total_timeout_s)
    pending.wait()
    return pending.finish()


@dataclass(eq=False)  # identity: pending grades are dict keys in batch grading
class PendingGrade:
    """A submission being graded in a forked process; ``select`` on it, then :meth:`finish`."""

    assignment: Assignment
    submission: str
    sha256: str
    status: str
    error: str | None
    device: str
    sandbox: list[str]
    started: float
    run: ForkedRun

    def fileno(self) -> int:
        return self.run.fileno()

    def poll(self) -> bool:
        return self.run.poll()

    def wait(self) -> None:
        self.run.wait()

    @property
    def deadline(self) -> float:
        return self.run.deadline

    def finish(self) -> GradeReport:
        status, error = self.status, self.error
        try:
            result = self.run.result()
        except SuiteError as exc:
            status, error = Status.GRADER_ERROR, str(exc)
            result = NO_RESULT
        report = build_report(self.assignment, self.submission, status, error, result, self.device,
                              time.monotonic() - self.started, self.sandbox)
        report.submission_sha256 = self.sha256
        return report

    def cancel(self) -> None:
        self.run.close()


def start_grading(
    assignment: Assignment | str | Path,
    submission: str | Path | None = None,
    *,
    device: str = "auto",
    limits: Limits = Limits(),
    sandbox: str = "basic",
    total_timeout_s: float = DEFAULT_TOTAL_TIMEOUT_S,
) -> PendingGrade:
    """Load the submission and start its hidden suite in a forked process; returns at once."""
    started = time.monotonic()
    if not isinstance(assignment, Assignment):
        assignment = Assignment.load(assignment)
    path = Path(submission) if submission is not None else assignment.working_copy()
    device = resolve_device(device)
    isolation = choose(sandbox, REFERENCE_DIR)  # probed here, so that every fork inherits the answers
    for module in assignment.preload:  # once per grader process; every fork starts with it
        importlib.import_module(module)
    preload_suite(assignment.hidden_suite)

    error = None
    program: Program | None = None
    sha256 = ""
    try:
        data = read_submission(path)
        sha256 = submission_sha256(data)  # of the very bytes graded
        program = parse_submission(path.name, data)
    except Ungradable as exc:
        error = str(exc)
    layers = isolation.layers() if program else []
    run = _start_suite(assignment, program, limits, device, isolation, total_timeout_s)
    return PendingGrade(assignment, str(submission if submission is not None else path), sha256,
                        Status.GRADED if program else Status.UNGRADABLE, error, device, layers, started, run)


def _start_suite(assignment: Assignment, program: Program | None, limits: Limits, device: str, isolation: Isolation,
                 total_timeout_s: float) -> ForkedRun:
    """Fork the suite process, with the submission's workspace (see :mod:`grader.sandbox.workspace`)."""
    if program is None:  # ungradable: the suite is only collected, to list every part
        return ForkedRun(lambda: run_suite(assignment, None, limits, device, isolation, None), total_timeout_s)
    try:
        workspace = Workspace.open(isolation, limits, assignment.preload)
    except (OSError, ZygoteUnavailable) as exc:
        message = f"the student's sandbox could not be set up: {exc}"
        return ForkedRun(lambda: _fail(message), total_timeout_s)
    try:
        run = ForkedRun(lambda: run_suite(assignment, program, limits, device, isolation, workspace),
                        total_timeout_s, on_close=workspace.release)
    except BaseException:
        workspace.release()
        raise
    workspace.detach()
    return run


def _fail(message: str) -> dict:
    raise SuiteError(message)


def failed_report(assignment: Assignment, submission: str, device: str, error: str) -> GradeReport:
    """The report for a submission the grader could not run at all."""
    return build_report(assignment, submission, Status.GRADER_ERROR, error, NO_RESULT, device, 0.0, [])


def build_report(
    assignment: Assignment, submission: str, status: str, error: str | None, result: dict, device: str,
    duration_s: float, sandbox: list[str],
) -> GradeReport:
    tests = []
    for test in result["tests"]:
        if test.get("outcome") == Outcome.SKIPPED:
            continue
        outcome = test.get("outcome") or Outcome.ERROR
        passed = outcome == Outcome.PASSED
        message = test.get("message") or ("" if passed else f"not run: {error}" if error else "not run")
        tests.append((test["part"], TestResult(
            name=test["name"], outcome=outcome, message=message, hint=test.get("hint"),
            score=float(test["points"]) if passed else 0.0, max_score=float(test["points"]),
        )))
    parts = scoring.score_parts(assignment.parts, tests)
    internal = [test for test in result["tests"] if test.get("internal")]
    if internal and status == Status.GRADED:
        # The scores stand for the other tests, but the report must be regraded.
        status, error = Status.GRADER_ERROR, f"{len(internal)} test(s) failed inside the grader: {internal[0]['message']}"
    if status != Status.GRADED:
        for part in parts:
            part.hint = error
    return GradeReport(
        assignment=assignment.id,
        submission=submission,
        status=status,
        error=error,
        score=sum(part.score for part in parts),
        max_score=sum(part.max_score for part in parts),
        device=device,
        duration_s=round(duration_s, 3),
        grader_version=grader_version(),
        parts=parts,
        notes=list(result["notes"]),
        output=result["output"],
        sandbox=sandbox if status == Status.GRADED else [],
        # Read from the source by the suite process, and by the suite's source checks; never
        # taken from the student's process.
        flags=bounded([*(Flag(**flag) for flag in result.get("flags", ())),
                       *(Flag(**flag) for test in result["tests"] for flag in test.get("flags", ()))]),
    )
