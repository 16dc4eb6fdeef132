"""From per-test results to per-part scores and the hints a student sees per part.

A part's hints are its distinct named mistakes, the one that cost the most points first: a
one-point names mismatch does not hide an inverted mask that fails seven. When a part fails
and a part it uses fails its own tests, the headline says to fix that one first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from grader.core import hints
from grader.core.report import Outcome, PartResult, TestResult

# When every failing test of a part says the same of these, it is the part's hint.
_WHOLE_PART_HINTS = (hints.NOT_FOUND, hints.NOT_IMPLEMENTED)
MAX_HINTS = 2  # the report schema's bound: a headline and one more


def score_parts(part_ids: tuple[str, ...], tests: list[tuple[str, TestResult]],
                uses: Mapping[str, Sequence[str]] | None = None) -> list[PartResult]:
    """Group ``(part id, result)`` pairs into parts, in contract order, with scores and hints.
    ``uses``: for a part, the parts it calls whose mistakes its tests see (the contract's)."""
    parts = []
    for part_id in part_ids:
        results = [result for part, result in tests if part == part_id]
        parts.append(PartResult(
            id=part_id,
            score=sum(result.score for result in results),
            max_score=sum(result.max_score for result in results),
            hint=None,
            tests=results,
            hints=part_hints(results),
        ))
    failing = {part.id for part in parts if part.score < part.max_score}
    for part in parts:
        culprits = [used for used in (uses or {}).get(part.id, ()) if used in failing]
        if part.id in failing and culprits and _may_be_caused_by(part.hints, culprits):
            part.hints = [fix_first(culprits), *part.hints][:MAX_HINTS]
        part.hint = part.hints[0] if part.hints else None
    return parts


def part_hints(results: list[TestResult]) -> list[str]:
    """The distinct hints of the failing tests: the mistakes a check named (outcome "failed")
    before what an exception suggests (outcome "error"), each kind costliest first (the points
    of the failed tests that carry each hint); "not implemented" last; then test order.

    A named mistake is evidence (the output matched what that mistake computes); an exception's
    hint is a guess from the error message, and the crash is often the same mistake showing on
    another input (a pe stored with a batch dimension fails to broadcast), so a guess never
    headlines over a named mistake."""
    failing = [result for result in results if result.outcome != Outcome.PASSED]
    for whole in _WHOLE_PART_HINTS:
        if failing and all(result.hint == whole for result in failing):
            return [whole]
    lost: dict[str, float] = {}
    rank: dict[str, int] = {}
    for result in failing:
        if result.hint:
            lost[result.hint] = lost.get(result.hint, 0.0) + result.max_score - result.score
            kind = 0 if result.outcome == Outcome.FAILED else 1  # named by a check anywhere: named
            rank[result.hint] = min(rank.get(result.hint, kind), kind)
    order = sorted(lost, key=lambda hint: (hint in _WHOLE_PART_HINTS, rank[hint], -lost[hint]))
    return order[:MAX_HINTS]


def fix_first(parts: Sequence[str]) -> str:
    if len(parts) == 1:
        return f"fix {parts[0]} first (it fails its own tests)"
    return f"fix {', '.join(parts)} first (they fail their own tests)"


def _may_be_caused_by(own_hints: list[str], culprits: Sequence[str]) -> bool:
    """Whether a part's failure may come from the failing parts it uses: not when its own stub
    is what fails, nor when its headline already names one of them as hints name the
    student's pieces ("uses your split_heads, which is still a stub")."""
    headline = own_hints[0] if own_hints else ""
    return headline not in _WHOLE_PART_HINTS and not any(re.search(rf"\byour {re.escape(name)}\b", headline)
                                                         for name in culprits)
