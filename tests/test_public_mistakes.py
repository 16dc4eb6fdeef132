"""The public tests name common mistakes (`assert ok, "mistake: <contract mistake>"`), so the
student's grader hints before submission; every name is one of the contract's, and the
mutant that makes that mistake gets it as its part's hint from the student's grader."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from grader.assignment import Assignment
from grader.public import MISTAKE_PREFIX, grade_public
from tests.conftest import mutant
from tests.test_mistakes import ASSIGNMENTS, mutants_of, reference_submission

MINIMUM_PER_ASSIGNMENT = 2


def strings(assignment: Assignment) -> set[str]:
    """Every string constant in the assignment's public tests."""
    return {node.value for path in assignment.directory.glob("test_*.py")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def named_mistakes(assignment: Assignment) -> set[str]:
    """The contract's mistakes that the public tests name: in a "mistake: ..." message, or as a
    constant an f"mistake: {...}" message takes its name from."""
    found = strings(assignment)
    return {mistake for mistake in assignment.mistakes if mistake in found or MISTAKE_PREFIX + mistake in found}


@pytest.mark.parametrize("assignment", ASSIGNMENTS, ids=lambda assignment: f"a{assignment.id}")
def test_every_mistake_a_public_test_names_is_the_contracts(assignment):
    named = {text.removeprefix(MISTAKE_PREFIX) for text in strings(assignment)
             if text.startswith(MISTAKE_PREFIX) and text != MISTAKE_PREFIX}
    assert named <= set(assignment.mistakes), f"not in assignments/{assignment.id}/assignment.toml's mistakes"
    assert len(named_mistakes(assignment)) >= MINIMUM_PER_ASSIGNMENT


@pytest.mark.slow
@pytest.mark.parametrize("assignment, mistake", [
    pytest.param(assignment, mistake, id=f"a{assignment.id}-{mistake[:40]}")
    for assignment in ASSIGNMENTS for mistake in sorted(named_mistakes(assignment))
])
def test_the_student_grader_names_the_mistake_a_mutant_makes(assignment, mistake, tmp_path):
    (old, new), _ = mutants_of(assignment).MUTANTS[mutants_of(assignment).CONTRACT_MISTAKES[mistake]]
    submission = tmp_path / assignment.module
    submission.write_text(mutant(reference_submission(assignment.id), old, new), encoding="utf-8")
    report = grade_public(assignment, submission)
    hints = {part.id: part.hints for part in report.parts if part.score < part.max_score}
    assert any(mistake in hint for part_hints in hints.values() for hint in part_hints), hints
