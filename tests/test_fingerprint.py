"""What decides a grade, as a report's fingerprint records it: every file grading may read."""

from __future__ import annotations

import shutil

import pytest

from grader.core import assignment as assignment_module
from grader.core import fingerprint
from grader.core.assignment import Assignment
from grader.core.fingerprint import Fingerprint
from grader.engine.options import GradeOptions
from tests.conftest import ASSIGNMENT_03, ROOT


@pytest.fixture
def reference(tmp_path, monkeypatch):
    """A copy of the reference package, where grading looks for it."""
    copy = tmp_path / "reference"
    shutil.copytree(ROOT / "reference", copy, ignore=shutil.ignore_patterns("__pycache__"))
    for module in (assignment_module, fingerprint):
        monkeypatch.setattr(module, "reference_dir", lambda: copy)
    return copy


@pytest.mark.parametrize("edit, changed", [
    # pytest loads a conftest.py beside the suites without any import naming it.
    (lambda ref: (ref / "hidden/conftest.py").write_text("def pytest_collection_modifyitems(items):\n    pass\n"),
     ["reference changed"]),
    # A module the suite reaches through a relative import, or import_module.
    (lambda ref: (ref / "attention.py").write_text((ref / "attention.py").read_text() + "\n# edited\n"),
     ["reference changed"]),
    (lambda ref: (ref / "hidden/a03/test_multihead.py").write_text(
        (ref / "hidden/a03/test_multihead.py").read_text().replace("points=3", "points=4", 1)),
     ["suite changed"]),
])
def test_any_file_that_grading_may_read_is_in_the_fingerprint(reference, edit, changed):
    assignment, options = Assignment.load(ASSIGNMENT_03), GradeOptions(device="cpu")
    before = Fingerprint.of(assignment, options).to_dict()
    edit(reference)
    assert Fingerprint.of(assignment, options).changed(before) == changed


def test_the_options_that_decide_a_grade_are_in_the_fingerprint():
    assignment = Assignment.load(ASSIGNMENT_03)
    before = Fingerprint.of(assignment, GradeOptions(device="cpu")).to_dict()
    assert Fingerprint.of(assignment, GradeOptions(device="cpu")).changed(before) == []
    assert Fingerprint.of(assignment, GradeOptions(device="cpu", sandbox="off")).changed(before) == ["options changed"]


def test_another_torch_regrades(monkeypatch):
    assignment, options = Assignment.load(ASSIGNMENT_03), GradeOptions(device="cpu")
    before = Fingerprint.of(assignment, options).to_dict()
    installed = fingerprint.metadata.version
    monkeypatch.setattr(fingerprint.metadata, "version",
                        lambda package: "9.9.9" if package == "torch" else installed(package))
    assert Fingerprint.of(assignment, options).changed(before) == ["grader changed"]
