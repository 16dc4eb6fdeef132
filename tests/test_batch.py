"""Batch grading: every file accounted for, reports as `grade` writes them, resumable."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from grader.cli import main
from grader.core.report import SCHEMA_VERSION, GradeReport, Status
from grader.engine.api import grade
from grader.engine.batch import grade_batch
from grader.results import folder
from grader.results.class_stats import student_statistics
from grader.results.folder import ResultsError, read_results, report_path
from grader.results.submissions import discover
from grader.sandbox import cgroups, isolation, landlock
from grader.sandbox.cgroups import SubmissionCgroup
from grader.sandbox.zygote import ZygoteServer
from reference import as_submission
from tests.conftest import ASSIGNMENT_03, ROOT, TEST_LIMITS, alive, descendants

pytestmark = pytest.mark.slow
REFERENCE = as_submission("multihead")


def run(folder: Path, out: Path, **kwargs):
    return grade_batch(ASSIGNMENT_03, folder, out, **{"jobs": 2, "device": "cpu", "limits": TEST_LIMITS, **kwargs})


def test_every_file_gets_a_report_and_same_names_stay_apart(class_folder, tmp_path):
    out = tmp_path / "results"
    result = run(class_folder, out)
    expected = ["alice/mha.py", "bob/mha.py", "carol/mha.ipynb", "dave/mha.py", "erin/notes.txt"]
    assert [p.as_posix() for p in result.reports] == expected
    assert all(report_path(out, Path(name)).is_file() for name in expected)
    scores = {p.as_posix(): r.score for p, r in result.reports.items()}
    assert scores["alice/mha.py"] == scores["carol/mha.ipynb"] == result.reports[Path("alice/mha.py")].max_score
    assert 0 < scores["bob/mha.py"] < scores["alice/mha.py"]  # graded alongside alice: no interference
    statuses = {p.as_posix(): r.status for p, r in result.reports.items()}
    assert statuses["dave/mha.py"] == statuses["erin/notes.txt"] == "ungradable"
    assert "not a submission" in result.reports[Path("erin/notes.txt")].error


def test_batch_report_is_what_grade_writes(class_folder, tmp_path):
    out = tmp_path / "results"
    run(class_folder, out)
    batch = json.loads(report_path(out, Path("bob/mha.py")).read_text())
    single = grade(ASSIGNMENT_03, class_folder / "bob/mha.py", device="cpu", limits=TEST_LIMITS).to_dict()
    for report in (batch, single):
        report.pop("duration_s")
    assert batch == single


def test_one_call_writes_the_whole_results_folder_computing_the_numbers_once(class_folder, tmp_path, monkeypatch):
    computed = []
    monkeypatch.setattr(folder, "student_statistics", lambda *args: computed.append(args) or student_statistics(*args))
    out = tmp_path / "results"
    summary = run(class_folder, out).summary
    assert len(computed) == 1  # summary, gradebooks, feedback pages and class report share them
    written = {path.relative_to(out).as_posix() for path in out.rglob("*") if path.is_file()}
    assert {"summary.json", "grades.csv", "canvas.csv", "gradescope.csv", "report.html",
            "feedback/bob.html", "feedback/bob.md"} <= written
    assert len([name for name in written if name.startswith("reports/")]) == 5
    assert "feedback/bob.html" in (out / "report.html").read_text()  # the class report links each page
    assert json.loads((out / "summary.json").read_text()) == summary
    assert read_results(out).statistics == run(class_folder, out).class_results.statistics  # read back: the same


def test_summary_and_gradebook(class_folder, tmp_path):
    out = tmp_path / "results"
    summary = run(class_folder, out).summary
    assert json.loads((out / "summary.json").read_text()) == summary
    assert summary["submissions"] == 5
    assert summary["counts"] == {"graded": 3, "ungradable": 2, "grader_error": 0}
    assert summary["parts"]["MultiHeadAttention"]["max"] == summary["parts"]["MultiHeadAttention"]["max_score"]
    assert summary["parts"]["split_heads"]["median"] == summary["parts"]["split_heads"]["max_score"]
    assert summary["hints"][0]["count"] == 1 and "sqrt(d_model)" in summary["hints"][0]["hint"]
    rows = list(csv.DictReader((out / "grades.csv").open()))
    assert [row["student"] for row in rows] == ["alice", "bob", "carol", "dave", "erin"]
    bob = rows[1]
    assert bob["submission"] == "bob/mha.py" and "sqrt(d_model)" in bob["hint"]
    assert float(bob["score"]) == float(bob["split_heads"]) + float(bob["combine_heads"]) + float(bob["MultiHeadAttention"])


def test_rerun_skips_unchanged_files_and_regrades_changed_ones(class_folder, tmp_path):
    out = tmp_path / "results"
    run(class_folder, out)
    again = run(class_folder, out)
    assert (again.graded, again.skipped) == (0, 5)
    (class_folder / "bob/mha.py").write_text(REFERENCE)
    changed = run(class_folder, out)
    assert (changed.graded, changed.skipped) == (1, 4)
    assert changed.reports[Path("bob/mha.py")].score == changed.reports[Path("bob/mha.py")].max_score
    assert run(class_folder, out, force=True).graded == 5


def test_interrupt_keeps_finished_reports_and_leaves_no_process(class_folder, tmp_path):
    out = tmp_path / "results"

    def interrupt(path, report):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(class_folder, out, on_report=interrupt)
    written = [p for p in (out / "reports").rglob("*.json")]
    assert len(written) == 1 and json.loads(written[0].read_text())["schema_version"] == SCHEMA_VERSION
    # Every forked process was reaped (a zombie would still be listed); the zygote server stays.
    assert descendants(os.getpid(), depth=1) == [ZygoteServer.shared().pid]
    resumed = run(class_folder, out)
    assert (resumed.graded, resumed.skipped) == (4, 1)


def test_discover_skips_hidden_files_only(tmp_path):
    for name in ("a.py", "sub/b.ipynb", ".hidden.py", ".git/config", "sub/.DS_Store", "c.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    assert [p.as_posix() for p in discover(tmp_path)] == ["a.py", "c.txt", "sub/b.ipynb"]


def test_discover_lists_links_as_they_are_never_following_them(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "mha.py").write_text("x")
    for name, target in {"to-file.py": "real/mha.py", "to-folder": "real", "dangling.py": "nowhere",
                         ".hidden-link": "real"}.items():
        (tmp_path / name).symlink_to(tmp_path / target)
    assert [p.as_posix() for p in discover(tmp_path)] == ["dangling.py", "real/mha.py", "to-file.py", "to-folder"]


def test_cli_batch_prints_a_json_summary_when_not_a_terminal(class_folder, tmp_path):
    result = subprocess.run([sys.executable, "-m", "grader.cli", "batch", "assignments/03", str(class_folder),
                             "--out", str(tmp_path / "r"), "--jobs", "2", "--device", "cpu"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["submissions"] == 5 and (tmp_path / "r" / "grades.csv").is_file()


def test_a_students_many_copies_cost_the_batch_one_grading_unless_all_files_are_asked_for(class_folder, tmp_path):
    # One student handed in twelve copies; each used to be graded, and the batch took twelve times as long.
    copies = [f"mallory/mha ({index}).py" for index in range(1, 12)]
    (class_folder / "mallory").mkdir()
    for name in copies:
        (class_folder / name).write_text(REFERENCE)
    (class_folder / "mallory/mha.py").write_text(REFERENCE)
    out = tmp_path / "results"
    argv = ["batch", str(ASSIGNMENT_03), str(class_folder), "--out", str(out), "--jobs", "2", "--device", "cpu",
            "--timeout", "5"]
    assert main(argv) == 0
    reports = {path.name for path in (out / "reports").iterdir()}
    assert reports == {report_path(out, Path(name)).name for name in
                       ("alice/mha.py", "bob/mha.py", "carol/mha.ipynb", "dave/mha.py", "erin/notes.txt", "mallory/mha.py")}
    summary = json.loads((out / "summary.json").read_text())
    mallory = next(entry for entry in summary["gradebook"] if entry["student"] == "mallory")
    assert mallory["submission"] == "mallory/mha.py" and mallory["not_graded"] == sorted(copies)
    assert summary["not_graded"] == 11 and summary["submissions"] == 6 and summary["also_handed_in"] == 0
    row = next(row for row in csv.DictReader((out / "grades.csv").open()) if row["student"] == "mallory")
    assert row["status"] == "graded" and row["other_files"].startswith("mallory/mha (1).py not graded; ")
    again = run(class_folder, out)  # other limits than the command's: every file is graded again
    assert again.summary["regraded"] == {"options changed": 6}
    assert read_results(out).statistics == again.class_results.statistics  # the class report counts the same

    assert main([*argv, "--all-files"]) == 0  # the eleven others are graded too, and counted apart
    summary = json.loads((out / "summary.json").read_text())
    assert len(list((out / "reports").iterdir())) == 6 + 11
    assert summary["not_graded"] == 0 and summary["also_handed_in"] == 11 and summary["submissions"] == 6
    assert main(argv) == 0 and len(list((out / "reports").iterdir())) == 6  # and set aside again
    assert len(list((out / "removed").iterdir())) == 11


def test_a_class_with_duplicates_strays_and_a_roster_gives_one_row_per_student(class_folder, tmp_path, capsys):
    (class_folder / "bob/mha.ipynb").write_text((ASSIGNMENT_03 / "mha.ipynb").read_text())  # the stubs: more work left
    (class_folder / "stray.py").write_text("print('who am I?')\n")
    roster = tmp_path / "roster.csv"
    roster.write_text("student,path,name,id,sis_user_id,email\n"
                      "alice,,Alice A,11,A1,alice@uni.edu\nbob,,Bob B,12,B2,\ncarol,,Carol C,13,,\n"
                      "dave,,Dave D,14,,\nerin,,Erin E,15,,\nzack,,Zack Z,16,Z6,\n")
    out = tmp_path / "results"
    argv = ["batch", str(ASSIGNMENT_03), str(class_folder), "--out", str(out), "--roster", str(roster),
            "--jobs", "2", "--device", "cpu", "--timeout", "5"]
    assert main(argv) == 0
    rows = {row["student"]: row for row in csv.DictReader((out / "grades.csv").open())}
    assert list(rows) == ["alice", "bob", "carol", "dave", "erin", "zack", "stray"]
    assert rows["bob"]["submission"] == "bob/mha.py" and rows["bob"]["other_files"] == "bob/mha.ipynb not graded"
    assert rows["zack"]["status"] == "missing" and rows["zack"]["hint"] == "no submission"
    assert rows["erin"]["status"] == "ungradable" and "not a submission" in rows["erin"]["hint"]
    assert "not on the roster" in rows["stray"]["note"]
    canvas = list(csv.reader((out / "canvas.csv").open()))
    assert canvas[1][0] == "Points Possible" and len(canvas) == 2 + 6  # every student on the roster, none else
    assert {line[1]: line[-1] for line in canvas[2:]}["16"] == ""  # zack handed in nothing: blank (--missing blank)
    summary = json.loads(capsys.readouterr().out)
    assert summary["students"]["count"] == 7 and summary["students"]["missing"] == 1
    assert summary["students"]["not_on_roster"] == 1 and summary["students"]["mean_score"] < summary["score"]["mean"]
    assert main(argv[:-6] + ["--roster", str(tmp_path / "absent.csv")]) == 2  # a clear error, nothing graded


def test_reports_of_a_removed_student_leave_every_count(class_folder, tmp_path):
    out = tmp_path / "results"
    run(class_folder, out)
    shutil.rmtree(class_folder / "erin")
    result = run(class_folder, out)
    summary = result.summary
    assert summary["submissions"] == 4 and [path.parent.name for path in result.removed] == ["removed"]
    assert read_results(out).statistics.submissions == 4
    assert len(list(csv.DictReader((out / "grades.csv").open()))) == 4


def test_killing_the_grader_leaves_no_process_behind(class_folder, tmp_path):
    # A slow class, so the kill lands while suites and student children are running.
    for index in range(4):
        (class_folder / f"slow{index}.py").write_text("import time\ntime.sleep(60)\n")
    grader = subprocess.Popen([sys.executable, "-m", "grader.cli", "batch", "assignments/03", str(class_folder),
                               "--out", str(tmp_path / "r"), "--jobs", "2", "--device", "cpu"],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    # Until a submission's cgroup holds processes: its zygote and a child are running (a busy
    # machine takes longer to get there than a fixed sleep would wait).
    deadline = time.monotonic() + (120 if cgroups.available() else 4)
    while not any(cgroup.processes() for cgroup in SubmissionCgroup.existing(f"submission-{grader.pid}-*")) \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    running = descendants(grader.pid)
    assert running, "nothing was running when the grader was killed"
    grader.kill()
    grader.wait()
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in running) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in running if alive(pid)]
    # What it could not remove (scratch folders, cgroups) the next grader removes.
    subprocess.run([sys.executable, "-m", "grader.cli", "assignments/03", "--submission", "examples/03/submission.py",
                    "--device", "cpu", "-q"], cwd=ROOT, check=True, timeout=120)
    left = [*Path(tempfile.gettempdir()).glob(f"submission-{grader.pid}-*"),
            *(path for cgroup in SubmissionCgroup.existing(f"submission-{grader.pid}-*") for path in cgroup.directories)]
    assert left == []


# ---- a report is reused only while nothing that decides it has changed ------------------------


def test_other_options_regrade_every_report_keep_the_old_ones_and_say_why(class_folder, tmp_path):
    out = tmp_path / "results"
    first = run(class_folder, out)
    assert first.summary["regraded"] == {} and first.graded == 5
    assert run(class_folder, out).graded == 0  # nothing changed: nothing graded
    longer = replace(TEST_LIMITS, cell_timeout_s=TEST_LIMITS.cell_timeout_s + 1)
    again = run(class_folder, out, limits=longer)
    assert again.graded == 5 and again.summary["regraded"] == {"options changed": 5}
    assert again.summary["changes"] == []  # the same scores: no student's moved
    assert (out / "changes.csv").read_text().splitlines() == ["student,old_score,new_score,parts,why"]
    kept = {path.name: json.loads(path.read_text()) for path in (out / "history").glob("*/*.json")}
    assert kept == {report_path(out, relative).name: report.to_dict() for relative, report in first.reports.items()}
    assert run(class_folder, out, limits=longer, force=True).summary["regraded"] == {"--force": 5}


def test_a_results_folder_of_another_assignment_stops_the_batch_before_anything_is_written(class_folder, tmp_path):
    out = tmp_path / "results"
    GradeReport(assignment="04", submission="alice/mha.py", status=Status.GRADED, error=None, score=26.0, max_score=26.0,
                device="cpu", duration_s=1.0, grader_version="test", parts=[]).write_json(
        report_path(out, Path("alice/mha.py")))
    before = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    with pytest.raises(ResultsError, match="assignment 04, not 03"):
        run(class_folder, out)
    assert main(["batch", str(ASSIGNMENT_03), str(class_folder), "--out", str(out)]) == 2
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == before


@pytest.mark.slow
def test_a_test_whose_points_change_regrades_the_class_and_changes_csv_says_who_moved(tmp_path):
    # The reference as an instructor edits it mid-term: a copy, found before the installed one.
    copy = tmp_path / "course"
    shutil.copytree(ROOT / "reference", copy / "reference", ignore=shutil.ignore_patterns("__pycache__"))
    folder, out = tmp_path / "submissions", tmp_path / "results"
    (folder / "alice").mkdir(parents=True)
    (folder / "alice/mha.py").write_text(as_submission("multihead"))
    (folder / "bob").mkdir()
    (folder / "bob/mha.py").write_text((ASSIGNMENT_03 / "mha.py").read_text())  # the stub: 0 everywhere

    def batch() -> dict:
        done = subprocess.run([sys.executable, "-m", "grader.cli", "batch", str(ASSIGNMENT_03), str(folder),
                               "--out", str(out), "--device", "cpu"], cwd=tmp_path, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(copy)}, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads((out / "summary.json").read_text())

    first = batch()
    alice = next(line for line in first["gradebook"] if line["student"] == "alice")
    combine_heads = next(part["score"] for part in json.loads((out / alice["report"]).read_text())["parts"]
                         if part["id"] == "combine_heads")
    suite_test = copy / "reference/hidden/a03/test_combine_heads.py"
    marker = '@pytest.mark.part("combine_heads", points=2)'
    assert marker in suite_test.read_text()
    suite_test.write_text(suite_test.read_text().replace(marker, marker.replace("points=2", "points=5")))
    second = batch()
    assert second["regraded"] == {"suite changed": 2}
    rows = list(csv.DictReader((out / "changes.csv").open()))
    assert rows == [{"student": "alice", "old_score": f"{alice['score']:g}", "new_score": f"{alice['score'] + 3:g}",
                     "parts": f"combine_heads {combine_heads:g} -> {combine_heads + 3:g}", "why": "suite changed"}]
    # bob's 0 did not move: no row
    assert [row["student"] for row in csv.DictReader((out / "history/changes.csv").open())] == ["alice"]
    assert len(list((out / "history").glob("*/*.json"))) == 2  # the replaced reports, kept
    third = batch()
    assert third["regraded"] == {} and third["changes"] == []
    assert len((out / "changes.csv").read_text().splitlines()) == 1  # a run that changed nothing: no rows


@pytest.mark.needs_layer("namespaces")
def test_without_landlock_a_submission_sees_neither_the_class_folder_nor_the_results(tmp_path, monkeypatch):
    # Only the namespaces' mounts stand here; the red team that found this read a classmate's
    # file from the class folder, which would let it run the classmate's code as its own.
    monkeypatch.setattr(landlock, "abi_version", lambda: 0)
    monkeypatch.chdir(tmp_path)
    folder, out = Path("class"), Path("out")  # as an instructor types them: relative
    folder.mkdir()
    (folder / "alice.py").write_text(REFERENCE + "\nSECRET = 'alice-was-here'\n")
    peek = ("\nfor path in {paths!r}:\n"
            "    try:\n        print('read', path, os.listdir(path) if os.path.isdir(path) else open(path).read())\n"
            "    except OSError as exc:\n        print('refused', path, type(exc).__name__)\n")
    paths = [str(tmp_path / "class" / "alice.py"), str(tmp_path / "class"), str(tmp_path / "out")]
    (folder / "zed.py").write_text("import os\n" + REFERENCE + peek.format(paths=paths))  # graded after alice
    with pytest.warns(isolation.SandboxWarning, match="Landlock"):
        run(folder, out, jobs=1)
    report = GradeReport.from_dict(json.loads(report_path(out, Path("zed.py")).read_text()))
    assert report.status == Status.GRADED and report.score == report.max_score
    assert "alice-was-here" not in report.output
    said = [line.split()[0] for line in report.output.splitlines() if line.startswith(("read ", "refused "))]
    assert said == ["refused"] * 3, report.output
