"""An instructor's overrides through a term of `grade batch` runs: a part's score changed with a
comment, a file pinned; kept through regrades, with the autograder's score beside them, and
changes.csv saying when either moved. Quick: a stand-in grader gives each file the scores a
test sets (everything else, reuse by fingerprint included, is grade batch's own); one slow
test grades real submissions through a real change of the hidden suite."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from grader import cli
from grader.core.assignment import Assignment
from grader.core.fingerprint import Fingerprint
from grader.core.ingest import read_submission, submission_sha256
from grader.engine import batch as batch_module
from grader.engine.batch import grade_batch
from grader.results.folder import read_results, report_path
from grader.results.overrides import OverrideError, Overrides
from grader.results.students import FILE_RULE, handins
from grader.views.class_report import batch_summary, class_table, render_html
from reference import as_submission
from tests.conftest import ASSIGNMENT_03, ROOT
from tests.test_gradebook import report, write

FULL = {"split_heads": 2.0, "combine_heads": 2.0, "MultiHeadAttention": 2.0}  # the stand-in's parts, 2 points each


class StandIn:
    """Grades as a test says: ``scores[file][part]`` (full marks where it says nothing), with the
    fingerprint a real grading gives, so that a stored report is reused exactly as a real one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.scores: dict[str, dict[str, float]] = {}
        self.graded: list[str] = []  # every file graded, in every run
        monkeypatch.setattr(batch_module, "run_locally", self.run)

    def run(self, assignment, folder, todo, *, jobs, options, on_begin=None, settled=None, private=None):
        for relative in todo:
            self.graded.append(relative.as_posix())
            graded = report(relative.as_posix(), assignment, {**FULL, **self.scores.get(relative.as_posix(), {})})
            sha256 = submission_sha256(read_submission(folder / relative))
            graded.submission_sha256, graded.fingerprint = sha256, replace(settled, submission=sha256).to_dict()
            yield relative, graded


def edit_the_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hidden suite as an instructor fixes it mid-term: every report's fingerprint stops holding."""
    settled = Fingerprint.of
    monkeypatch.setattr(Fingerprint, "of", lambda *args, **kwargs: replace(settled(*args, **kwargs), suite="f" * 64))


def rows(path: Path) -> dict[str, dict[str, str]]:
    return {row[next(iter(row))]: row for row in csv.DictReader(path.open(encoding="utf-8"))}


def changes(out: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((out / "changes.csv").open(encoding="utf-8")))


@pytest.fixture
def term(tmp_path, monkeypatch):
    folder, out = tmp_path / "submissions", tmp_path / "results"
    write(folder, {"lea/mha.py": "# lea's\n", "max/mha.py": "# max's\n"})
    grader = StandIn(monkeypatch)
    grader.scores = {"lea/mha.py": {"MultiHeadAttention": 0.5}}
    roster = tmp_path / "roster.csv"
    roster.write_text("student,name,email,sis_user_id,id\nlea,Lea Lo,lea@uni.edu,S1,101\nmax,Max Mo,max@uni.edu,S2,102\n"
                      "zoe,Zoe Zu,zoe@uni.edu,S3,103\n")

    def run(overrides: str | None = None, *args: str) -> int:
        argv = ["batch", str(ASSIGNMENT_03), str(folder), "--out", str(out), "--device", "cpu", "--roster", str(roster)]
        if overrides is not None:
            (tmp_path / "overrides.csv").write_text(overrides, encoding="utf-8")
            argv += ["--overrides", str(tmp_path / "overrides.csv")]
        return cli.main([*argv, *args])

    monkeypatch.setattr(cli, "_start_grader", lambda assignment: None)  # nothing is really graded
    return folder, out, grader, run


OVERRIDES = ("student,part,score,comment\n"
             "lea,MultiHeadAttention,1.5,regrade request: her mask is right\n"
             "max,split_heads,,read by hand: the reshape is fine\n")


