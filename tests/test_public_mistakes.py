"""The public tests name common mistakes (`assert ok, "mistake: <contract mistake>"`), so the
student's grader hints before submission; every name is one of the contract's, and the
mutant that makes that mistake gets it as the headline hint of the part whose test names it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from grader.core.assignment import Assignment
from grader.core.report import GradeReport
from grader.student.grade import MISTAKE_PREFIX, grade_public, part_of
from tests.conftest import mutant
from tests.test_mistakes import ASSIGNMENTS, mutants_of, reference_submission

MINIMUM_PER_ASSIGNMENT = 2


def strings_by_test(assignment: Assignment) -> dict[str, set[str]]:
    """Every string constant in each of the assignment's public tests, by the test's name."""
    return {function.name: {node.value for node in ast.walk(function)
                            if isinstance(node, ast.Constant) and isinstance(node.value, str)}
            for path in assignment.directory.glob("test_*.py")
            for function in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(function, ast.FunctionDef) and function.name.startswith("test_")}


def naming_tests(assignment: Assignment) -> dict[str, set[str]]:
    """The contract's mistakes that the public tests name, each with the tests that name it: in a
    "mistake: ..." message, or as a constant an f"mistake: {...}" message takes its name from."""
    named: dict[str, set[str]] = {}
    for test, found in strings_by_test(assignment).items():
        for mistake in assignment.mistakes:
            if mistake in found or MISTAKE_PREFIX + mistake in found:
                named.setdefault(mistake, set()).add(test)
    return named


def grade_mutant_publicly(assignment: Assignment, name: str, folder: Path) -> GradeReport:
    """The student's grader's report on the reference with mutant ``name``'s mistake in it."""
    (old, new), _ = mutants_of(assignment).MUTANTS[name]
    submission = folder / assignment.module
    submission.write_text(mutant(reference_submission(assignment.id), old, new), encoding="utf-8")
    return grade_public(assignment, submission)


@pytest.mark.parametrize("assignment", ASSIGNMENTS, ids=lambda assignment: f"a{assignment.id}")
def test_every_mistake_a_public_test_names_is_the_contracts(assignment):
    named = {text.removeprefix(MISTAKE_PREFIX) for found in strings_by_test(assignment).values() for text in found
             if text.startswith(MISTAKE_PREFIX) and text != MISTAKE_PREFIX}
    assert named <= set(assignment.mistakes), f"not in assignments/{assignment.id}/assignment.toml's mistakes"
    assert len(naming_tests(assignment)) >= MINIMUM_PER_ASSIGNMENT


@pytest.mark.slow
@pytest.mark.parametrize("assignment, mistake", [
    pytest.param(assignment, mistake, id=f"a{assignment.id}-{mistake[:40]}")
    for assignment in ASSIGNMENTS for mistake in sorted(naming_tests(assignment))
])
def test_the_student_grader_names_the_mistake_a_mutant_makes(assignment, mistake, tmp_path):
    report = grade_mutant_publicly(assignment, mutants_of(assignment).CONTRACT_MISTAKES[mistake], tmp_path)
    headlines = {part.id: part.hint for part in report.parts}
    parts = {part_of(test, assignment.parts) for test in naming_tests(assignment)[mistake]}
    assert any(headlines[part] == mistake for part in parts), headlines


# Mutants outside the contract's list that make one of its mistakes in another form: the
# public tests may name that mistake for them.
SAME_MISTAKE = {
    ("01", "mask inverted, filled with -1e9"): 'mask inverted (True read as "blocked")',
    # attention_scores scales, and scaled_dot_product_attention, which calls it, scales again: its
    # scores are divided by d_k. The student's grader has no stock attention_scores to show that the
    # cause is attention_scores (those are answers), so it names what the output shows, then
    # "attention_scores also fails its own tests".
    ("01", "scores scaled"): "scores scaled by `d_k` instead of `sqrt(d_k)`",
    ("07", "mask filled with zero"): "future positions visible (no causal mask)",
    ("07", "top_k keeps the smallest"): "`top_k` keeping the wrong set",
}


@pytest.mark.slow
@pytest.mark.parametrize("assignment, name", [
    pytest.param(assignment, name, id=f"a{assignment.id}-{name[:40]}")
    for assignment in ASSIGNMENTS for name in mutants_of(assignment).MUTANTS
    if name not in mutants_of(assignment).CONTRACT_MISTAKES.values()
])
def test_a_public_test_names_no_mistake_the_code_does_not_make(assignment, name, tmp_path):
    # A message checks the wrong version of the code it names, not merely that something is off:
    # a softmax over the wrong dimension in the attention is not "mask applied after the softmax".
    report = grade_mutant_publicly(assignment, name, tmp_path)
    named = {part.hint for part in report.parts if part.hint in assignment.mistakes}
    assert named <= {SAME_MISTAKE.get((assignment.id, name))}, named
