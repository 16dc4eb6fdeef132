"""Hostile files, as opposed to hostile code: what the trusted grader process reads of a submission.

The grader reads every submission itself, before any sandbox exists: to hash it (batch grading
skips unchanged files), to pick it (Gradescope, and the working copy), to parse it, and to ship it
(the Ray driver). Whatever it reads, it reads with its own rights and pays for in its own time and
memory. Each test hands in a file that attacks that reading, through an entry point instructors
use (`grade`, `grade batch` with either executor, Gradescope's run_autograder), and checks that
the file gets an honest ungradable report without being followed or read:

- a symbolic link to the reference module (what zip and tar archives and git repositories unpack
  links to): followed, it scores full marks;
- a link to a folder in a batch: followed, its files are graded as the student's; skipped, the
  student gets no report at all;
- a link beside the real file on Gradescope: picked, it is graded instead of the real file;
- a 16 GiB sparse file: read, it costs the grader a minute (hashed twice) and costs no disk;
- a notebook of countless empty markdown cells: validated cell by cell by nbformat, it cost a
  batch over a minute and gigabytes of memory.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import sys
import types
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

import reference
from grader.cli import main as grade_cli
from grader.core.assignment import Assignment
from grader.core.report import GradeReport, Status
from grader.engine.api import grade
from grader.engine.batch import grade_batch, report_path
from grader.export import gradescope
from tests.conftest import ASSIGNMENTS, TEST_LIMITS, assert_valid, bytes_read

pytestmark = pytest.mark.slow
ASSIGNMENT_01 = ASSIGNMENTS / "01"
REFERENCE_MODULE = Path(reference.__file__).parent / "attention.py"  # solves assignment 01 as it is
HUGE = 16 * 2**30  # sparse: costs no disk
READ_BUDGET = 2**30  # what grading a few small files may read in all, grader and suite processes included


def hand_in_link(folder: Path, target: Path, name: str = "attention.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).symlink_to(target)
    return folder / name


def hand_in_sparse(folder: Path, size: int, name: str = "attention.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("def softmax(x):\n    return x\n")
    os.truncate(folder / name, size)
    return folder / name


def batch(folder: Path, out: Path) -> dict[str, GradeReport]:
    """``grade batch`` on assignment 01, as an instructor runs it; the reports by relative path."""
    assert grade_cli(["batch", str(ASSIGNMENT_01), str(folder), "--out", str(out), "--jobs", "1",
                      "--device", "cpu", "--timeout", "5"]) == 0
    with (out / "grades.csv").open(newline="") as gradebook:
        relatives = [Path(row["submission"]) for row in csv.DictReader(gradebook)]
    return {relative.as_posix(): GradeReport.from_dict(json.loads(report_path(out, relative).read_text()))
            for relative in relatives}


def assert_refused_as_link(report: GradeReport) -> None:
    assert_valid(report)
    assert report.status == Status.UNGRADABLE, (report.status, report.score, report.error)
    assert report.score == 0 and report.max_score > 0
    assert "link" in report.error and "submit the file itself" in report.error, report.error


def assert_refused_as_too_large(report: GradeReport) -> None:
    assert_valid(report)
    assert report.status == Status.UNGRADABLE and "too large" in report.error, (report.status, report.error)
    assert report.submission_sha256 == ""  # nothing was read, so nothing was hashed


# ---- links ---------------------------------------------------------------------------------


def test_a_link_to_the_reference_module_is_ungradable_through_grade(tmp_path):
    copy = tmp_path / "copy" / "attention.py"
    copy.parent.mkdir()
    shutil.copy(REFERENCE_MODULE, copy)
    control = grade(ASSIGNMENT_01, copy, device="cpu", limits=TEST_LIMITS)
    assert control.score == control.max_score  # what following the link would earn
    report = grade(ASSIGNMENT_01, hand_in_link(tmp_path / "student", REFERENCE_MODULE), device="cpu",
                   limits=TEST_LIMITS)
    assert_refused_as_link(report)


def test_a_link_to_the_reference_module_is_ungradable_through_grade_batch(tmp_path):
    folder = tmp_path / "submissions"
    hand_in_link(folder / "alice", REFERENCE_MODULE)
    reports = batch(folder, tmp_path / "results")
    assert list(reports) == ["alice/attention.py"]
    assert_refused_as_link(reports["alice/attention.py"])


def test_a_linked_folder_in_a_batch_gets_its_own_ungradable_report(tmp_path):
    """Followed, the reference package would be graded as carol's; skipped, carol would get no report."""
    folder = tmp_path / "submissions"
    hand_in_link(folder, REFERENCE_MODULE.parent, name="carol")
    reports = batch(folder, tmp_path / "results")
    assert list(reports) == ["carol"]
    assert_refused_as_link(reports["carol"])


def test_a_link_to_the_reference_module_earns_nothing_on_gradescope(tmp_path):
    hand_in_link(tmp_path / "submission", REFERENCE_MODULE)
    gradescope.run(tmp_path, ASSIGNMENT_01)
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert results["score"] == 0 and results["tests"], results
    assert "link" in results["output"] and "submit the file itself" in results["output"], results["output"]