def test_an_override_survives_regrades_beside_the_autograders_score_and_changes_csv_says_what_moved(term, monkeypatch):
    folder, out, grader, run = term
    assert run() == 0
    assert rows(out / "grades.csv")["lea"]["score"] == "4.5"
    # The instructor reads lea's code after a regrade request and comments on max's: nothing is
    # graded again, and every file the gradebook makes says the final score and why.
    assert run(OVERRIDES) == 0
    assert len(grader.graded) == 2  # the first run's two: the stored reports were reused
    lea, max_ = rows(out / "grades.csv")["lea"], rows(out / "grades.csv")["max"]
    assert (lea["score"], lea["MultiHeadAttention"]) == ("5.5", "1.5")
    assert lea["overrides"] == "MultiHeadAttention 0.5 -> 1.5: regrade request: her mask is right"
    assert (max_["score"], max_["overrides"]) == ("6", "split_heads 2 (kept): read by hand: the reshape is fine")
    assert {line[1]: line[-1] for line in csv.reader((out / "canvas.csv").open())}["101"] == "5.5"
    gradescope = rows(out / "gradescope.csv")
    assert (gradescope["Lea Lo"]["Score"], gradescope["Lea Lo"]["Overrides"]) == ("5.5", lea["overrides"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["gradebook"][0]["overrides"] == [{"part": "MultiHeadAttention", "score": 1.5, "autograder_score": 0.5,
                                                    "comment": "regrade request: her mask is right"}]
    stored = json.loads(report_path(out, Path("lea/mha.py")).read_text())
    part = next(part for part in stored["parts"] if part["id"] == "MultiHeadAttention")
    assert (stored["score"], part["score"], part["override"]) == (
        5.5, 1.5, {"autograder_score": 0.5, "comment": "regrade request: her mask is right"})
    page = (out / "feedback" / "lea.md").read_text()
    assert "Score: 5.5 / 6, with your instructor's changes below \\(the autograder gave 4.5\\)" in page
    assert "| MultiHeadAttention | 1\\.5 / 2 |  | 0\\.5 \\-\\> 1.5: regrade request: her mask is right |" in page
    assert changes(out) == [{"student": "lea", "old_score": "4.5", "new_score": "5.5",
                             "parts": "MultiHeadAttention 0.5 -> 1.5", "why": "override"}]
    (replaced,) = (out / "history").glob(f"*/{report_path(out, Path('lea/mha.py')).name}")  # rewritten: kept as it was
    assert json.loads(replaced.read_text())["score"] == 4.5

    # A hidden test is fixed: both regraded. lea's override holds her part at 1.5 while the
    # autograder's moved under it; max's comment-only override lets his score follow the grader's.
    grader.scores = {"lea/mha.py": {"MultiHeadAttention": 1.0}, "max/mha.py": {"split_heads": 1.0}}
    edit_the_suite(monkeypatch)
    assert run(OVERRIDES) == 0
    assert grader.graded[2:] == ["lea/mha.py", "max/mha.py"]
    assert changes(out) == [
        {"student": "lea", "old_score": "5.5", "new_score": "5.5", "parts": "MultiHeadAttention 1.5 (overridden)",
         "why": "override: autograder's score moved 0.5 -> 1"},
        {"student": "max", "old_score": "6", "new_score": "5", "parts": "split_heads 2 -> 1",
         "why": "suite changed; override: autograder's score moved 2 -> 1"}]
    assert rows(out / "grades.csv")["lea"]["overrides"] == "MultiHeadAttention 1 -> 1.5: regrade request: her mask is right"
    kept = [json.loads(path.read_text()) for path in sorted((out / "history").glob(f"*/{report_path(out, Path('lea/mha.py')).name}"))]
    assert [report["score"] for report in kept] == [4.5, 5.5]  # before the override, and before the regrade
    assert next(part for part in kept[1]["parts"] if part["id"] == "MultiHeadAttention")["override"]["autograder_score"] == 0.5

    # lea's row taken out: the autograder's points are back, with nothing graded again.
    assert run("student,part,score,comment\nmax,split_heads,,read by hand: the reshape is fine\n") == 0
    assert len(grader.graded) == 4
    assert changes(out) == [{"student": "lea", "old_score": "5.5", "new_score": "5", "parts": "MultiHeadAttention 1.5 -> 1",
                             "why": "override"}]
    stored = json.loads(report_path(out, Path("lea/mha.py")).read_text())
    assert [part["override"] for part in stored["parts"]] == [None, None, None] and stored["score"] == 5.0
    assert [line.split(",")[1] for line in (out / "history/changes.csv").read_text().splitlines()[1:]] == [
        "lea", "lea", "max", "lea"]  # every run's rows, kept


@pytest.mark.parametrize("overrides, message, graded", [
    ("student,part,score,comment\nlea,MultiHeadAttention,1,ok\nlee,split_heads,2,typo\n",
     "row 3: no student lee in this batch (the ids of grades.csv's student column); did you mean lea?", 0),
    ("student,part,score,comment\nlea,multihead,1,ok\n",
     "row 2: no part multihead; the parts are split_heads, combine_heads, MultiHeadAttention", 0),
    ("student,part,score,comment\nzoe,split_heads,2,she was ill\n",
     "row 2: zoe handed in nothing: there are no points to override", 0),
    # The part's points are in its report: said once the files are graded, before the results are written.
    ("student,part,score,comment\nmax,split_heads,1,ok\nlea,MultiHeadAttention,3,generous\n",
     "row 3: 3 is over 2, the points of lea's MultiHeadAttention", 2),
])
def test_an_override_that_cannot_be_applied_stops_the_batch_naming_its_row(term, capsys, overrides, message, graded):
    folder, out, grader, run = term
    assert run(overrides) == 2
    error = " ".join(capsys.readouterr().err.split())
    assert f"error: --overrides: {out.parent / 'overrides.csv'}, {message}" in error
    assert len(grader.graded) == graded
    assert not (out / "summary.json").exists() and not (out / "grades.csv").exists()
    assert run() == 0 and len(grader.graded) == 2  # the reports already graded are reused


@pytest.mark.parametrize("text, message", [
    ("student,part,score\nlea,split_heads,two\n", "row 2: the score two is not a number of points"),
    ("student,part,score\nlea,split_heads,-1\n", "row 2: the score -1 is not a number of points"),
    ("student,part,score\nlea,split_heads,nan\n", "row 2: the score nan is not a number of points"),
    ("student,part,score,comment\nlea,split_heads,1,a\nlea,split_heads,2,b\n",
     "row 3: lea's split_heads is already overridden in row 2"),
    ("student,part,score\nlea,,2\n", "row 2: a score needs the part it is for"),
    ("student,part,score,comment\nlea,split_heads,,\n", "row 2: neither a score nor a comment for lea's split_heads"),
    ("student,part,score,comment\n,split_heads,1,x\n", "row 2: no student"),
    ("student,part,scroe\nlea,split_heads,2\n", "unknown: scroe"),
    ("student,file\nlea,lea/a.py\nlea,lea/b.py\n", "row 3: lea's file is already pinned to lea/a.py in row 2"),
])
def test_a_bad_overrides_file_says_which_row_and_why(text, message):
    with pytest.raises(OverrideError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Overrides.parse(text, "overrides.csv")


def test_a_score_with_a_decimal_comma_reads_as_excel_wrote_it():
    (row,) = Overrides.parse("student;part;score;comment\nlea;split_heads;1,5;half a point back\n").rows
    assert (row.student, row.part, row.score, row.comment) == ("lea", "split_heads", 1.5, "half a point back")


def test_a_pinned_file_is_graded_for_the_student_and_said_so(term, tmp_path):
    folder, out, grader, run = term
    # lea handed in a partial mha.py and a complete mha_final.py: the rule takes mha.py, named
    # like the handout; her instructor pins the final one, as she asked.
    write(folder, {"lea/mha_final.py": "# lea's final\n"})
    grader.scores = {"lea/mha.py": {"MultiHeadAttention": 0.5, "combine_heads": 0}}
    assert run() == 0
    lea = rows(out / "grades.csv")["lea"]
    assert (lea["submission"], lea["score"], lea["note"]) == ("lea/mha.py", "2.5", f"graded lea/mha.py by the rule: {FILE_RULE}")
    assert lea["other_files"] == "lea/mha_final.py not graded"
    assert run("student,part,score,comment,file\nlea,,,she asked for her final version,lea/mha_final.py\n") == 0
    assert grader.graded[-1] == "lea/mha_final.py"
    lea = rows(out / "grades.csv")["lea"]
    assert (lea["submission"], lea["score"]) == ("lea/mha_final.py", "6")
    assert lea["note"] == "graded lea/mha_final.py, pinned by the overrides: she asked for her final version"
    assert lea["other_files"] == "lea/mha.py not graded"
    assert changes(out) == [{"student": "lea", "old_score": "2.5", "new_score": "6", "parts": "", "why": "file pinned"}]
    page = (out / "feedback" / "lea.md").read_text()
    assert "Your instructor chose this file for your grade: she asked for her final version" in page
    assert "Graded: lea/mha\\_final.py\n" in page and "| lea/mha.py | not graded |" in page
    # With --all-files, every file's score: in her row, and on her page.
    assert run("student,file,comment\nlea,lea/mha_final.py,she asked for her final version\n", "--all-files") == 0
    assert rows(out / "grades.csv")["lea"]["other_files"] == "lea/mha.py 2.5 / 6"
    assert "| lea/mha.py | 2\\.5 / 6 |" in (out / "feedback" / "lea.md").read_text()


def test_a_pin_to_a_file_the_student_did_not_hand_in_is_refused_before_grading(term, capsys):
    folder, out, grader, run = term
    assert run("student,file\nlea,lea/mha_final.py\n") == 2
    assert ("--overrides: " f"{out.parent / 'overrides.csv'}, row 2: lea handed in no file lea/mha_final.py "
            "(their files: lea/mha.py)") in " ".join(capsys.readouterr().err.split())
    assert grader.graded == []


def test_an_override_of_a_submission_that_was_not_graded_names_the_row(tmp_path):
    assignment = Assignment.load(ASSIGNMENT_03)
    files = write(tmp_path, {"max/notes.txt": "sorry"})
    students = handins(files, tmp_path, assignment)
    overrides = Overrides.parse("student,part,score,comment\nmax,split_heads,2,he emailed the code\n", "o.csv")
    overrides.check(students, assignment.parts)  # known student and part: only his report can say
    ungradable = report("max/notes.txt", assignment, {part: 0 for part in FULL}, "ungradable")
    with pytest.raises(OverrideError, match=r"o.csv, row 2: max's max/notes.txt was not graded \(ungradable: "
                                            r"not a submission: notes.txt\), so it has no points to override"):
        overrides.apply(students, {Path("max/notes.txt"): ungradable})


def test_the_batch_view_and_the_class_report_summarise_the_last_runs_changes(term):
    folder, out, grader, run = term
    assert run() == 0
    assert run(OVERRIDES) == 0
    results = read_results(out)  # as grade report reads the folder back: changes.csv too
    assert [(change.student, change.why) for change in results.changes] == [("lea", "override")]
    page = render_html(results, "feedback")
    assert "<h2>Changes in the last run</h2>" in page
    assert "<td>lea</td><td>4.5</td><td>5.5</td><td>MultiHeadAttention 0.5 -&gt; 1.5</td><td>override</td>" in page
    assert page == (out / "report.html").read_text()  # the batch wrote the same page
    from rich.console import Console

    console = Console(record=True, width=300)
    result = grade_batch(ASSIGNMENT_03, folder, out, device="cpu", overrides=Overrides())  # the overrides file dropped
    console.print(batch_summary(result, out))
    text = console.export_text()
    assert f"1 student whose grade changed in the last run: lea (see {(out / 'changes.csv').as_posix()})" in text
    assert "overrides:" not in text
    console = Console(record=True, width=300)
    console.print(class_table(read_results(out)))  # grade report's terminal view
    assert "1 student whose grade changed in the last run: lea (see changes.csv)" in console.export_text()
    assert "No student's grade changed in the last run" in render_html(replace(read_results(out), changes=[]))


@pytest.mark.slow
def test_an_override_holds_through_a_real_change_of_the_hidden_suite(tmp_path):
    # The reference as an instructor edits it mid-term: a copy, found before the installed one.
    copy = tmp_path / "course"
    shutil.copytree(ROOT / "reference", copy / "reference", ignore=shutil.ignore_patterns("__pycache__"))
    folder, out, overrides = tmp_path / "submissions", tmp_path / "results", tmp_path / "overrides.csv"
    write(folder, {"alice/mha.py": as_submission("multihead")})
    overrides.write_text("student,part,score,comment\nalice,combine_heads,1,her own words: half the marks\n")

    def batch() -> dict:
        done = subprocess.run([sys.executable, "-m", "grader.cli", "batch", str(ASSIGNMENT_03), str(folder),
                               "--out", str(out), "--device", "cpu", "--overrides", str(overrides)], cwd=tmp_path,
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(copy)}, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads((out / "summary.json").read_text())

    first = batch()
    (alice,) = first["gradebook"]
    (override,) = alice["overrides"]
    combine_heads = override["autograder_score"]  # the reference's: full marks
    assert override == {"part": "combine_heads", "score": 1, "autograder_score": combine_heads,
                        "comment": "her own words: half the marks"}
    assert alice["score"] == first["score"]["max_score"] - combine_heads + 1
    suite_test = copy / "reference/hidden/a03/test_combine_heads.py"
    marker = '@pytest.mark.part("combine_heads", points=2)'
    suite_test.write_text(suite_test.read_text().replace(marker, marker.replace("points=2", "points=5")))
    second = batch()
    assert second["regraded"] == {"suite changed": 1}
    assert second["gradebook"][0]["score"] == alice["score"]  # the override holds the part at 1
    assert second["gradebook"][0]["overrides"][0]["autograder_score"] == combine_heads + 3
    assert changes(out) == [{"student": "alice", "old_score": f"{alice['score']:g}", "new_score": f"{alice['score']:g}",
                             "parts": "combine_heads 1 (overridden)",
                             "why": f"override: autograder's score moved {combine_heads:g} -> {combine_heads + 3:g}"}]
