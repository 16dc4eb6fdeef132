"""Assignment 06 end to end: train_step calling a part that is still a stub.

train_step is graded on top of the student's own teacher_forcing_split and
translation_loss, so a mistake made in one of those costs points there only (the
mistakes every assignment names are in test_mistakes.py).
"""

from __future__ import annotations

import pytest

from grader.core import hints
from grader.core.report import GradeReport
from reference import as_submission, module_for
from tests.conftest import ROOT, mutant, part

pytestmark = pytest.mark.slow
ASSIGNMENT_06 = ROOT / "assignments" / "06"
REFERENCE = as_submission(module_for("06"))


@pytest.fixture
def grade_06(grade_source):
    def run(text, **kwargs) -> GradeReport:
        return grade_source(text, assignment=ASSIGNMENT_06, **kwargs)
    return run


def test_train_step_calling_an_unfinished_part_says_which(grade_06):
    source = mutant(REFERENCE, "    return F.cross_entropy(\n",
                    "    raise NotImplementedError('translation_loss: see assignments/06/README.md')\n"
                    "    return F.cross_entropy(\n")
    report = grade_06(source)
    assert part(report, "train_step").hint == hints.NOT_IMPLEMENTED
    assert any("calls translation_loss" in t.message for t in part(report, "train_step").tests)
    assert part(report, "greedy_decode").score == part(report, "greedy_decode").max_score
