"""`grade export classroom`: the workflow, the reporter's result format, and the workflow's
own grading commands run in a fake student repository."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml  # a dev dependency: the grader itself writes YAML as text

from grader.cli import main
from grader.core.assignment import AssignmentError
from grader.core.report import Status
from grader.export import ExportError
from grader.export.classroom import encode, to_classroom
from grader.export.classroom import main as classroom_main
from grader.export.classroom_workflow import REPORTER, RUNNER_ID, workflow, write_workflow
from reference import as_submission
from tests.conftest import ASSIGNMENT_03, ROOT
from tests.test_export_gradescope import HINT, sample_report


def decode_output(github_output: Path) -> list[dict]:
    """Every ``result=`` line a step appended to $GITHUB_OUTPUT, decoded as the reporter does."""
    lines = github_output.read_text().splitlines()
    return [json.loads(base64.b64decode(line.removeprefix("result="))) for line in lines if line.startswith("result=")]


def steps(text: str) -> dict[str, dict]:
    parsed = yaml.safe_load(text)
    assert parsed["name"] == "Autograding Tests"  # Classroom reads scores only from this workflow and job
    assert list(parsed["jobs"]) == ["run-autograding-tests"]
    return {step["name"]: step for step in parsed["jobs"]["run-autograding-tests"]["steps"]}


# ---- the workflow


def test_workflow_installs_grades_converts_and_reports_in_that_order():
    by_name = steps(workflow("assignments/03"))
    assert list(by_name) == ["Checkout code", "Set up Python", "Install the grader", "Grade", "Report to Classroom",
                             "Autograding Reporter"]
    assert by_name["Checkout code"]["uses"].startswith("actions/checkout@")
    assert by_name["Set up Python"]["with"]["python-version"] == "3.11"
    install = by_name["Install the grader"]["run"]
    assert "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in install
    assert 'pip install "$GRADER_SOURCE"' in install
    assert by_name["Grade"]["run"] == "grade assignments/03 --json report.json -q"
    convert = by_name["Report to Classroom"]
    assert convert["id"] == RUNNER_ID and convert["run"] == "python -P -m grader.export.classroom report.json"
    reporter = by_name["Autograding Reporter"]
    assert reporter["uses"] == REPORTER and reporter["with"]["runners"] == RUNNER_ID
    assert reporter["env"] == {f"{RUNNER_ID.upper()}_RESULTS": f"${{{{ steps.{RUNNER_ID}.outputs.result }}}}"}


def test_grader_source_reaches_pip_exactly_whatever_it_holds():
    source = 'git+https://x-access-token:${{ secrets.GRADER_TOKEN }}@github.com/org/grader.git@v2#egg=x: "y"'
    assert steps(workflow("assignments/03", source))["Install the grader"]["env"] == {"GRADER_SOURCE": source}


@pytest.mark.parametrize("path", ["/work/assignments/03", "../assignments/03"])
def test_assignment_must_be_a_path_inside_the_students_repository(path):
    with pytest.raises(ExportError, match="inside the student's repository"):
        workflow(path)


def test_cli_writes_the_workflow_and_refuses_an_unknown_assignment(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the assignment's path is relative, as in the students' repositories
    out = tmp_path / ".github" / "workflows" / "classroom.yml"
    assert main(["export", "classroom", "assignments/03", "--out", str(out)]) == 0
    assert steps(out.read_text())["Grade"]["run"] == "grade assignments/03 --json report.json -q"
    with pytest.raises(AssignmentError):
        write_workflow(Path("assignments/99"), tmp_path / "other.yml")


# ---- the reporter's result


def test_result_has_one_test_per_part_with_partial_scores():
    result = json.loads(base64.b64decode(encode(to_classroom(sample_report()))))
    assert result["version"] == 1 and result["status"] == "fail"
    assert result["max_score"] == 21.0
    assert [(t["name"], t["status"], t["score"]) for t in result["tests"]] == [
        ("split_heads", "pass", 7.0), ("MultiHeadAttention", "fail", 3.0)]
    assert sum(test["score"] for test in result["tests"]) == 10.0  # what the reporter totals
    assert HINT in result["tests"][1]["message"]


def test_report_that_is_not_graded_is_an_error_worth_nothing():
    result = to_classroom(sample_report(Status.GRADER_ERROR, "1 test(s) failed inside the grader"))
    assert result["status"] == "error" and result["max_score"] == 21.0
    assert all(test["status"] == "error" and test["score"] == 0 for test in result["tests"])


def test_module_appends_the_result_to_github_output(tmp_path, monkeypatch):
    report = tmp_path / "report.json"
    sample_report().write_json(report)
    github_output = tmp_path / "github_output"
    github_output.write_text("earlier=kept\n")
    monkeypatch.setenv("GITHUB_OUTPUT", str(github_output))
    assert classroom_main([str(report)]) == 0
    assert github_output.read_text().startswith("earlier=kept\n")
    assert decode_output(github_output) == [to_classroom(sample_report())]


def test_missing_report_is_reported_as_a_grader_error(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "github_output"))
    classroom_main([str(tmp_path / "report.json")])
    [result] = decode_output(tmp_path / "github_output")
    assert result["status"] == "error" and "not your fault" in result["tests"][0]["message"]


# ---- the workflow's own commands, in a student's repository


@pytest.mark.slow
def test_workflow_commands_grade_the_students_repository(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(ASSIGNMENT_03, repo / "assignments" / "03")
    (repo / "assignments" / "03" / "mha.py").write_text(as_submission("multihead"))
    # The handout's student grader (`grade release`) sits at the top of the repository: not the one to run.
    (repo / "grader").mkdir()
    (repo / "grader" / "__init__.py").write_text("raise ImportError('the student edition')\n")
    by_name = steps(workflow("assignments/03"))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "GITHUB_OUTPUT": str(tmp_path / "github_output")}
    for name in ("Grade", "Report to Classroom"):  # the steps after the install, which needs the network
        done = subprocess.run(by_name[name]["run"], shell=True, cwd=repo, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
    [result] = decode_output(tmp_path / "github_output")
    parts = json.loads((repo / "report.json").read_text())["parts"]
    assert result["status"] == "pass" and [test["name"] for test in result["tests"]] == [part["id"] for part in parts]
    assert sum(test["score"] for test in result["tests"]) == result["max_score"] > 0
