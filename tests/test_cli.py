"""The `grade` command as users run it: a real process, its table, its JSON and exit codes."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from rich.console import Console

from grader.core.report import SCHEMA_VERSION
from tests.conftest import ASSIGNMENT_03, ROOT

pytestmark = pytest.mark.slow


def grade(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300, env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"})


def test_example_submission_prints_the_table_and_writes_the_report(tmp_path):
    out = tmp_path / "report.json"
    result = grade("assignments/03", "--submission", "examples/03/submission.py", "--json", str(out))
    assert result.returncode == 0, result.stderr
    for part_id in ("split_heads", "combine_heads", "MultiHeadAttention", "total"):
        assert part_id in result.stdout
    assert "sqrt(d_model)" in result.stdout  # the example's mistake is named
    report = json.loads(out.read_text())
    assert report["schema_version"] == SCHEMA_VERSION and report["status"] == "graded"
    assert 0 < report["score"] < report["max_score"]


def test_working_copy_is_graded_when_no_submission_is_given(tmp_path):
    shutil.copytree(ASSIGNMENT_03, tmp_path / "03")
    result = grade(str(tmp_path / "03"), "--quiet", "--json", str(tmp_path / "r.json"))
    assert result.returncode == 0 and result.stdout == ""
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["score"] == 0 and report["submission"].endswith("mha.py")


def test_notebook_with_more_work_done_is_the_working_copy(tmp_path):
    shutil.copytree(ASSIGNMENT_03, tmp_path / "03")
    path = tmp_path / "03" / "mha.ipynb"
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if c.source.startswith("def combine_heads"))
    cell.source = "def combine_heads(x):\n    return x.transpose(1, 2).flatten(2)\n"
    nbformat.write(notebook, path)
    result = grade(str(tmp_path / "03"), "--quiet", "--json", str(tmp_path / "r.json"))
    report = json.loads((tmp_path / "r.json").read_text())
    assert result.returncode == 0 and report["submission"].endswith("mha.ipynb")
    assert next(p for p in report["parts"] if p["id"] == "combine_heads")["score"] > 0


@pytest.mark.parametrize("args, message", [
    (("assignments/99",), "not an assignment"),
    (("assignments/03", "--submission", "no/such/file.py"), "no such submission"),
    (("assignments/03", "--device", "gpu"), "invalid choice"),
])
def test_bad_arguments_exit_2_with_a_message(args, message):
    result = grade(*args)
    assert result.returncode == 2 and message in result.stderr


def test_ungradable_submission_still_exits_0_and_says_why(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def split_heads(x, h):\n    return x.view(\n")
    result = grade("assignments/03", "--submission", str(broken))
    assert result.returncode == 0
    assert "Not gradable" in result.stdout and "syntax error" in result.stdout


def test_notebook_check_detects_a_stale_notebook(tmp_path):
    shutil.copytree(ASSIGNMENT_03, tmp_path / "03")
    assert grade("notebook", str(tmp_path / "03"), "--check").returncode == 0
    with open(tmp_path / "03" / "mha.py", "a") as module:
        module.write("\n\ndef helper():\n    pass\n")
    stale = grade("notebook", str(tmp_path / "03"), "--check")
    assert stale.returncode == 1 and "out of date" in stale.stderr
    assert grade("notebook", str(tmp_path / "03")).returncode == 0
    assert grade("notebook", str(tmp_path / "03"), "--check").returncode == 0


def test_sandbox_mode_is_reported(tmp_path):
    out = tmp_path / "r.json"
    result = grade("assignments/03", "--submission", "examples/03/submission.py", "--sandbox", "off",
                   "--json", str(out), "--quiet")
    assert result.returncode == 0
    assert not [layer for layer in json.loads(out.read_text())["sandbox"] if "landlock" in layer or "namespace" in layer]


def test_a_submission_path_that_looks_like_markup_is_graded_and_shown_as_text(tmp_path):
    odd = tmp_path / "hw[" / "].py"  # grade --submission 'hw[/].py'
    odd.parent.mkdir()
    shutil.copy(ROOT / "examples/03/submission.py", odd)
    result = grade(str(ASSIGNMENT_03), "--submission", "hw[/].py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "hw[/].py" in result.stdout and "MultiHeadAttention" in result.stdout
    missing = grade("assignments/03", "--submission", str(tmp_path / "[bold]x[/bold].py"))
    assert missing.returncode == 2 and "[bold]x[/bold].py" in missing.stderr


def test_an_option_the_library_refuses_is_named_by_its_flag(tmp_path):
    result = grade("assignments/03", "--submission", "examples/03/submission.py", "--device", "cuda")
    if "CUDA was asked for" not in result.stderr:
        pytest.skip("CUDA is available here")
    assert result.returncode == 2 and "--device: CUDA was asked for" in result.stderr


def test_a_batch_of_folders_named_like_markup_is_graded_and_reported_as_text(tmp_path):
    folder = tmp_path / "[bold]x[/bold]"
    (folder / "[red]bob[/]").mkdir(parents=True)
    (folder / "[red]bob[/]" / "notes.txt").write_text("not a submission")
    out = tmp_path / "[bold]results[/bold]"
    batch = subprocess.run([sys.executable, "-m", "grader.cli", "batch", "assignments/03", str(folder),
                            "--out", str(out), "--jobs", "1", "--device", "cpu"],
                           capture_output=True, text=True, cwd=ROOT, timeout=300,
                           env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "TTY_COMPATIBLE": "1"})
    assert batch.returncode == 0, batch.stderr
    assert "Assignment 03: 1 submissions" in batch.stdout  # the terminal's summary table
    report = grade("report", str(out))
    assert report.returncode == 0, report.stderr
    assert f"wrote {out / 'report.html'}" in " ".join(report.stderr.split())


def test_the_batch_progress_bar_labels_its_columns_and_names_the_file_graded_longest():
    from grader.cli import _BatchProgress

    console = Console(file=io.StringIO(), force_terminal=True, width=160)
    progress = _BatchProgress(console)
    progress.on_start(3, 0)
    progress.on_begin(Path("ada/mha.py"))
    progress.on_begin(Path("bob/\x1b]52;c;evil\x07.py"))  # a name is the student's: no escape reaches the terminal
    shown = Console(file=io.StringIO(), width=160, record=True)
    shown.print(progress.get_renderable())
    text = shown.export_text()
    assert all(label in text for label in ("graded", "0/3", "elapsed", "left", "now: ada/mha.py"))
    progress.on_report(Path("ada/mha.py"), None)
    shown.print(progress.get_renderable())
    text = shown.export_text()
    assert "1/3" in text and "s each" in text and "now: bob/?]52;c;evil?.py" in text and "\x1b]52" not in text
