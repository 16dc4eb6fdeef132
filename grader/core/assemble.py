"""From a suite run's :class:`~grader.core.outcome.SuiteResult` to the :class:`~grader.core.report.GradeReport`.

The one place a report is put together: the grader (:mod:`grader.engine.api`) and the student's
grader (:mod:`grader.student.grade`) both call :func:`assemble_report`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib import metadata

from grader.core import scoring
from grader.core.assignment import Assignment
from grader.core.outcome import SuiteResult, TestOutcome, Verdict
from grader.core.report import GradeReport, Outcome, Status, TestResult, bounded
from grader.core.sanitize import clean

# A test's message and hint are written by the trusted suite, but quote what the student's code
# chose (parameter names, exception text): bounded here, where every report is put together.
# A message holds at most an exception's text and traceback (grader.sandbox.errors) and some words.
TEST_MESSAGE_CHARS, TEST_HINT_CHARS = 8000, 1000
_CELL_NOTE = re.compile(r"cell (\d+)\b")  # how notes name a notebook's cell (grader.core.ingest)


def grader_version() -> str:
    try:
        return metadata.version("transformer-grader")
    except metadata.PackageNotFoundError:
        return "unknown"


def assemble_report(
    assignment: Assignment, submission: str, result: SuiteResult, *, status: str, error: str | None, device: str,
    duration_s: float, sandbox: list[str], submission_sha256: str = "", fingerprint: dict[str, str] | None = None,
) -> GradeReport:
    """The report of ``result``: skipped tests left out, a test that did not run scored 0 and
    saying why, parts in contract order (then any part only the tests name). ``fingerprint``:
    what decided the grade (:class:`grader.core.fingerprint.Fingerprint`), where the grader knows it."""
    tests = [(test.part, _test_result(test, error)) for test in result.tests
             if test.verdict is None or test.verdict.outcome != Outcome.SKIPPED]
    part_ids = tuple(dict.fromkeys([*assignment.parts, *(part for part, _ in tests)]))
    parts = scoring.score_parts(part_ids, tests, {part.name: part.uses for part in assignment.contract},
                                assignment.rubric, {part.name for part in assignment.contract if part.signature is None})
    internal = [test.verdict for test in result.tests if test.verdict is not None and test.verdict.internal]
    if internal and status == Status.GRADED:
        # The scores stand for the other tests, but the report must be regraded.
        status, error = Status.GRADER_ERROR, f"{len(internal)} test(s) failed inside the grader: {internal[0].message}"
    if status != Status.GRADED:
        for part in parts:
            part.hint, part.hints = error, [error] if error else []
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
        notes=in_cell_order(result.notes),
        output=result.output,
        sandbox=sandbox if status == Status.GRADED else [],
        submission_sha256=submission_sha256,
        fingerprint=fingerprint or {},
        # Read from the source by the suite process, and by the suite's source checks; never
        # taken from the student's process.
        flags=bounded([*result.flags, *(flag for test in result.tests if test.verdict for flag in test.verdict.flags)]),
    )


def in_cell_order(notes: Iterable[str]) -> list[str]:
    """The notes as the notebook shows its cells (a skipped cell is noted when the notebook is
    read, a raising one when it runs). A note on no cell stays after the cells noted before it:
    "loading your code stopped", "... and 30 more notes"."""
    keys, last = [], 0
    for note in notes:
        number = _CELL_NOTE.match(note)
        last = max(last, int(number[1])) if number else last
        keys.append((int(number[1]) if number else last, note))
    return [note for _, note in sorted(keys, key=lambda key: key[0])]


def failed_report(assignment: Assignment, submission: str, device: str, error: str) -> GradeReport:
    """The report for a submission the grader could not run at all."""
    return assemble_report(assignment, submission, SuiteResult(), status=Status.GRADER_ERROR, error=error,
                           device=device, duration_s=0.0, sandbox=[])


def _test_result(test: TestOutcome, error: str | None) -> TestResult:
    verdict = test.verdict or Verdict(Outcome.ERROR)  # collected, never run
    passed = verdict.outcome == Outcome.PASSED
    message = verdict.message or ("" if passed else f"not run: {error}" if error else "not run")
    hint = None if verdict.hint is None else clean(verdict.hint, TEST_HINT_CHARS)
    mistake = None if passed or verdict.mistake is None else clean(verdict.mistake, TEST_HINT_CHARS)
    return TestResult(name=test.name, outcome=verdict.outcome, message=clean(message, TEST_MESSAGE_CHARS), hint=hint,
                      score=test.points if passed else 0.0, max_score=test.points, mistake=mistake,
                      passes_with_stock=None if passed else verdict.passes_with_stock)
