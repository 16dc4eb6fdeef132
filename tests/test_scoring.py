"""Which hint a part shows, and how a test's exception becomes its outcome."""

from __future__ import annotations

import pytest

from grader import hints
from grader.checks import CheckFailed
from grader.plugin import classify
from grader.report import TestResult as Result
from grader.sandbox.errors import StudentException, StudentTimeout
from grader.scoring import part_hint, score_parts


def result(outcome: str, hint: str | None, points: float = 1.0) -> Result:
    return Result("t", outcome, "message", hint, points if outcome == "passed" else 0.0, points)


def test_a_named_mistake_beats_an_exception_hint_that_came_first():
    failing = [result("error", "the shapes going into a matmul are wrong"), result("failed", "pre-norm instead of post-norm")]
    assert part_hint(failing) == "pre-norm instead of post-norm"


def test_an_exception_hint_beats_not_implemented():
    assert part_hint([result("failed", hints.NOT_IMPLEMENTED), result("error", "missing .contiguous()")]) \
        == "missing .contiguous()"


def test_whole_part_hint_when_every_failure_says_it():
    assert part_hint([result("failed", hints.NOT_FOUND), result("passed", None)]) == hints.NOT_FOUND


def test_no_hint_for_a_passing_part():
    assert part_hint([result("passed", None)]) is None


def test_parts_keep_contract_order_and_sum_points():
    tests = [("b", result("passed", None, 2)), ("a", result("failed", "x", 3)), ("b", result("failed", None, 1))]
    parts = score_parts(("a", "b"), tests)
    assert [(p.id, p.score, p.max_score) for p in parts] == [("a", 0, 3), ("b", 2, 3)]


@pytest.mark.parametrize("message, part, expected", [
    ("split_heads: see assignments/03/README.md", "split_heads", hints.NOT_IMPLEMENTED),
    ("", "split_heads", hints.NOT_IMPLEMENTED),
    ("MultiHeadAttention.__init__: see README", "MultiHeadAttention", hints.NOT_IMPLEMENTED),
    ("MultiHeadAttention: from assignment 03: paste your solution here", "EncoderLayer",
     "EncoderLayer uses your MultiHeadAttention, which is still a stub (from assignment 03: paste your solution here)"),
])
def test_not_implemented_names_the_stub_that_raised(message, part, expected):
    exc = StudentException(part, "NotImplementedError", message, "")
    assert classify(exc, part).hint == expected


@pytest.mark.parametrize("exc, outcome", [
    (None, "passed"),
    (CheckFailed("values differ", "a hint"), "failed"),
    (StudentException("f", "RuntimeError", "boom", ""), "error"),
    (StudentTimeout("f: time limit of 1 s exceeded"), "timeout"),
    (ZeroDivisionError("hidden suite bug"), "error"),
])
def test_outcomes(exc, outcome):
    assert classify(exc, "p").outcome == outcome


def test_a_fault_in_the_suite_is_flagged_internal_and_never_blamed_on_the_student():
    verdict = classify(KeyError("W_q.weight"), "p")
    assert verdict.internal is True and "internal grader error" in verdict.message