def test_a_link_beside_the_real_file_is_not_picked_on_gradescope(tmp_path):
    """The link, a notebook with no stubs left, would win against the stub module if it were read."""
    notebook = tmp_path / "elsewhere" / "attention.ipynb"
    notebook.parent.mkdir()
    notebook.write_text(nbformat.writes(new_notebook(cells=[new_code_cell(REFERENCE_MODULE.read_text())])))
    folder = tmp_path / "submission"
    hand_in_link(folder, notebook, name="attention.ipynb")
    shutil.copy(ASSIGNMENT_01 / "attention.py", folder / "attention.py")  # the stubs: all still to do
    assert gradescope.find_submission(folder, Assignment.load(ASSIGNMENT_01)) == folder / "attention.py"
    gradescope.run(tmp_path, ASSIGNMENT_01)
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert results["score"] == 0 and "not implemented" in json.dumps(results["tests"]), results


# ---- huge files ----------------------------------------------------------------------------


def test_a_huge_sparse_file_is_ungradable_unread_through_grade(tmp_path):
    path = hand_in_sparse(tmp_path, HUGE)
    before = bytes_read()
    report = grade(ASSIGNMENT_01, path, device="cpu", limits=TEST_LIMITS)
    assert bytes_read() - before < READ_BUDGET, "the grader read the 16 GiB file"
    assert_refused_as_too_large(report)


def test_a_huge_sparse_file_is_ungradable_unread_through_grade_batch(tmp_path):
    folder = tmp_path / "submissions"
    hand_in_sparse(folder / "alice", HUGE)
    before = bytes_read()
    reports = batch(folder, tmp_path / "results")
    assert bytes_read() - before < READ_BUDGET, "the grader read the 16 GiB file"
    assert_refused_as_too_large(reports["alice/attention.py"])


def test_a_huge_sparse_file_is_ungradable_unread_on_gradescope(tmp_path):
    # 2 GiB, not 16: picking the working copy once read it whole into memory.
    hand_in_sparse(tmp_path / "submission", 2 * 2**30)
    before = bytes_read()
    gradescope.run(tmp_path, ASSIGNMENT_01)
    assert bytes_read() - before < READ_BUDGET, "the grader read the 2 GiB file"
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert results["score"] == 0 and results["tests"] and "too large" in results["output"], results


# ---- the Ray executor's driver ---------------------------------------------------------------


class _Ref:
    def __init__(self, value: dict):
        self.value = value


def _fake_ray() -> types.ModuleType:
    """Just enough of Ray for the driver: a cluster already up, whose tasks run at once, here."""
    ray = types.ModuleType("ray")
    ray.exceptions = types.SimpleNamespace(RayError=RuntimeError)
    ray.is_initialized = lambda: True
    ray.remote = lambda **options: lambda function: types.SimpleNamespace(remote=lambda *args: _Ref(function(*args)))
    ray.wait = lambda refs, num_returns: (refs[:num_returns], refs[num_returns:])
    ray.get = lambda ref: ref.value
    ray.cancel = lambda ref, force: None
    return ray


def test_the_ray_driver_neither_follows_links_nor_reads_huge_files(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", _fake_ray())
    folder = tmp_path / "submissions"
    hand_in_link(folder / "alice", REFERENCE_MODULE)
    # 2 GiB, not 16: a driver that reads it holds it all in memory at once.
    hand_in_sparse(folder / "bob", 2 * 2**30)
    before = bytes_read()
    result = grade_batch(ASSIGNMENT_01, folder, tmp_path / "results", jobs=1, device="cpu", limits=TEST_LIMITS,
                         executor="ray")
    assert bytes_read() - before < READ_BUDGET, "the driver read the 2 GiB file"
    reports = {path.as_posix(): report for path, report in result.reports.items()}
    assert_refused_as_link(reports["alice/attention.py"])
    assert_refused_as_too_large(reports["bob/attention.py"])


# ---- notebooks -----------------------------------------------------------------------------


def test_a_notebook_of_countless_markdown_cells_is_refused_before_nbformat_sees_it(tmp_path, monkeypatch):
    handed_to_nbformat = []

    def spy(*args, **kwargs):
        handed_to_nbformat.append(args)
        raise AssertionError("nbformat was handed the notebook")

    monkeypatch.setattr(nbformat, "reads", spy)
    monkeypatch.setattr(nbformat, "validate", spy)
    markdown = {"cell_type": "markdown", "metadata": {}, "source": ""}
    code = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": REFERENCE_MODULE.read_text()}
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [markdown] * 200_000 + [code]}
    path = tmp_path / "attention.ipynb"
    path.write_text(json.dumps(notebook))  # about 11 MiB: under the size limit, so only the cells can stop it
    report = grade(ASSIGNMENT_01, path, device="cpu", limits=TEST_LIMITS)
    assert_valid(report)
    assert report.status == Status.UNGRADABLE and "too many cells" in report.error, (report.status, report.error)
    assert handed_to_nbformat == []
