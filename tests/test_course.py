"""Every assignment, the same promises: the reference scores full marks as a module and as
a notebook; the untouched handout scores 0 and says plainly that it is not implemented."""

from __future__ import annotations

import re

import pytest

from grader.core import hints
from grader.core.assignment import Assignment
from grader.core.report import Status
from grader.course.pages import Course
from reference import as_submission, module_for
from tests.conftest import ROOT, assert_valid, notebook_text

pytestmark = pytest.mark.slow


@pytest.fixture(params=Course.load(ROOT).assignments, ids=lambda assignment: f"a{assignment.id}")
def assignment(request) -> Assignment:
    return request.param


@pytest.fixture
def grade_it(grade_source, assignment):
    return lambda text, suffix=".py": grade_source(text, suffix=suffix, assignment=assignment.directory)


def reference_cells(assignment: Assignment) -> list[str]:
    # One cell per inlined reference module, as a student's notebook would grow.
    return re.split(r"(?m)^(?=# ---- )", as_submission(module_for(assignment.id)))


@pytest.mark.parametrize("suffix", [".py", ".ipynb"])
def test_reference_scores_full_marks(assignment, grade_it, suffix):
    source = as_submission(module_for(assignment.id))
    report = grade_it(source if suffix == ".py" else notebook_text(*reference_cells(assignment)), suffix)
    assert_valid(report)
    assert report.status == Status.GRADED and report.error is None, report.error
    assert [p.id for p in report.parts] == list(assignment.parts)
    failing = [(p.id, t.name, t.message) for p in report.parts for t in p.tests if t.outcome != "passed"]
    assert not failing and report.max_score > 0 and report.score == report.max_score, failing


@pytest.mark.parametrize("handout", ["module", "notebook"])
def test_untouched_handout_scores_zero_and_says_not_implemented(assignment, grade_it, handout):
    path = assignment.module_path if handout == "module" else assignment.notebook_path
    report = grade_it(path.read_text(), path.suffix)
    assert_valid(report)
    assert report.status == Status.GRADED and report.score == 0 and report.max_score > 0
    for part in report.parts:
        if part.id in assignment.parts_without_stub:
            assert "which is still a stub" in part.hint, (part.id, part.hint)
        else:
            assert part.hint == hints.NOT_IMPLEMENTED, (part.id, part.hint)
