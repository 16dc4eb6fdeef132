"""Assignment 03 end to end: unusable files, a fault in the suite, what the submission prints.

Buggy submissions are the reference with one edit (a mutant), so each differs from a
correct solution in exactly the way its name says, and none is a hand-kept copy. The
mistakes every assignment names are in test_mistakes.py; hostile submissions are in
test_adversarial.py.
"""

from __future__ import annotations

import pytest

from grader.core.report import Status
from reference import as_submission, module_for
from reference.hidden.a03 import variants
from tests.conftest import assert_valid, mutant, part

pytestmark = pytest.mark.slow
PARTS = ("split_heads", "combine_heads", "MultiHeadAttention")
REFERENCE = as_submission(module_for("03"))


@pytest.mark.parametrize("content, suffix, error", [
    (b"", ".py", "empty"),
    (b"\x00\x01binary", ".py", "binary"),
    (b"def f(:\n", ".py", "line 1"),
    (b"{not json", ".ipynb", "not valid JSON"),
])
def test_ungradable_submission_gets_a_report_with_every_part(grade_source, content, suffix, error):
    report = grade_source(content, suffix=suffix)
    assert_valid(report)
    assert report.status == Status.UNGRADABLE and error in report.error
    assert [p.id for p in report.parts] == list(PARTS) and report.max_score > 0 and report.score == 0


def test_a_fault_in_the_hidden_suite_is_a_grader_error_not_the_students(grade_source, monkeypatch):
    from reference.hidden.a03 import variants as module

    # The suite process is forked from this one, so the broken helper is what it runs.
    monkeypatch.setattr(module, "split_without_transpose", lambda x, h: 1 / 0)
    report = grade_source(REFERENCE)
    assert_valid(report)
    assert report.status == Status.GRADER_ERROR and "ZeroDivisionError" in report.error
    values = next(t for t in part(report, "split_heads").tests if t.name == "test_split_heads_values")
    assert values.outcome == "error" and "internal grader error" in values.message
    assert part(report, "combine_heads").score == part(report, "combine_heads").max_score


def test_what_the_submission_prints_is_in_the_report(grade_source):
    report = grade_source('print("hello from the student")\n' + REFERENCE)
    assert report.output.startswith("hello from the student\n")
    assert report.score == report.max_score


def test_a_misspelled_forward_costs_every_test_that_calls_the_module_and_says_why(grade_source):
    source = as_submission("multihead")
    at = source.index("def forward(", source.index("class MultiHeadAttention"))
    report = grade_source(source[:at] + "def foward(" + source[at + len("def forward("):])
    mha = part(report, "MultiHeadAttention")
    assert (mha.score, mha.max_score) == (2, 16)  # its parameters, and its ValueError for an indivisible d_model
    assert mha.hint.startswith("the module has no forward method")
    assert all(p.score == p.max_score for p in report.parts if p.id != "MultiHeadAttention")


def test_a_wrong_forward_costs_the_value_tests_not_the_contract_parameters(grade_source):
    # The names check is followed by one that the module computes with them, never that it
    # computes the right thing: the value tests grade that, and a mistake costs points once.
    report = grade_source(mutant(REFERENCE, "d_k = q.size(-1)\n", "d_k = q.size(-1) * q.size(1)\n"))
    tests = {test.name: test for test in part(report, "MultiHeadAttention").tests}
    assert tests["test_mha_has_the_contract_parameters"].outcome == "passed"
    assert part(report, "MultiHeadAttention").hint == variants.SCALE_D_MODEL
