"""Test outcomes cross the pipe as typed data, and one function makes them a report."""

from __future__ import annotations

import json

import pytest

from grader.core.assemble import TEST_HINT_CHARS, TEST_MESSAGE_CHARS, assemble_report
from grader.core.assignment import Assignment
from grader.core.outcome import MalformedResult, SuiteResult, TestOutcome, Verdict
from grader.core.report import Flag, Outcome, Status
from grader.engine.collected import SuiteError
from grader.engine.runner import ForkedRun
from grader.sandbox.limits import Limits
from tests.conftest import ASSIGNMENT_03

FLAG = Flag("forbidden-builtin", "mha.py line 3", "exec")
RESULT = SuiteResult(
    tests=(TestOutcome("test_split", "split_heads", 2.0, Verdict(Outcome.PASSED)),
           TestOutcome("test_split_values", "split_heads", 1.0, Verdict(Outcome.FAILED, "values differ", "a hint",
                                                                          (FLAG,))),
           TestOutcome("test_combine_on_cuda", "combine_heads", 1.0, Verdict(Outcome.SKIPPED, "no CUDA")),
           TestOutcome("test_combine", "combine_heads", 1.0)),
    notes=("cell 2 was skipped",), output="hello\n", flags=(Flag("computed-attribute", "mha.py line 1", "getattr"),))


@pytest.fixture(scope="module")
def assignment() -> Assignment:
    return Assignment.load(ASSIGNMENT_03)


def through_the_pipe(result: SuiteResult) -> SuiteResult:
    return SuiteResult.from_dict(json.loads(json.dumps(result.to_dict())))


def test_a_suite_result_comes_back_from_json_as_it_was_sent():
    assert through_the_pipe(RESULT) == RESULT


@pytest.mark.parametrize("tamper", [
    lambda data: data.pop("notes"),
    lambda data: data.update(extra=1),
    lambda data: data.update(tests={}),
    lambda data: data["tests"][0].update(points="2"),
    lambda data: data["tests"][0].update(points=True),
    lambda data: data["tests"][0].update(name=None),
    lambda data: data["tests"][1]["verdict"].update(outcome="won"),
    lambda data: data["tests"][1]["verdict"].update(internal="yes"),
    lambda data: data["tests"][1]["verdict"]["flags"].append({"kind": "x"}),
    lambda data: data["notes"].append(3),
    lambda data: data["flags"].append("a flag"),
])
def test_a_malformed_result_is_refused(tamper):
    data = json.loads(json.dumps(RESULT.to_dict()))
    tamper(data)
    with pytest.raises(MalformedResult):
        SuiteResult.from_dict(data)


class Garbage:
    def to_dict(self):
        return {"tests": [{"name": "t", "part": "p", "points": "many", "verdict": None}], "notes": [], "output": "",
                "flags": []}


@pytest.mark.parametrize("function", [lambda: RESULT, Garbage])
def test_the_grader_side_of_the_pipe_rebuilds_outcomes_or_says_the_result_is_malformed(function):
    run = ForkedRun(function, timeout_s=30, limits=Limits())
    run.wait()
    if function is Garbage:
        with pytest.raises(SuiteError, match="malformed result"):
            run.result()
    else:
        assert run.result() == RESULT


def test_the_report_scores_what_ran_leaves_out_what_was_skipped_and_says_what_did_not_run(assignment):
    report = assemble_report(assignment, "mha.py", RESULT, status=Status.GRADED, error=None, device="cpu",
                             duration_s=1.23456, sandbox=["namespaces"], submission_sha256="abc")
    split, combine, mha = report.parts
    assert (split.score, split.max_score, split.hint) == (2.0, 3.0, "a hint")
    assert [(test.name, test.outcome, test.message) for test in combine.tests] == [("test_combine", "error", "not run")]
    assert mha.tests == [] and report.score == 2.0 and report.max_score == 4.0
    assert report.flags == [RESULT.flags[0], FLAG] and report.notes == ["cell 2 was skipped"]
    assert (report.duration_s, report.sandbox, report.submission_sha256) == (1.235, ["namespaces"], "abc")


def test_a_test_failing_inside_the_grader_makes_the_report_a_grader_error(assignment):
    internal = Verdict(Outcome.ERROR, "internal grader error (KeyError: 'x')", internal=True)
    result = SuiteResult((TestOutcome("test_split", "split_heads", 1.0, internal),))
    report = assemble_report(assignment, "mha.py", result, status=Status.GRADED, error=None, device="cpu",
                             duration_s=0, sandbox=["namespaces"])
    assert report.status == Status.GRADER_ERROR and "KeyError" in report.error and report.sandbox == []
    assert all(part.hint == report.error for part in report.parts)


def test_a_part_only_the_tests_name_is_listed_after_the_contract_parts(assignment):
    result = SuiteResult((TestOutcome("test_extra", "other public tests", 1.0, Verdict(Outcome.PASSED)),))
    report = assemble_report(assignment, "mha.py", result, status=Status.GRADED, error=None, device="cpu",
                             duration_s=0, sandbox=[])
    assert [part.id for part in report.parts] == [*assignment.parts, "other public tests"]



def test_what_a_test_says_is_bounded_however_long_the_names_it_quotes(assignment):
    # A parameter named 'n' * 20000 reaches the names check's message and hint.
    name = "\x1b[31m" + "n" * 20000
    verdict = Verdict(Outcome.FAILED, f"parameters: unexpected [{name!r}]", f"the contract names linear1; you have {name}")
    result = SuiteResult((TestOutcome("test_names", "split_heads", 1.0, verdict),))
    report = assemble_report(assignment, "mha.py", result, status=Status.GRADED, error=None, device="cpu",
                             duration_s=0, sandbox=[])
    test = report.parts[0].tests[0]
    assert len(test.message) <= TEST_MESSAGE_CHARS and len(test.hint) <= TEST_HINT_CHARS
    assert test.hint.startswith("the contract names linear1; you have") and "more characters cut" in test.hint
    assert len(report.parts[0].hint) <= TEST_HINT_CHARS
