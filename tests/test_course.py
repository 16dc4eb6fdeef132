"""Every assignment, the same promises: the reference scores full marks as a module and as
a notebook; the untouched handout scores 0 and says plainly that it is not implemented."""

from __future__ import annotations

import re

import nbformat
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
    assert report.notes == [] and report.flags == []  # the notebook's check() cells included
    for part in report.parts:
        if part.id in assignment.parts_without_stub:
            assert "which is still a stub" in part.hint, (part.id, part.hint)
        else:
            assert part.hint == hints.NOT_IMPLEMENTED, (part.id, part.hint)


def graded_as(report) -> tuple:
    """What a report says of the submission: everything but how long it took."""
    return (report.status, report.error, report.score, report.max_score, report.notes, report.output, report.flags,
            [(p.id, p.score, p.hints, [(t.name, t.outcome, t.message, t.score) for t in p.tests]) for p in report.parts])


def test_the_handouts_check_cells_change_nothing_when_graded(assignment, grade_it):
    """The handout notebook has a check() cell after each part and one at the end, and tells the
    student to leave them in: graded, they do nothing, so the work scores as it would without them."""
    handout = nbformat.read(assignment.notebook_path, as_version=4)
    checks = [cell.source for cell in handout.cells
              if cell.cell_type == "code" and cell.source.startswith(("from grader import check", "check("))]
    assert len(checks) == 2 + len(assignment.parts) - len(assignment.parts_without_stub)  # import, each part, check()
    work = reference_cells(assignment)
    with_checks = grade_it(notebook_text(checks[0], *work, *checks[1:]), ".ipynb")
    assert_valid(with_checks)
    assert with_checks.score == with_checks.max_score and with_checks.notes == []
    assert graded_as(with_checks) == graded_as(grade_it(notebook_text(*work), ".ipynb"))
