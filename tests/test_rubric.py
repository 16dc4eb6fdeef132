"""Partial credit by mistake (the rubric) end to end: each mistake the contract prices, made in
the reference (its mutant), costs the part where it is made exactly its deduction, and the report
says the rubric scored it; where the course turns the rubric off, the tests decide as before.

The deductions are in each assignments/NN/assignment.toml (``[rubric.deductions]``); the mutant
of each contract mistake is in reference/hidden/aNN/mutants.py (``CONTRACT_MISTAKES``).
"""

from __future__ import annotations

import shutil
from importlib import import_module

import pytest

from grader.core.assignment import Assignment
from grader.core.hints import contract_mistake
from grader.core.report import Rule
from grader.course.pages import Course
from reference import as_submission, module_for
from tests.conftest import ROOT, mutant, part

pytestmark = pytest.mark.slow
ASSIGNMENTS = Course.load(ROOT).assignments


def priced(assignment: Assignment) -> list[tuple[str, float]]:
    return list(assignment.deductions)


@pytest.mark.parametrize("assignment, mistake, deduction", [
    pytest.param(assignment, mistake, deduction, id=f"a{assignment.id}-{mistake}")
    for assignment in ASSIGNMENTS for mistake, deduction in priced(assignment)
])
def test_a_priced_mistake_costs_the_part_where_it_is_made_exactly_its_deduction(grade_source, assignment, mistake,
                                                                               deduction):
    mutants = import_module(f"reference.hidden.a{assignment.id}.mutants")
    (old, new), expected = mutants.MUTANTS[mutants.CONTRACT_MISTAKES[mistake]]
    report = grade_source(mutant(as_submission(module_for(assignment.id)), old, new), assignment=assignment.directory)
    # Where the mistake is made: the parts whose expected hint names it (not "fix X first").
    made_in = [part_id for part_id, (_, hint) in expected.items() if contract_mistake(hint) == mistake]
    assert made_in, mistake
    for part_id in made_in:
        result = part(report, part_id)
        assert result.max_score - result.score == deduction, (part_id, result.score, result.max_score, result.hint)
        if result.scored_by.rule == Rule.RUBRIC:  # the tests alone took more
            assert (result.scored_by.deductions, result.scored_by.unexplained) == ({mistake: deduction}, 0)
            assert result.scored_by.tests_score < result.score
            assert all(test.mistake == mistake for test in result.tests if test.outcome != "passed")

def test_each_part_the_rubric_scores_says_so_with_its_evidence(grade_source):
    # 03: scores scaled by sqrt(d_model) costs MultiHeadAttention 11 of 16 points by its tests,
    # each failing check's value being that mistake's: the rubric's 3 instead.
    report = grade_source(mutant(as_submission(module_for("03")), "d_k = q.size(-1)\n",
                                 "d_k = q.size(-1) * q.size(1)\n"))
    mha = part(report, "MultiHeadAttention")
    words = "scores scaled by `sqrt(d_model)` instead of the head dimension"
    assert (mha.score, mha.max_score) == (13.0, 16.0)
    assert (mha.scored_by.rule, mha.scored_by.deductions, mha.scored_by.unexplained, mha.scored_by.tests_score) == (
        Rule.RUBRIC, {words: 3.0}, 0.0, 5.0)
    assert report.score == report.max_score - 3


def test_a_course_that_turns_the_rubric_off_is_scored_by_its_tests(grade_source, tmp_path):
    course = tmp_path / "assignments"
    shutil.copytree(ROOT / "assignments" / "03", course / "03")
    (course / "course.toml").write_text((ROOT / "assignments" / "course.toml").read_text().replace(
        "[rubric]\nenabled = true", "[rubric]\nenabled = false"))
    assert not Assignment.load(course / "03").rubric
    report = grade_source(mutant(as_submission(module_for("03")), "d_k = q.size(-1)\n",
                                 "d_k = q.size(-1) * q.size(1)\n"), assignment=course / "03")
    mha = part(report, "MultiHeadAttention")
    assert (mha.score, mha.scored_by.rule) == (5.0, Rule.TESTS)


# A priced mistake beside an unrelated slip, as students write them: the mistake costs its
# deduction, the slip its own test's points. Before: the slip turned the rubric off, and the
# priced mistake cost 3-4 times its deduction (03: 4 / 16; 07's Head: 7 / 15).
NO_DIVISIBILITY_CHECK = ('        if d_model % num_heads != 0:\n'
                         '            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")\n', "")
SCALE_D_MODEL_03 = ("d_k = q.size(-1)\n", "d_k = q.size(-1) * q.size(1)\n")
# Karpathy's "Let's build GPT" Head: scaled by C, the input width, and no check of T.
KARPATHY_SCALE = ("        _, length, _ = x.shape\n", "        _, length, C = x.shape\n")
KARPATHY_SCALE_USED = ("* k.size(-1) ** -0.5", "* C ** -0.5")
HEAD_LENGTH_UNCHECKED = ("        _check_length(length, self.tril.size(0))\n        k, q, v", "        k, q, v")


@pytest.mark.parametrize("assignment_id, edits, part_id, score, unexplained", [
    pytest.param("03", [SCALE_D_MODEL_03, NO_DIVISIBILITY_CHECK], "MultiHeadAttention", 12, 1, id="03 sqrt(d_model), no check"),
    pytest.param("07", [KARPATHY_SCALE, KARPATHY_SCALE_USED, HEAD_LENGTH_UNCHECKED], "Head", 12, 1, id="07 Karpathy's Head"),
])
def test_a_priced_mistake_beside_a_slip_costs_its_deduction_and_the_slip_its_points(
        grade_source, assignment_id, edits, part_id, score, unexplained):
    assignment = Assignment.load(ROOT / "assignments" / assignment_id)
    source = as_submission(module_for(assignment_id))
    for old, new in edits:
        source = mutant(source, old, new)
    result = part(grade_source(source, assignment=assignment.directory), part_id)
    assert result.score == score
    assert result.scored_by.rule == Rule.RUBRIC and result.scored_by.unexplained == unexplained
    (mistake, deduction), = result.scored_by.deductions.items()
    assert dict(assignment.deductions)[mistake] == deduction
    assert result.scored_by.tests_score < score
