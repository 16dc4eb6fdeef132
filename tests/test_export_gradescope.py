"""`grade export gradescope`: the report as results.json, the autograder zip, and the zip's
run_autograder against a fake /autograder tree, as Gradescope runs it."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from grader.cli import main
from grader.core.assignment import Assignment, reference_dir
from grader.core.fingerprint import GRADER_DIR, source_files
from grader.core.report import GradeReport, PartResult, Status
from grader.core.report import TestResult as Result  # not Test*: pytest would try to collect it
from grader.export.gradescope import Visibility, find_submission, run, to_gradescope
from grader.export.gradescope import main as run_main
from grader.export.gradescope_metadata import METADATA, is_late
from grader.export.gradescope_zip import build_autograder, reference_files
from reference import as_submission
from tests.conftest import ASSIGNMENT_03, ASSIGNMENTS, notebook_text

HINT = "scores scaled by sqrt(d_model) instead of sqrt(d_k), the head dimension"


def sample_report(status: str = Status.GRADED, error: str | None = None) -> GradeReport:
    """A report of assignment 03's shape: one part with full marks, one with partial credit."""
    full = PartResult("split_heads", 7.0, 7.0, None, [
        Result("test_split_heads_values", "passed", "", None, 7.0, 7.0)])
    partial = PartResult("MultiHeadAttention", 3.0, 14.0, HINT, [
        Result("test_mha_has_the_contract_parameters", "passed", "", None, 3.0, 3.0),
        Result("test_mha_self_attention_values", "failed", "values differ: max abs error 0.651", HINT, 0.0, 11.0)])
    return GradeReport(assignment="03", submission="mha.py", status=status, error=error, score=10.0, max_score=21.0,
                       device="cpu", duration_s=0.4, grader_version="0.1.0", parts=[full, partial],
                       notes=["cell 3 raised NameError and was skipped"])


# ---- the report as results.json


def test_graded_report_scores_each_part_and_the_total_adds_up():
    results = to_gradescope(sample_report())
    json.dumps(results)  # raises if anything in it is not JSON, as run() writes it
    assert results["score"] == sum(test["score"] for test in results["tests"]) == 10.0
    assert [(t["name"], t["score"], t["max_score"], t["status"]) for t in results["tests"]] == [
        ("split_heads", 7.0, 7.0, "passed"), ("MultiHeadAttention", 3.0, 14.0, "failed")]
    assert "10 / 21" in results["output"] and "cell 3 raised NameError" in results["output"]
    assert results["output_format"] == results["test_output_format"] == "text" and results["visibility"] == "visible"


def test_the_chosen_visibility_applies_to_every_test_and_to_the_output():
    results = to_gradescope(sample_report(), Visibility(tests="after_due_date", stdout="after_published"))
    assert results["visibility"] == "after_due_date" and results["stdout_visibility"] == "after_published"
    assert [test["visibility"] for test in results["tests"]] == ["after_due_date"] * 2
    defaults = to_gradescope(sample_report())
    assert defaults["visibility"] == "visible" and defaults["stdout_visibility"] == "hidden"


def test_a_visibility_gradescope_does_not_know_is_refused():
    with pytest.raises(ValueError, match="'public' is not one of hidden, after_due_date"):
        Visibility(tests="public")
    with pytest.raises(ValueError, match="stdout visibility"):
        Visibility(stdout="Hidden")


def test_a_failing_part_shows_its_hint_and_failing_checks_only():
    passing, failing = to_gradescope(sample_report())["tests"]
    assert passing["output"] == ""
    assert HINT in failing["output"]
    assert "test_mha_self_attention_values" in failing["output"] and "max abs error 0.651" in failing["output"]
    assert "test_mha_has_the_contract_parameters" not in failing["output"]


