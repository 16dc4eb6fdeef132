"""The report's JSON form across schema versions: version 2 adds ``flags``, version 3 each
part's ``hints``, version 4 ``late``, version 5 the ``fingerprint`` and each part's
``override``, version 6 each part's ``scored_by`` and each test's ``mistake`` and
``passes_with_stock``, version 7 ``scored_by.charged_to``; older reports still read (upgraded: no flags, the headline as the only
hint, lateness not known, no fingerprint, no override, scored by the tests with no evidence
kept), and one from a newer grader is refused."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from importlib import resources

import jsonschema
import pytest

from grader.core.fingerprint import Fingerprint
from grader.core.report import (
    SCHEMA_VERSION,
    Flag,
    GradeReport,
    Override,
    PartResult,
    Rule,
    SchemaTooNewError,
    ScoredBy,
    Status,
    bounded,
    load_schema,
)
from grader.core.report import TestResult as Result
from grader.results.folder import NEW, read_report, why_graded
from tests.conftest import assert_valid


def report(**changes) -> GradeReport:
    test = Result("test_values", "failed", "values differ", "a hint", 0.0, 2.0)
    fields = dict(assignment="01", submission="attention.py", status="graded", error=None, score=0.0, max_score=2.0,
                  device="cpu", duration_s=0.5, grader_version="0.1.0",
                  parts=[PartResult("softmax", 0.0, 2.0, "a hint", [test], ["a hint"])], submission_sha256="a" * 64)
    return GradeReport(**{**fields, **changes})


def version_6(data: dict) -> dict:
    """``data`` as a version-6 grader wrote it (one priced mistake at most, nothing charged elsewhere)."""
    def scored_by(v7: dict) -> dict:
        (mistake, deduction), = v7["deductions"].items() or [(None, None)]
        return {"rule": v7["rule"], "mistake": mistake, "deduction": deduction, "tests_score": v7["tests_score"]}

    return {**data, "schema_version": 6, "parts": [{**part, "scored_by": scored_by(part["scored_by"])}
                                                   for part in data["parts"]]}


def version_5(data: dict) -> dict:
    """``data`` as a version-5 grader wrote it."""
    def test(data: dict) -> dict:
        return {key: value for key, value in data.items() if key not in ("mistake", "passes_with_stock")}

    data = version_6(data)
    return {**data, "schema_version": 5, "parts": [
        {**{key: value for key, value in part.items() if key != "scored_by"}, "tests": [test(t) for t in part["tests"]]}
        for part in data["parts"]]}


def version_4(data: dict) -> dict:
    """``data`` as a version-4 grader wrote it."""
    old = version_5(data)
    return {**{key: value for key, value in old.items() if key != "fingerprint"}, "schema_version": 4,
            "parts": [{key: value for key, value in part.items() if key != "override"} for part in old["parts"]]}


def version_3(data: dict) -> dict:
    """``data`` as a version-3 grader wrote it."""
    return {**{key: value for key, value in version_4(data).items() if key != "late"}, "schema_version": 3}


def version_2(data: dict) -> dict:
    """``data`` as a version-2 grader wrote it."""
    old = version_3(data)
    return {**old, "schema_version": 2, "parts": [{key: value for key, value in part.items() if key != "hints"}
                                                  for part in old["parts"]]}


def version_1(data: dict) -> dict:
    """``data`` as a version-1 grader wrote it."""
    old = {key: value for key, value in version_2(data).items() if key != "flags"}
    old["schema_version"] = 1
    return old


def schema(version: int) -> dict:
    return json.loads(resources.files("grader.core").joinpath(f"schema/report.v{version}.json").read_text())


def test_a_report_with_flags_round_trips_and_is_valid():
    flagged = report(flags=[Flag("torch-internals", "attention.py line 2", "torch._C.DisableTorchFunction")])
    assert_valid(flagged)
    assert GradeReport.from_dict(json.loads(json.dumps(flagged.to_dict()))) == flagged
    assert flagged.to_dict()["schema_version"] == SCHEMA_VERSION == 7


def test_a_version_1_report_reads_as_the_current_version_with_no_flags():
    old = version_1(report().to_dict())
    jsonschema.validate(old, schema(1))  # what a version-1 grader wrote
    upgraded = GradeReport.from_dict(old)
    assert upgraded.schema_version == SCHEMA_VERSION and upgraded.flags == []
    assert upgraded == report()
    assert_valid(upgraded)


def test_a_version_2_report_reads_with_its_headline_as_the_only_hint():
    passing = PartResult("attention_scores", 1.0, 1.0, None, [Result("test_shape", "passed", "", None, 1.0, 1.0)])
    current = report(parts=[*report().parts, passing])
    old = version_2(current.to_dict())
    jsonschema.validate(old, schema(2))  # what a version-2 grader wrote
    upgraded = GradeReport.from_dict(old)
    assert [part.hints for part in upgraded.parts] == [["a hint"], []]
    assert upgraded == current
    assert_valid(upgraded)


def test_a_version_3_report_reads_with_lateness_not_known():
    old = version_3(report().to_dict())
    jsonschema.validate(old, schema(3))  # what a version-3 grader wrote
    upgraded = GradeReport.from_dict(old)
    assert upgraded.schema_version == SCHEMA_VERSION and upgraded.late is None
    assert upgraded == report()
    assert_valid(upgraded)


def test_a_version_5_report_reads_as_scored_by_its_tests_with_no_evidence():
    old = version_5(report().to_dict())
    jsonschema.validate(old, schema(5))  # what a version-5 grader wrote
    upgraded = GradeReport.from_dict(old)
    assert upgraded.schema_version == SCHEMA_VERSION
    assert [part.scored_by for part in upgraded.parts] == [ScoredBy(Rule.TESTS)]
    assert [(test.mistake, test.passes_with_stock) for test in upgraded.parts[0].tests] == [(None, None)]
    assert upgraded == report()
    assert_valid(upgraded)


def test_a_version_6_report_reads_as_charging_nothing_elsewhere():
    rubric = ScoredBy(Rule.RUBRIC, {"scores not scaled": 3.0}, 0.0, 3.0)
    current = report(parts=[replace(report().parts[0], scored_by=rubric)])
    old = version_6(current.to_dict())
    jsonschema.validate(old, schema(6))  # what a version-6 grader wrote
    upgraded = GradeReport.from_dict(old)
    assert upgraded.parts[0].scored_by == rubric and rubric.charged_to == []
    assert upgraded == current
    assert_valid(upgraded)


def test_a_part_charged_through_a_used_part_round_trips_and_is_valid():
    charged = report(parts=[replace(report().parts[0], scored_by=ScoredBy(tests_score=1.0, charged_to=["split_heads"]))])
    assert_valid(charged)
    assert GradeReport.from_dict(json.loads(json.dumps(charged.to_dict()))) == charged


def test_a_part_scored_by_the_rubric_round_trips_with_its_evidence_and_is_valid():
    test = Result("test_values", "failed", "values differ", "scores not scaled: divide by sqrt(d_k)", 0.0, 3.0,
                  mistake="scores not scaled", passes_with_stock=False)
    part = PartResult("MultiHeadAttention", 11.0, 14.0, "scores not scaled: divide by sqrt(d_k)", [test],
                      ["scores not scaled: divide by sqrt(d_k)"], scored_by=ScoredBy(Rule.RUBRIC, {"scores not scaled": 3.0}, 0.0, 3.0))
    scored = report(parts=[part], score=11.0, max_score=14.0)
    assert_valid(scored)
    assert GradeReport.from_dict(json.loads(json.dumps(scored.to_dict()))) == scored
    wrong = scored.to_dict()
    wrong["parts"][0]["scored_by"]["rule"] = "curve"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, load_schema())


@pytest.mark.parametrize("late", [True, False, None])
def test_lateness_round_trips_and_is_valid(late):
    current = report(late=late)
    assert_valid(current)
    assert current.to_dict()["late"] is late
    assert GradeReport.from_dict(json.loads(json.dumps(current.to_dict()))) == current


def test_late_is_optional_and_a_boolean_or_null_in_the_schema():
    data = report().to_dict()
    del data["late"]
    jsonschema.validate(data, load_schema())
    assert GradeReport.from_dict(data).late is None
    for wrong in ("yes", 1, "true"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**report().to_dict(), "late": wrong}, load_schema())


def test_a_part_with_two_hints_round_trips_and_the_schema_bounds_them():
    two = report(parts=[PartResult("softmax", 0.0, 2.0, "mask inverted", [], ["mask inverted", "unexpected W_o.bias"])])
    assert_valid(two)
    assert GradeReport.from_dict(json.loads(json.dumps(two.to_dict()))) == two
    three = two.to_dict()
    three["parts"][0]["hints"].append("a third")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(three, load_schema())


def test_a_report_from_a_newer_grader_is_refused():
    newer = {**report().to_dict(), "schema_version": SCHEMA_VERSION + 1}
    with pytest.raises(SchemaTooNewError):
        GradeReport.from_dict(newer)


@pytest.mark.parametrize("flags", [
    [{"kind": "dynamic-code", "where": "cell 2, line 1", "detail": "eval"}] * 22,  # more than 20 and "more"
    [{"kind": "Dynamic Code", "where": "cell 2, line 1", "detail": "eval"}],
    [{"kind": "dynamic-code", "where": "cell 2, line 1", "detail": "x" * 201}],
    [{"kind": "dynamic-code", "where": "cell 2, line 1"}],
])
def test_the_schema_bounds_flags(flags):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**report().to_dict(), "flags": flags}, load_schema())


SETTLED = Fingerprint(submission="", suite="a" * 64, reference="b" * 64, contract="c" * 64, grader="d" * 64,
                      options="e" * 64)


def test_a_stored_report_holds_only_while_its_whole_fingerprint_is_unchanged(tmp_path):
    submission = tmp_path / "attention.py"
    submission.write_text("def softmax(x, dim=-1):\n    return x\n")
    sha256 = hashlib.sha256(submission.read_bytes()).hexdigest()
    current = report()
    current.fingerprint = replace(SETTLED, submission=sha256).to_dict()
    path = tmp_path / "attention.py.json"
    current.write_json(path)
    assert why_graded(read_report(path), SETTLED, submission) is None
    assert why_graded(None, SETTLED, submission) == NEW
    assert why_graded(read_report(path), replace(SETTLED, suite="f" * 64), submission) == "suite changed"
    assert why_graded(read_report(path), replace(SETTLED, grader="f" * 64, options="0" * 64),
                      submission) == "grader changed, options changed"
    assert why_graded(replace(current, status=Status.GRADER_ERROR), SETTLED, submission) == "grader error last time"
    submission.write_text("def softmax(x, dim=-1):\n    return x.exp()\n")
    assert why_graded(read_report(path), SETTLED, submission) == "file changed"


def test_a_version_4_report_reads_with_no_fingerprint_and_a_fingerprint_is_valid():
    old = version_4(report().to_dict())
    jsonschema.validate(old, schema(4))
    assert GradeReport.from_dict(old) == report() and report().fingerprint == {}
    assert_valid(report(fingerprint=replace(SETTLED, submission="f" * 64).to_dict()))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**report().to_dict(), "fingerprint": {"suite": "not a digest"}}, load_schema())


def test_a_version_4_report_reads_with_no_override_and_an_override_keeps_the_autograders_score():
    two_parts = [PartResult("softmax", 1.0, 2.0, "a hint", [], ["a hint"]), PartResult("attention", 3.0, 3.0, None, [])]
    graded = report(score=4.0, max_score=5.0, parts=two_parts)
    old = version_4(graded.to_dict())
    jsonschema.validate(old, schema(4))
    assert [part.override for part in GradeReport.from_dict(old).parts] == [None, None]
    # The instructor gave softmax 2 of 2 and commented on attention: the final score is 5, the
    # autograder's 4 is kept, and taking the overrides off gives the grader's report back.
    overridden = replace(graded, score=5.0, parts=[
        replace(two_parts[0], score=2.0, override=Override(1.0, "regrade request: the mask is right")),
        replace(two_parts[1], override=Override(3.0, "read by hand"))])
    assert_valid(overridden)
    assert GradeReport.from_dict(json.loads(json.dumps(overridden.to_dict()))) == overridden
    assert overridden.autograder_score == 4.0 and [part.autograder_score for part in overridden.parts] == [1.0, 3.0]
    assert overridden.autograders() == graded
    with_override = version_4(overridden.to_dict())
    with_override["parts"][0]["override"] = overridden.to_dict()["parts"][0]["override"]
    with pytest.raises(jsonschema.ValidationError, match="override"):  # version 4 has no place for it
        jsonschema.validate(with_override, schema(4))


def test_batch_grading_regrades_a_version_1_report_but_can_read_it(tmp_path):
    path = tmp_path / "attention.py.json"
    path.write_text(json.dumps(version_1(report().to_dict())))
    assert read_report(path).flags == [] and read_report(path).fingerprint == {}
    assert why_graded(read_report(path), SETTLED, tmp_path / "attention.py") == "report of an older grader"


def test_the_terminal_view_counts_the_flags_in_one_line():
    from rich.console import Console

    from grader.views.terminal import render_report

    def shown(flags) -> str:
        console = Console(width=120, record=True)
        console.print(render_report(report(flags=flags)))
        return console.export_text()

    assert "flag" not in shown([])
    assert "1 flag(s) for the instructor" in shown([Flag("dynamic-code", "x.py line 1", "eval")])
    many = bounded(Flag("dynamic-code", f"x.py line {n}", "eval") for n in range(30))
    assert "20+ flag(s) for the instructor" in shown(many)


def test_the_terminal_view_shows_both_hints_of_a_part_headline_first():
    from rich.console import Console

    from grader.views.terminal import render_report

    console = Console(width=160, record=True)
    two = PartResult("MultiHeadAttention", 2.0, 12.0, "fix split_heads first (it fails its own tests)", [],
                     ["fix split_heads first (it fails its own tests)", "mask inverted"])
    console.print(render_report(report(parts=[two])))
    shown = console.export_text()
    assert shown.index("fix split_heads first") < shown.index("also: mask inverted")
