"""Assignment 01 end to end: every route to a forbidden built-in softmax.

Buggy submissions are the reference with one edit (a mutant), so each differs from a
correct solution in exactly the way its name says, and none is a hand-kept copy. The
mistakes every assignment names are in test_mistakes.py.
"""

from __future__ import annotations

import pytest

from grader.core.report import GradeReport
from reference import as_submission, module_for
from reference.hidden.a01 import variants
from reference.hidden.a01.mutants import SOFTMAX_BODY
from tests.conftest import ROOT, mutant, part

pytestmark = pytest.mark.slow
ASSIGNMENT_01 = ROOT / "assignments" / "01"
REFERENCE = as_submission(module_for("01"))


@pytest.fixture
def grade_01(grade_source):
    def run(text, suffix=".py", **kwargs) -> GradeReport:
        return grade_source(text, suffix=suffix, assignment=ASSIGNMENT_01, **kwargs)
    return run


# Every route to a built-in softmax, and the operator the grader sees run for it.
FORBIDDEN = {
    "torch.softmax": ("torch.softmax(x, dim=dim)", "_softmax"),
    "F.softmax": ("torch.nn.functional.softmax(x, dim=dim)", "_softmax"),
    "nn.Softmax": ("nn.Softmax(dim=dim)(x)", "_softmax"),
    "Tensor.softmax": ("x.softmax(dim)", "_softmax"),
    "log_softmax": ("torch.log_softmax(x, dim=dim).exp()", "_log_softmax"),
    "torch.special.softmax": ("torch.special.softmax(x, dim)", "_softmax"),
    "aten._softmax": ("torch.ops.aten._softmax(x, dim, False)", "_softmax"),
}


@pytest.mark.parametrize("name", FORBIDDEN)
def test_a_built_in_softmax_scores_zero_in_softmax_and_is_named(grade_01, name):
    call, seen = FORBIDDEN[name]
    report = grade_01(mutant(REFERENCE, SOFTMAX_BODY, f"    return {call}\n"))
    softmax = part(report, "softmax")
    assert softmax.score == 0 and all(t.outcome == "failed" for t in softmax.tests)
    assert variants.FORBIDDEN_SOFTMAX in softmax.hint and f"({seen}" in softmax.hint, softmax.hint
    for part_id in ("attention_scores", "scaled_dot_product_attention", "SelfAttention"):
        assert part(report, part_id).score == part(report, part_id).max_score, part_id