@pytest.mark.parametrize("status, error, says", [
    (Status.UNGRADABLE, "mha.py has a syntax error: line 2", "could not be graded"),
    (Status.GRADER_ERROR, "1 test(s) failed inside the grader: KeyError", "not your fault"),
])
def test_a_report_that_is_not_graded_scores_zero_and_says_why(status, error, says):
    # The sample's parts keep their points, as a grader_error report's other tests do: they must not count.
    results = to_gradescope(sample_report(status, error))
    assert results["score"] == 0
    assert all(test["score"] == 0 and test["status"] == "failed" for test in results["tests"])
    assert [test["max_score"] for test in results["tests"]] == [7.0, 14.0]
    assert error in results["output"] and says in results["output"]
    assert all(error in test["output"] for test in results["tests"])


def test_a_late_submission_says_so_in_one_line_of_the_summary():
    late = to_gradescope(replace(sample_report(), late=True))["output"]
    assert [line for line in late.splitlines() if "late" in line.lower()] == [
        "Late: this submission was handed in after the due date."]
    for not_late in (False, None):
        assert "late" not in to_gradescope(replace(sample_report(), late=not_late))["output"].lower()


# ---- late or not, from submission_metadata.json

DUE = "2024-03-01T23:59:00.000000-08:00"


def metadata(created_at: str, due_date: str | None = DUE, users: list | None = None) -> dict:
    """submission_metadata.json as Gradescope documents it (fields this grader ignores left out)."""
    return {"id": 123456, "created_at": created_at,
            "assignment": {"due_date": due_date, "late_due_date": None, "title": "Multi-head attention"},
            "users": users if users is not None else [{"email": "ada@example.com", "id": 1, "name": "Ada"}],
            "previous_submissions": []}


def write_metadata(root: Path, data: object) -> Path:
    (root / METADATA).write_text(data if isinstance(data, str) else json.dumps(data))
    return root


@pytest.mark.parametrize("created_at, late", [
    ("2024-03-01T23:58:59.999999-08:00", False),
    ("2024-03-01T23:59:00-08:00", False),  # at the due date: on time
    ("2024-03-02T00:00:01-08:00", True),
    # Instants compared, not clock readings: 08:30 in Berlin is 23:30 the day before in California,
    # and 23:30 in Alaska is 00:30 the next day there.
    ("2024-03-02T08:30:00+01:00", False),
    ("2024-03-01T23:30:00-09:00", True),
    ("2024-03-02T08:00:00Z", True),
])
def test_late_means_handed_in_after_the_due_date(tmp_path, created_at, late):
    assert is_late(write_metadata(tmp_path, metadata(created_at))) is late


def user(name: str, due_date: str | None = None) -> dict:
    """A submitter as Gradescope's files give them: with their own dates (an extension moves them)."""
    dates = {"assignment": {"due_date": due_date, "late_due_date": None}} if due_date else {}
    return {"email": f"{name}@example.com", "id": len(name), "name": name, **dates}


def test_a_submitters_extension_moves_the_due_date(tmp_path):
    a_day_late = "2024-03-02T22:00:00-08:00"
    extended = "2024-03-03T23:59:00-08:00"
    assert is_late(write_metadata(tmp_path, metadata(a_day_late, users=[user("ada", DUE)]))) is True
    assert is_late(write_metadata(tmp_path, metadata(a_day_late, users=[user("ada", extended)]))) is False
    # A group: late only when late for every member; a member without dates of their own has the assignment's.
    assert is_late(write_metadata(tmp_path, metadata(a_day_late, users=[user("ada"), user("bob", extended)]))) is False
    assert is_late(write_metadata(tmp_path, metadata(a_day_late, users=[user("ada"), user("bob")]))) is True


@pytest.mark.parametrize("data", [
    "{not json",
    "[]",
    "null",
    json.dumps({"created_at": "2024-03-02T00:00:01-08:00"}),  # no assignment
    json.dumps(metadata("2024-03-02T00:00:01-08:00", due_date=None)),
    json.dumps(metadata("yesterday")),
    json.dumps(metadata("2024-03-02T00:00:01")),  # no offset: a local time of somewhere unknown
    json.dumps(metadata(1709366401)),
    json.dumps(metadata("2024-03-02T00:00:01-08:00", users=["ada@example.com"])),
    json.dumps(metadata("2024-03-02T00:00:01-08:00", users=[{"assignment": "extended"}])),
    "[" * 100_000 + "]" * 100_000,
])
def test_a_malformed_metadata_file_leaves_lateness_unknown(tmp_path, data):
    assert is_late(write_metadata(tmp_path, data)) is None


