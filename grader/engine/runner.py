"""Run a hidden suite against a submission, in a fresh trusted process per submission.

The grader process collects the hidden suite once (:mod:`grader.engine.collected`, which
imports it and so the reference); each submission's suite runs in a fork of that process,
which sends its results back over a pipe as the JSON of a :class:`~grader.core.outcome.SuiteResult`.
A test run leaves state behind (fixtures, modules' globals), so no process runs a suite twice.
The student's code runs in children of a clean zygote, never of the grader (see
:mod:`grader.sandbox.zygote`).
"""

from __future__ import annotations

import importlib
import json
import traceback
from collections.abc import Callable

import torch

from grader.core.assignment import Assignment
from grader.core.ingest import Program
from grader.core.outcome import SuiteResult
from grader.engine import warm  # noqa: F401  (imports torch makes lazily, once per grader process)
from grader.engine.collected import CollectedSuite, SuiteError
from grader.engine.forked import Forked
from grader.engine.plugin import StandIns
from grader.sandbox import trusted_bounds
from grader.sandbox.limits import Limits
from grader.sandbox.session import StudentSession
from grader.sandbox.workspace import Workspace
from grader.sandbox.zygote import Zygote, ZygoteUnavailable
from grader.source.flags import program_flags


class SuiteBoundExceeded(SuiteError):
    """The suite process was stopped at its CPU-time bound (see
    :mod:`grader.sandbox.trusted_bounds`): the submission's values made the grader's own work
    too slow. The submission's problem, not the grader's."""


def run_suite(assignment: Assignment, suite: CollectedSuite, program: Program | None, limits: Limits, device: str,
              workspace: Workspace | None) -> SuiteResult:
    """Run the collected hidden suite against ``program`` (None: only list its tests).

    Call this in a process of its own, forked from the one that collected ``suite`` (see
    :class:`ForkedRun`); ``workspace`` holds its connection to the submission's zygote.
    """
    if suite.error is not None:
        raise SuiteError(suite.error)
    unknown = sorted({test.part for test in suite.tests} - set(assignment.parts))
    if unknown:
        raise SuiteError(f"the hidden suite grades parts that assignment.toml does not list: {unknown}")
    if program is None:
        return SuiteResult(tuple(suite.tests))
    session = None
    zygote = None
    try:
        try:
            zygote = Zygote.open(workspace.control, workspace.config)
        except ZygoteUnavailable as exc:
            raise SuiteError(str(exc)) from None
        reference = importlib.import_module(assignment.reference_module) if assignment.reference_module else None
        session = StudentSession(zygote, program, limits, reference)
        session.preload()
        torch.set_num_threads(1)
        budget = trusted_bounds.apply(limits, device)  # from here on, the student's source and values are read
        source_flags = program_flags(program)  # here, not in the grader: in parallel, while the child starts
        tests = suite.run(session, device, _stand_ins(assignment), budget)
        session.close()  # a child's output is collected when it ends
        flags = (*source_flags, *session.flags)
        return SuiteResult(tuple(tests), tuple(session.notes), session.output(), flags)
    finally:
        if session is not None:
            session.close()
        if zygote is not None:
            zygote.stop()


def _stand_ins(assignment: Assignment) -> StandIns | None:
    """The suite's stock parts, for the parts that others use (see :class:`StandIns`)."""
    uses = {part.name: part.uses for part in assignment.contract if part.uses}
    path = assignment.stand_ins
    if not uses or path is None:
        return None
    return StandIns(path.read_text(encoding="utf-8"), uses)


class ForkedRun:
    """``function`` running in a forked process (:class:`~grader.engine.forked.Forked`), its
    result coming back as JSON. Non-blocking: batch grading ``select``s on :meth:`fileno`."""

    def __init__(self, function: Callable[[], SuiteResult], timeout_s: float, limits: Limits,
                 on_close: Callable[[], None] | None = None):
        self._on_close = on_close  # run here once the process has ended: it cannot clean up if killed
        self._limits = limits  # its trusted bounds, if ``function`` applies them (run_suite does)
        self._timeout_s = timeout_s
        self._fork = Forked(lambda: _result_json(function), timeout_s)
        self._closed = False
        self.pid = self._fork.pid
        self.deadline = self._fork.deadline

    def fileno(self) -> int:
        return self._fork.fileno()

    def poll(self) -> bool:
        """Read what is there without blocking; True once the whole result is in."""
        return self._fork.poll()

    def wait(self) -> None:
        """Block until the result is in or the deadline passes."""
        self._fork.wait()

    def result(self) -> SuiteResult:
        """The function's result; raises :class:`SuiteError` if it failed, ran too long or
        sent something else."""
        try:
            data = self._fork.take()
        finally:
            self.close()
        if data is None:
            raise SuiteError(f"grading took longer than {self._timeout_s:g} s in total and was stopped")
        if not data and trusted_bounds.killed_for_cpu(*self._fork.ended, self._limits):
            raise SuiteBoundExceeded(
                f"grading stopped: checking this submission took the grader past its CPU-time bound of "
                f"{self._limits.suite_cpu_s:g} s in all: values your code returned (an index, a size or a shape "
                f"far outside the contract, say) made its checks too slow")
        if not data:
            raise SuiteError("the grading process ended without a result (run with GRADER_DEBUG=1 to see why)")
        try:
            reply = json.loads(data)
            if "error" in reply:
                raise SuiteError(str(reply["error"]))
            return SuiteResult.from_dict(reply["result"])
        except (ValueError, TypeError, KeyError) as exc:  # MalformedResult, JSONDecodeError, a reply not a dict
            raise SuiteError(f"the grading process sent a malformed result: {type(exc).__name__}: {exc}") from None

    def close(self) -> None:
        """Stop the process if it still runs (its zygote and children die with it)."""
        if self._closed:
            return
        self._closed = True
        self._fork.close()
        if self._on_close is not None:
            self._on_close()


def _result_json(function: Callable[[], SuiteResult]) -> bytes:
    """In the suite process: ``function``'s result, or why there is none, as JSON."""
    try:
        result = {"result": function().to_dict()}
    except SuiteError as exc:
        result = {"error": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - the grader's own failure, said in the report
        result = {"error": f"internal grader error: {type(exc).__name__}: {exc}"}
        traceback.print_exc()
    return json.dumps(result).encode()
