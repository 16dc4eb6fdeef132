"""From per-test results to per-part scores and the hints a student sees per part.

A part's score is the points of the tests it passed, unless the rubric gives more: each
named mistake the contract prices whose value a failing check matched (the evidence,
``TestResult.mistake``) costs its deduction once, however many tests show it (and no more
than they lose), and each failing test that no priced mistake explains costs its points. So a
one-token bug that breaks most of a part's tests costs what the contract says, and a second,
unrelated slip costs what its own tests do, not the rubric's whole benefit.

A mistake costs points once, in the part where it is made: a failing test that passed once the
grader's stock parts stood in for the failing parts this part uses (``passes_with_stock``)
failed through those parts, which pay for it in their own tests; this part keeps its points
(``ScoredBy.charged_to`` says where they went). Not where a used part is not written (a stub,
or not found), which has nothing of its own to pay with: a layer whose inline feed-forward
stands for a FeedForward never written pays for it. Nor in a part with nothing to write (an
end-to-end run of the student's train_step), which is the used parts' work in use.

A part's hints are its distinct named mistakes, the one that cost the most points first: a
one-point names mismatch does not hide an inverted mask that fails seven. When a part fails
and a part it uses fails its own tests, that part is named as the cause ("fix X first") only
where the evidence says so: every failing test passed once the grader's stock parts stood in
for the parts it uses (``TestResult.passes_with_stock``). Otherwise the part's own mistake
leads, and the used part that fails comes second ("X also fails its own tests"). X is where the
mistake is made: a used part that fails only through the parts it uses in turn (a GPT whose
Blocks fail only through a Head that raises) passes the blame on to them, in the hint and in
``ScoredBy.charged_to``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from grader.core import hints
from grader.core.report import Outcome, PartResult, Rule, ScoredBy, TestResult

# When every failing test of a part says the same of these, it is the part's hint.
_WHOLE_PART_HINTS = (hints.NOT_FOUND, hints.NOT_DEFINED_WHEN_LOADED, hints.NOT_IMPLEMENTED)
MAX_HINTS = 2  # the report schema's bound: a headline and one more


def score_parts(part_ids: tuple[str, ...], tests: list[tuple[str, TestResult]],
                uses: Mapping[str, Sequence[str]] | None = None,
                deductions: Mapping[str, float] | None = None,
                nothing_to_write: Collection[str] = ()) -> list[PartResult]:
    """Group ``(part id, result)`` pairs into parts, in contract order, with scores and hints.
    ``uses``: for a part, the parts it calls whose mistakes its tests see (the contract's).
    ``deductions``: the rubric, the contract's words for a mistake -> the points it costs
    (none: the tests alone score every part). ``nothing_to_write``: parts with no code of their
    own (no stub), graded through the parts they use: their tests are those parts' work in use,
    so they count however those parts fail."""
    parts = []
    results_of: dict[str, list[TestResult]] = {}
    for part, result in tests:
        results_of.setdefault(part, []).append(result)
    failing = {part for part, result in tests if result.outcome != Outcome.PASSED}
    unwritten = {part for part in failing if _unwritten(results_of[part])}
    failing_used = {part_id: [used for used in (uses or {}).get(part_id, ()) if used in failing] for part_id in part_ids}
    for part_id in part_ids:
        results = results_of.get(part_id, [])
        culprits = failing_used[part_id]
        charges = culprits and part_id not in nothing_to_write and not unwritten & set(culprits)
        elsewhere = [result for result in results if charges and _fails_through_used_parts(result)]
        max_score = sum(result.max_score for result in results)
        tests_score = sum(result.score for result in results)
        own_score = tests_score + sum(result.max_score - result.score for result in elsewhere)
        charged_elsewhere = {id(result) for result in elsewhere}
        scored_by = by_rubric([result for result in results if id(result) not in charged_elsewhere], max_score,
                              own_score, deductions or {})
        if scored_by or elsewhere:  # what the tests alone gave, and where the rest is charged
            causes = _causes(culprits, failing_used, results_of) if elsewhere else []
            scored_by = replace(scored_by or ScoredBy(), tests_score=tests_score, charged_to=causes)
        parts.append(PartResult(
            id=part_id,
            score=own_score if scored_by is None or scored_by.rule == Rule.TESTS else rubric_score(max_score, scored_by),
            max_score=max_score,
            hint=None,
            tests=results,
            hints=part_hints(results),
            scored_by=scored_by or ScoredBy(),
        ))
    for part in parts:
        culprits = _causes(failing_used[part.id], failing_used, results_of)
        if part.id in failing and culprits and _may_be_caused_by(part.hints, culprits):
            passed_on = [used for used in failing_used[part.id] if used not in culprits]
            part.hints = _hints_with_culprits(part, culprits, passed_on)
        part.hint = part.hints[0] if part.hints else None
    return parts


def by_rubric(results: list[TestResult], max_score: float, score: float,
              deductions: Mapping[str, float]) -> ScoredBy | None:
    """How the rubric scores a part whose tests are ``results`` (those charged elsewhere left
    out), or None when the tests decide (``score``: what they give): each priced mistake that a
    failing check matched costs its deduction once (no more than its tests lose), and each
    failing test that no priced mistake explains costs its points. None where no failing check
    matched a priced mistake, or where that takes as much as the tests do."""
    lost_to: dict[str, float] = {}
    unexplained = 0.0
    for result in results:
        if result.outcome == Outcome.PASSED:
            continue
        lost = result.max_score - result.score
        if result.mistake in deductions:
            lost_to[result.mistake] = lost_to.get(result.mistake, 0.0) + lost
        else:
            unexplained += lost
    taken = {mistake: min(deductions[mistake], lost) for mistake, lost in lost_to.items()}
    if not taken or max_score - sum(taken.values()) - unexplained <= score:
        return None
    return ScoredBy(Rule.RUBRIC, taken, unexplained)


def rubric_score(max_score: float, scored_by: ScoredBy) -> float:
    return max_score - sum(scored_by.deductions.values()) - scored_by.unexplained


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


def also_fails(parts: Sequence[str]) -> str:
    if len(parts) == 1:
        return f"{parts[0]} also fails its own tests"
    return f"{', '.join(parts)} also fail their own tests"


def wrong_by_itself(part: str, parts: Sequence[str]) -> str:
    """The headline of a part whose failing tests fail with stock parts too, and name nothing."""
    return f"{part} is wrong by itself: its tests fail with correct {', '.join(parts)} too"


def _causes(used: Sequence[str], failing_used: Mapping[str, Sequence[str]],
            results_of: Mapping[str, list[TestResult]]) -> list[str]:
    """Where the mistakes are made that the failing parts ``used`` pass on: each of them that
    fails by itself, and for one that fails only through the parts it uses in turn (every
    failing test of it passed with stock parts), those parts' causes."""
    causes: list[str] = []
    pending, seen = list(used), set()
    while pending:
        part = pending.pop(0)
        if part in seen:
            continue
        seen.add(part)
        failures = [result for result in results_of.get(part, []) if result.outcome != Outcome.PASSED]
        if failing_used.get(part) and all(_fails_through_used_parts(result) for result in failures):
            pending = [*failing_used[part], *pending]
        else:
            causes.append(part)
    return causes


def _hints_with_culprits(part: PartResult, culprits: Sequence[str], passed_on: Sequence[str] = ()) -> list[str]:
    """``part``'s hints where parts it uses fail: "fix X first" leads only when every failing
    test passed with the stock parts standing in; else its own mistake (from the tests that fail
    with them too) leads, and "X also fails" follows. ``passed_on``: used parts that fail only
    through ``culprits``, which a hint naming them as the one to fix first would wrongly blame."""
    failing = [result for result in part.tests if result.outcome != Outcome.PASSED]
    own = [result for result in failing if result.passes_with_stock is not True]
    if not own:
        return [fix_first(culprits), *(hint for hint in part.hints if not _names_your(hint, passed_on))][:MAX_HINTS]
    own_hints = part_hints(own)
    return [own_hints[0] if own_hints else wrong_by_itself(part.id, culprits), also_fails(culprits)]


def _unwritten(results: list[TestResult]) -> bool:
    """Whether a part's every failure says it is a stub, or not there."""
    return part_hints(results) in ([hint] for hint in _WHOLE_PART_HINTS)


def _fails_through_used_parts(result: TestResult) -> bool:
    return result.outcome != Outcome.PASSED and result.passes_with_stock is True


def _may_be_caused_by(own_hints: list[str], culprits: Sequence[str]) -> bool:
    """Whether a part's failure may come from the failing parts it uses: not when its own stub
    is what fails, nor when its headline already names one of them as hints name the
    student's pieces ("uses your split_heads, which is still a stub")."""
    headline = own_hints[0] if own_hints else ""
    return headline not in _WHOLE_PART_HINTS and not _names_your(headline, culprits)


def _names_your(hint: str, parts: Sequence[str]) -> bool:
    """Whether ``hint`` names one of ``parts`` as the student's piece ("your Head", as hints do)."""
    return any(re.search(rf"\byour {re.escape(name)}\b", hint) for name in parts)
