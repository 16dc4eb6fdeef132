"""Every assignment's named mistakes, each made in its reference (a mutant): the mistake loses
exactly the points its table writes beside each part it lists, with their hints, and nowhere else.

The tables are data next to each hidden suite (reference/hidden/aNN/mutants.py); a test id
reads ``a03-mask inverted``.
"""

from __future__ import annotations

from functools import cache
from importlib import import_module
from types import ModuleType

import pytest

from grader.core import hints
from grader.core.assignment import Assignment
from grader.course.pages import Course
from reference import as_submission, module_for
from tests.conftest import ROOT, assert_mistake_named, mutant, part

pytestmark = pytest.mark.slow
ASSIGNMENTS = Course.load(ROOT).assignments


def mutants_of(assignment: Assignment) -> ModuleType:
    return import_module(f"reference.hidden.a{assignment.id}.mutants")


@cache
def reference_submission(assignment_id: str) -> str:
    return as_submission(module_for(assignment_id))


@pytest.mark.parametrize("assignment, name", [
    pytest.param(assignment, name, id=f"a{assignment.id}-{name}")
    for assignment in ASSIGNMENTS for name in mutants_of(assignment).MUTANTS
])
def test_mistake_loses_its_points_in_its_part_with_its_hint(grade_source, assignment, name):
    (old, new), expected = mutants_of(assignment).MUTANTS[name]
    report = grade_source(mutant(reference_submission(assignment.id), old, new), assignment=assignment.directory)
    assert_mistake_named(report, expected, name)


@pytest.mark.parametrize("assignment", ASSIGNMENTS, ids=lambda assignment: f"a{assignment.id}")
def test_missing_part_scores_zero_and_others_are_graded(grade_source, assignment):
    missing, kept = mutants_of(assignment).MISSING_PART
    source = reference_submission(assignment.id)
    definition = next(f"{keyword} {missing}(" for keyword in ("def", "class") if f"{keyword} {missing}(" in source)
    report = grade_source(mutant(source, definition, definition.replace("(", "_renamed(")),
                          assignment=assignment.directory)
    assert part(report, missing).score == 0
    assert part(report, missing).hint == hints.NOT_FOUND
    for part_id in kept:
        assert part(report, part_id).score == part(report, part_id).max_score, part_id
