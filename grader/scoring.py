"""From per-test results to per-part scores and the one hint a student sees per part."""

from __future__ import annotations

from grader import hints
from grader.report import Outcome, PartResult, TestResult

# When every failing test of a part says the same of these, it is the part's hint.
_WHOLE_PART_HINTS = (hints.NOT_FOUND, hints.NOT_IMPLEMENTED)


def score_parts(part_ids: tuple[str, ...], tests: list[tuple[str, TestResult]]) -> list[PartResult]:
    """Group ``(part id, result)`` pairs into parts, in contract order, with scores and hints."""
    parts = []
    for part_id in part_ids:
        results = [result for part, result in tests if part == part_id]
        parts.append(PartResult(
            id=part_id,
            score=sum(result.score for result in results),
            max_score=sum(result.max_score for result in results),
            hint=part_hint(results),
            tests=results,
        ))
    return parts


def part_hint(results: list[TestResult]) -> str | None:
    failing = [result for result in results if result.outcome != Outcome.PASSED]
    if not failing:
        return None
    for whole in _WHOLE_PART_HINTS:
        if all(result.hint == whole for result in failing):
            return whole
    # A mistake a check named (outcome "failed") beats what an exception suggests
    # (outcome "error"), which beats "not implemented"; within each, the first in test order.
    for preferred in (
        lambda r: r.outcome == Outcome.FAILED and r.hint not in _WHOLE_PART_HINTS,
        lambda r: r.hint not in _WHOLE_PART_HINTS,
        lambda r: True,
    ):
        hint = next((r.hint for r in failing if r.hint and preferred(r)), None)
        if hint:
            return hint
    return None