def test_without_a_metadata_file_lateness_is_unknown(tmp_path):
    assert is_late(tmp_path) is None
    (tmp_path / METADATA).write_bytes(b"\xff\xfe not utf-8")
    assert is_late(tmp_path) is None


@pytest.mark.parametrize("data, late", [
    (metadata("2024-03-02T00:00:01-08:00"), True),
    (metadata("2024-03-01T12:00:00-08:00"), False),
    ("{not json", None),
])
def test_the_graded_report_records_lateness_and_grading_goes_on_without_it(tmp_path, monkeypatch, data, late):
    monkeypatch.setattr("grader.engine.api.grade", lambda assignment, submission: sample_report())
    hand_in(tmp_path / "submission", {"mha.py": ""})
    write_metadata(tmp_path, data)
    seen = []
    monkeypatch.setattr("grader.export.gradescope.to_gradescope",
                        lambda report, visibility: seen.append(report) or to_gradescope(report, visibility))
    run(tmp_path, ASSIGNMENT_03)
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert [report.late for report in seen] == [late] and results["score"] == 10.0
    assert ("handed in after the due date" in results["output"]) is bool(late)


# ---- which file is graded


@pytest.fixture
def assignment() -> Assignment:
    return Assignment.load(ASSIGNMENT_03)


