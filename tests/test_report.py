"""The report's JSON form across schema versions: version 2 adds ``flags``; a version-1
report still reads (upgraded, with no flags), and one from a newer grader is refused."""

from __future__ import annotations

import hashlib
import json
from importlib import resources

import jsonschema
import pytest

from grader.gradebook import load_current_report, read_report
from grader.report import SCHEMA_VERSION, Flag, GradeReport, PartResult, SchemaTooNewError, load_schema
from grader.report import TestResult as Result
from tests.conftest import assert_valid


def report(**changes) -> GradeReport:
    test = Result("test_values", "failed", "values differ", "a hint", 0.0, 2.0)
    fields = dict(assignment="01", submission="attention.py", status="graded", error=None, score=0.0, max_score=2.0,
                  device="cpu", duration_s=0.5, grader_version="0.1.0",
                  parts=[PartResult("softmax", 0.0, 2.0, "a hint", [test])], submission_sha256="a" * 64)
    return GradeReport(**{**fields, **changes})


def version_1(data: dict) -> dict:
    """``data`` as a version-1 grader wrote it."""
    old = {key: value for key, value in data.items() if key != "flags"}
    old["schema_version"] = 1
    return old


def test_a_report_with_flags_round_trips_and_is_valid():
    flagged = report(flags=[Flag("torch-internals", "attention.py line 2", "torch._C.DisableTorchFunction")])
    assert_valid(flagged)
    assert GradeReport.from_dict(json.loads(json.dumps(flagged.to_dict()))) == flagged
    assert flagged.to_dict()["schema_version"] == SCHEMA_VERSION == 2


def test_a_version_1_report_reads_as_version_2_with_no_flags():
    old = version_1(report().to_dict())
    v1_schema = json.loads(resources.files("grader").joinpath("schema/report.v1.json").read_text())
    jsonschema.validate(old, v1_schema)  # what a version-1 grader wrote
    upgraded = GradeReport.from_dict(old)
    assert upgraded.schema_version == 2 and upgraded.flags == []
    assert_valid(upgraded)


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


def test_batch_grading_regrades_a_version_1_report_but_can_read_it(tmp_path):
    submission = tmp_path / "attention.py"
    submission.write_text("def softmax(x, dim=-1):\n    return x\n")
    current = report()
    current.submission_sha256 = hashlib.sha256(submission.read_bytes()).hexdigest()
    path = tmp_path / "attention.py.json"
    path.write_text(json.dumps(version_1(current.to_dict())))
    assert read_report(path).flags == []
    assert load_current_report(path, submission) is None
    current.write_json(path)
    assert load_current_report(path, submission) == current


def test_the_terminal_view_counts_the_flags_in_one_line():
    from rich.console import Console

    from grader.flags import bounded
    from grader.render import render_report

    def shown(flags) -> str:
        console = Console(width=120, record=True)
        console.print(render_report(report(flags=flags)))
        return console.export_text()

    assert "flag" not in shown([])
    assert "1 flag(s) for the instructor" in shown([Flag("dynamic-code", "x.py line 1", "eval")])
    many = bounded(Flag("dynamic-code", f"x.py line {n}", "eval") for n in range(30))
    assert "20+ flag(s) for the instructor" in shown(many)
