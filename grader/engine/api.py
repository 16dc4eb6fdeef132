"""The grader as a library: ``grade(assignment, submission) -> GradeReport``.

The CLI, batch grading and remote workers all call :func:`grade`; its options default in
:mod:`grader.engine.options`. Where a submission is loaded: :mod:`grader.core.ingest`; where it runs:
:mod:`grader.sandbox`; where its tests are judged: :mod:`grader.engine.runner`; where the report is
put together: :mod:`grader.core.assemble`, and written: :meth:`grader.core.report.GradeReport.write_json`.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from grader.core.assemble import assemble_report
from grader.core.assignment import Assignment, reference_dir
from grader.core.fingerprint import Fingerprint
from grader.core.ingest import Program, Ungradable, parse_submission, read_submission, submission_sha256
from grader.core.outcome import SuiteResult
from grader.core.report import GradeReport, Status
from grader.engine.collected import SuiteError, collected_suite
from grader.engine.options import DEFAULT, GradeOptions, OptionError
from grader.engine.runner import ForkedRun, SuiteBoundExceeded, run_suite
from grader.sandbox.isolation import Isolation, choose
from grader.sandbox.limits import Limits
from grader.sandbox.workspace import Workspace
from grader.sandbox.zygote import ZygoteUnavailable


def resolve_device(device: str) -> str:
    """``auto`` means CUDA when available. Checked via NVML, so forks stay CUDA-clean."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise OptionError("device", "CUDA was asked for, but it is not available here")
    return device


def grade(
    assignment: Assignment | str | Path,
    submission: str | Path | None = None,
    *,
    device: str = DEFAULT.device,
    limits: Limits = DEFAULT.limits,
    sandbox: str = DEFAULT.sandbox,
    total_timeout_s: float = DEFAULT.total_timeout_s,
) -> GradeReport:
    """Grade one submission (default: the student's working copy in the assignment); the
    options are :class:`~grader.engine.options.GradeOptions`' fields.

    Call it from a process that has not run multi-threaded torch ops (the grader forks
    from it, and GNU OpenMP is not fork-safe: the child would hang on its first parallel
    op), such as the ``grade`` command.
    """
    pending = start_grading(assignment, submission, GradeOptions(device=device, sandbox=sandbox, limits=limits,
                                                                  total_timeout_s=total_timeout_s))
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
    fingerprint: Fingerprint

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
        except SuiteBoundExceeded as exc:  # the submission's values, not the grader, made it stop
            status, error, result = Status.UNGRADABLE, str(exc), SuiteResult()
        except SuiteError as exc:
            status, error, result = Status.GRADER_ERROR, str(exc), SuiteResult()
        return assemble_report(self.assignment, self.submission, result, status=status, error=error,
                               device=self.device, duration_s=time.monotonic() - self.started,
                               sandbox=self.sandbox, submission_sha256=self.sha256,
                               fingerprint=self.fingerprint.to_dict())

    def cancel(self) -> None:
        self.run.close()


def start_grading(assignment: Assignment | str | Path, submission: str | Path | None,
                  options: GradeOptions, settled: Fingerprint | None = None,
                  private: Sequence[Path] | None = None) -> PendingGrade:
    """Load the submission and start its hidden suite in a forked process; returns at once.
    ``settled``: :meth:`Fingerprint.of` the assignment and ``options``, where a batch has it.
    ``private``: folders the student's process must not see, besides the reference (a class's
    submissions and results); by default the submission's own folder, which may hold others'."""
    started = time.monotonic()
    if not isinstance(assignment, Assignment):
        assignment = Assignment.load(assignment)
    path = Path(submission) if submission is not None else assignment.working_copy()
    device = resolve_device(options.device)
    reference = reference_dir()
    isolation = choose(options.sandbox, reference)  # probed here, so that every fork inherits the answers
    for module in assignment.suite_preload:  # once per grader process; every suite process starts with it
        importlib.import_module(module)

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
    fingerprint = replace(settled or Fingerprint.of(assignment, options), submission=sha256)
    # The checkout that holds the reference too: its .git and tests hold the suite's text.
    checkout = [reference.parent] if (reference.parent / "pyproject.toml").is_file() else []
    hidden = (reference, *checkout, *(private if private is not None else (path.resolve().parent,)))
    run = _start_suite(assignment, program, options.limits, device, isolation, options.total_timeout_s,
                       tuple(str(Path(folder).resolve()) for folder in hidden))  # the child's cwd is its scratch
    return PendingGrade(assignment, str(submission if submission is not None else path), sha256,
                        Status.GRADED if program else Status.UNGRADABLE, error, device, layers, started, run,
                        fingerprint)


def _start_suite(assignment: Assignment, program: Program | None, limits: Limits, device: str, isolation: Isolation,
                 total_timeout_s: float, hidden: tuple[str, ...]) -> ForkedRun:
    """Fork the suite process, with the submission's workspace (see :mod:`grader.sandbox.workspace`)."""
    try:
        suite = collected_suite(assignment.hidden_suite, assignment.parts)  # once per grader process
    except Exception as exc:  # noqa: BLE001 - a suite pytest cannot even configure: every report says why
        message = f"the hidden suite in {assignment.hidden_suite.name} could not be loaded: {type(exc).__name__}: {exc}"
        return ForkedRun(lambda: _fail(message), total_timeout_s, limits)
    if program is None:  # ungradable: the suite's tests list every part
        return ForkedRun(lambda: run_suite(assignment, suite, None, limits, device, None),
                         total_timeout_s, limits)
    try:
        workspace = Workspace.open(isolation, limits, assignment.preload, device, hidden)
    except (OSError, ZygoteUnavailable) as exc:
        message = f"the student's sandbox could not be set up: {exc}"
        return ForkedRun(lambda: _fail(message), total_timeout_s, limits)
    try:
        run = ForkedRun(lambda: run_suite(assignment, suite, program, limits, device, workspace),
                        total_timeout_s, limits, on_close=workspace.release)
    except BaseException:
        workspace.release()
        raise
    workspace.detach()
    return run


def _fail(message: str) -> SuiteResult:
    raise SuiteError(message)