def hand_in(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("files, expected", [
    ({"mha.py": "", "notes.txt": ""}, "mha.py"),
    ({"homework3.ipynb": "", "README.md": ""}, "homework3.ipynb"),
    ({"hw/mha.py": "", "__MACOSX/hw/._mha.py": ""}, "hw/mha.py"),  # a zipped folder, from a Mac
    ({"mha.py": "", "helpers.py": ""}, "mha.py"),
    ({"a.py": "", "b.py": ""}, None),  # which one? not guessed
    ({"notes.txt": ""}, None),
    ({}, None),
])
def test_the_submission_is_the_module_or_notebook_else_the_only_source_file(tmp_path, assignment, files, expected):
    found = find_submission(hand_in(tmp_path / "submission", files), assignment)
    assert found == (tmp_path / "submission" / expected if expected else None)


def test_with_module_and_notebook_the_one_with_more_work_done_is_graded(tmp_path, assignment):
    folder = hand_in(tmp_path, {"mha.py": (ASSIGNMENT_03 / "mha.py").read_text(),
                                "mha.ipynb": notebook_text(as_submission("multihead"))})
    assert find_submission(folder, assignment) == folder / "mha.ipynb"


def test_a_link_is_picked_only_when_nothing_else_is(tmp_path, assignment):
    folder = hand_in(tmp_path / "submission", {"hw/mha.py": ""})
    (folder / "mha.py").symlink_to(tmp_path / "elsewhere.py")  # shallower than the real file
    assert find_submission(folder, assignment) == folder / "hw" / "mha.py"
    (folder / "hw" / "mha.py").unlink()
    assert find_submission(folder, assignment) == folder / "mha.py"  # graded, its report says it is a link


def test_a_crash_of_the_grader_still_writes_results_json(tmp_path, monkeypatch):
    def crash(*args, **kwargs):
        raise RuntimeError("the suite process vanished")

    monkeypatch.setattr("grader.engine.api.grade", crash)
    hand_in(tmp_path / "submission", {"mha.py": ""})
    run(tmp_path, ASSIGNMENT_03)
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert results["score"] == 0
    assert "the suite process vanished" in results["output"] and "not your fault" in results["output"]


# ---- the zip


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "autograder.zip"
    assert main(["export", "gradescope", str(ASSIGNMENT_03), "--out", str(out)]) == 0
    return out


def test_zip_holds_the_scripts_at_its_root_and_the_source_to_grade(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as archive:
        modes = {info.filename: info.external_attr >> 16 & 0o777 for info in archive.infolist()}
    assert modes["run_autograder"] == modes["setup.sh"] == 0o755
    for name in ("pyproject.toml", "README.md", "grader/cli.py", "grader/core/schema/report.v2.json",
                 "reference/multihead.py", "reference/hidden/a03/conftest.py", "reference/hidden/a03/test_multihead.py",
                 "assignments/03/assignment.toml", "assignments/03/mha.py", "assignments/course.toml"):
        assert name in modes, name
    assert not [name for name in modes if "__pycache__" in name or name.endswith(".pyc")]
    # Nothing of the package left behind (a new module or sub-package is picked up, not listed).
    assert {f"grader/{path.relative_to(GRADER_DIR).as_posix()}" for path in source_files(GRADER_DIR)} <= set(modes)


def test_zip_holds_only_the_assignments_hidden_suite_and_the_reference_modules_it_imports(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as archive:
        names = set(archive.namelist())
    reference = {name for name in names if name.startswith("reference/")}
    suite = reference_dir() / "hidden" / "a03"
    assert {f"reference/hidden/a03/{path.relative_to(suite).as_posix()}" for path in source_files(suite)} <= reference
    assert {name.split("/")[2] for name in reference if name.startswith("reference/hidden/a")} == {"a03"}
    # 03's reference (suite.toml) and what it imports, the packages and the suites' pytest configuration.
    assert {name for name in reference if not name.startswith("reference/hidden/a")} == {
        "reference/__init__.py", "reference/attention.py", "reference/multihead.py",
        "reference/hidden/__init__.py", "reference/hidden/pytest.ini"}


def test_the_reference_modules_bundled_are_those_the_suite_imports_transitively():
    def bundled(assignment_id: str) -> set[str]:
        """What the zip holds of the reference package, but the assignment's own suite."""
        return {path.relative_to(reference_dir()).as_posix() for path in
                reference_files(Assignment.load(ASSIGNMENTS / assignment_id))} - {
            f"hidden/a{assignment_id}/{path.relative_to(suite).as_posix()}"
            for suite in [reference_dir() / "hidden" / f"a{assignment_id}"] for path in source_files(suite)}

    shared = {"__init__.py", "hidden/__init__.py", "hidden/pytest.ini"}
    # 05's layers import masks, multihead and positions; masks and multihead import attention.
    assert bundled("05") == shared | {"layers.py", "masks.py", "multihead.py", "positions.py", "attention.py"}
    assert bundled("07") == shared | {"gpt.py"}
    # 02's variants build on 01's: that module of 01's suite (with its package), none of its tests.
    assert bundled("02") == shared | {"masks.py", "attention.py", "hidden/a01/__init__.py", "hidden/a01/variants.py"}


def test_each_assignments_bundled_reference_imports_on_its_own(tmp_path):
    # Every module of the suite, as the grader preloads them, and the reference suite.toml names,
    # imported from a tree holding the bundled files only: one missing fails to import, or is
    # found elsewhere (this checkout's editable install) and named.
    trees = {}
    for spec in sorted(ASSIGNMENTS.glob("*/assignment.toml")):
        assignment = Assignment.load(spec.parent)
        root = tmp_path / assignment.id
        for path in reference_files(assignment):
            (root / path.relative_to(reference_dir().parent)).parent.mkdir(parents=True, exist_ok=True)
            (root / path.relative_to(reference_dir().parent)).write_bytes(path.read_bytes())
        package = f"reference.hidden.a{assignment.id}"
        trees[str(root)] = [assignment.reference_module, package,
                            *(f"{package}.{path.stem}" for path in sorted(assignment.hidden_suite.glob("*.py"))
                              if path.stem != "__init__")]
    assert len(trees) >= 7
    script = """
import importlib, json, sys
for root, modules in json.loads(sys.argv[1]).items():
    sys.path.insert(0, root)
    for name in modules:
        importlib.import_module(name)
    loaded = [name for name in sys.modules if name.split(".")[0] == "reference"]
    assert all(sys.modules[name].__file__.startswith(root) for name in loaded), (root, loaded)
    sys.path.remove(root)
    for name in loaded:
        del sys.modules[name]
"""
    done = subprocess.run([sys.executable, "-c", script, json.dumps(trees)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_zip_is_the_same_when_built_again(autograder_zip, tmp_path):
    build_autograder(ASSIGNMENT_03, tmp_path / "again.zip")
    assert (tmp_path / "again.zip").read_bytes() == autograder_zip.read_bytes()


def test_scripts_are_valid_bash_and_setup_installs_the_cpu_torch_and_the_source(autograder_zip, tmp_path):
    with zipfile.ZipFile(autograder_zip) as archive:
        archive.extractall(tmp_path, members=["setup.sh", "run_autograder"])
    for script in ("setup.sh", "run_autograder"):
        checked = subprocess.run(["bash", "-n", str(tmp_path / script)], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr
    setup = (tmp_path / "setup.sh").read_text()
    assert "torch==2.13.0" in setup and "--index-url https://download.pytorch.org/whl/cpu" in setup
    assert 'pip" install -e "$source_dir"' in setup


def test_setup_updates_the_package_lists_before_it_installs_python(autograder_zip, tmp_path):
    # setup.sh run against stubs that log their calls: an image whose Pythons cannot make a venv.
    with zipfile.ZipFile(autograder_zip) as archive:
        archive.extractall(tmp_path / "source", members=["setup.sh"])
    stubs, log = tmp_path / "stubs", tmp_path / "calls.log"
    stubs.mkdir()
    stub = {
        "apt-get": f'echo "apt-get $* (DEBIAN_FRONTEND=$DEBIAN_FRONTEND)" >> {log}',
        "pip-stub": f'echo "pip $*" >> {log}',
        # No ensurepip; `-m venv DIR` makes a venv whose pip logs what it would install.
        "python3.11": f'[ "$1" = -m ] || exit 1\nmkdir -p "$3/bin" && cp {stubs / "pip-stub"} "$3/bin/pip"',
        "python3.12": "exit 1",
        "python3.13": "exit 1",
    }
    for name, body in stub.items():
        (stubs / name).write_text(f"#!/bin/sh\n{body}\n")
        (stubs / name).chmod(0o755)
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "AUTOGRADER_ROOT": str(tmp_path)}
    done = subprocess.run(["bash", str(tmp_path / "source" / "setup.sh")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert calls[:2] == ["apt-get update (DEBIAN_FRONTEND=noninteractive)",
                         "apt-get install -y python3.11 python3.11-venv (DEBIAN_FRONTEND=noninteractive)"]
    assert calls[-1] == f"pip install -e {tmp_path / 'source'}"


def test_bundled_source_is_an_installable_project(autograder_zip, tmp_path):
    # What setup.sh's `pip install -e` does first, offline: read pyproject.toml and find the packages.
    with zipfile.ZipFile(autograder_zip) as archive:
        archive.extractall(tmp_path / "source")
    prepare = ("import sys; from setuptools import build_meta; "
               "build_meta.prepare_metadata_for_build_editable(sys.argv[1])")
    done = subprocess.run([sys.executable, "-c", prepare, str(tmp_path)], cwd=tmp_path / "source",
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    [top_level] = tmp_path.glob("*.dist-info/top_level.txt")
    assert set(top_level.read_text().split()) == {"grader", "reference"}


def test_unknown_assignment_is_a_usage_error(tmp_path):
    assert main(["export", "gradescope", str(tmp_path), "--out", str(tmp_path / "a.zip")]) == 2
    assert not (tmp_path / "a.zip").exists()


@pytest.mark.parametrize("flag", ["--visibility", "--stdout-visibility"])
def test_an_unknown_visibility_is_a_usage_error_that_names_the_choices(tmp_path, capsys, flag):
    with pytest.raises(SystemExit) as exited:
        main(["export", "gradescope", str(ASSIGNMENT_03), "--out", str(tmp_path / "a.zip"), flag, "public"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "invalid choice: 'public'" in error and "after_published" in error and "Traceback" not in error
    assert not (tmp_path / "a.zip").exists()
    with pytest.raises(SystemExit) as exited:  # run_autograder's side refuses it the same way
        run_main(["--root", str(tmp_path), "--assignment", str(ASSIGNMENT_03), flag, "public"])
    assert exited.value.code == 2 and "invalid choice: 'public'" in capsys.readouterr().err


# ---- run_autograder, as Gradescope runs it


def unpacked(autograder_zip: Path, root: Path):
    """run(files handed in) -> results.json, from the zip extracted into a fake /autograder at ``root``."""
    with zipfile.ZipFile(autograder_zip) as archive:
        archive.extractall(root / "source")
    (root / "source" / "run_autograder").chmod(0o755)  # zipfile does not restore modes

    def run_autograder(files: dict[str, str], python: str = sys.executable) -> dict:
        hand_in(root / "submission", files)
        (root / "results" / "results.json").unlink(missing_ok=True)  # each run on Gradescope starts without one
        env = {"PATH": "/usr/bin:/bin", "AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": python}
        done = subprocess.run([str(root / "source" / "run_autograder")], env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads((root / "results" / "results.json").read_text())

    return run_autograder


@pytest.fixture
def autograder(autograder_zip, tmp_path):
    return unpacked(autograder_zip, tmp_path)


@pytest.mark.slow
def test_reference_solution_gets_full_marks_from_the_bundled_grader(autograder, tmp_path):
    results = autograder({"mha.py": as_submission("multihead")})
    assert [test["status"] for test in results["tests"]] == ["passed"] * 3
    assert results["score"] == sum(test["max_score"] for test in results["tests"]) > 0
    # Graded by the zip's copy, not this checkout's: the zip alone must be able to grade.
    for package in ("grader", "reference"):
        locate = f"import importlib.util; print(importlib.util.find_spec({package!r}).origin)"
        found = subprocess.run([sys.executable, "-c", locate], cwd=tmp_path / "source", capture_output=True,
                               text=True, check=True)
        assert Path(found.stdout.strip()).is_relative_to(tmp_path / "source")


@pytest.mark.slow
def test_stub_submission_scores_zero_with_hints(autograder):
    results = autograder({"mha.py": (ASSIGNMENT_03 / "mha.py").read_text()})
    assert results["score"] == 0
    assert all(test["status"] == "failed" and "not implemented" in test["output"] for test in results["tests"])


@pytest.mark.slow
def test_missing_submission_scores_zero_and_says_what_to_upload(autograder):
    results = autograder({"notes.txt": "I could not finish"})
    assert results["score"] == 0 and results["tests"] == []
    assert "mha.py" in results["output"] and "notes.txt" in results["output"]


def test_when_python_cannot_start_run_autograder_still_writes_results(autograder):
    results = autograder({"mha.py": ""}, python="/nonexistent/python")
    assert results["score"] == 0 and "not your fault" in results["output"]


def test_the_visibility_chosen_at_export_reaches_results_json(tmp_path):
    out = tmp_path / "autograder.zip"
    assert main(["export", "gradescope", str(ASSIGNMENT_03), "--out", str(out),
                 "--visibility", "after_published", "--stdout-visibility", "after_due_date"]) == 0
    autograder = unpacked(out, tmp_path)
    # No submission: graded without the engine, quick; the same results.json fields as a graded one.
    graded = autograder({"notes.txt": "I could not finish"})
    cannot_start = autograder({}, python="/nonexistent/python")
    for results in (graded, cannot_start):
        assert results["visibility"] == "after_published" and results["stdout_visibility"] == "after_due_date"
