"""The gradebook per student: who handed in what, the file graded for each, the roster, the
CSVs for Canvas and Gradescope, reports of removed files. Quick: reports are made up, not graded."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from grader.core.assignment import Assignment
from grader.core.report import Flag, GradeReport, PartResult, Status
from grader.results.folder import (
    BatchResult,
    Regrade,
    ResultsError,
    check_assignment,
    prune_reports,
    read_results,
    report_path,
)
from grader.results.lms_gradebooks import canvas_gradebook, gradescope_gradebook
from grader.results.outputs import gradebook_csv, write_outputs
from grader.results.students import FILE_RULE, Roster, RosterError, canvas_name, handed_in_name, handins
from grader.views.class_report import batch_summary
from tests.conftest import ASSIGNMENT_03, ROOT

STUB = "def split_heads(x, h):\n    raise NotImplementedError\n"
DONE = "def split_heads(x, h):\n    return x\n"


@pytest.fixture
def assignment() -> Assignment:
    return Assignment.load(ASSIGNMENT_03)


def write(folder: Path, files: dict[str, str]) -> list[Path]:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return sorted(Path(name) for name in files)


def report(name: str, assignment: Assignment, scores: dict[str, float] | None = None, status: str = Status.GRADED,
           hints: dict[str, str] | None = None) -> GradeReport:
    scores, hints = scores or {}, hints or {}
    parts = [PartResult(part, scores.get(part, 2.0), 2.0, hints.get(part), [], [hints[part]] if part in hints else [])
             for part in assignment.parts]
    return GradeReport(assignment=assignment.id, submission=name, status=status,
                       error=None if status == Status.GRADED else "not a submission: notes.txt",
                       score=sum(p.score for p in parts), max_score=2.0 * len(parts), device="cpu", duration_s=1.0,
                       grader_version="test", parts=parts)


def test_one_student_per_folder_and_the_file_with_most_work_is_graded(tmp_path, assignment):
    files = write(tmp_path, {"lea/mha.py": STUB, "lea/mha.ipynb": DONE, "lea/scratch.py": DONE,
                             "max/mha.py": DONE, "nina/README.txt": "hi", "omar.py": DONE})
    found = {handin.student.id: handin for handin in handins(files, tmp_path, assignment)}
    assert list(found) == ["lea", "max", "nina", "omar"]
    lea = found["lea"]
    assert lea.graded == Path("lea/mha.ipynb")  # named like the handout, and fewer stubs than mha.py
    assert lea.note == f"graded lea/mha.ipynb by the rule: {FILE_RULE}"
    assert lea.not_graded == (Path("lea/mha.py"), Path("lea/scratch.py"))  # only the file graded for her is graded
    assert found["max"].note == "" and found["max"].graded == Path("max/mha.py") and found["max"].not_graded == ()
    assert found["nina"].graded == Path("nina/README.txt")  # its report says why it is ungradable
    assert found["omar"].graded == Path("omar.py")
    every = {handin.student.id: handin for handin in handins(files, tmp_path, assignment, all_files=True)}["lea"]
    assert every.graded == lea.graded and every.not_graded == () and every.note == lea.note


def test_the_rule_that_chooses_a_students_file_is_stated_in_the_instructors_docs_in_its_own_words():
    docs = " ".join((ROOT / "docs" / "instructors.md").read_text(encoding="utf-8").split())
    assert f"The file graded is, {FILE_RULE}." in docs


def test_on_a_tie_the_module_is_graded_as_grade_picks_it(tmp_path, assignment):
    files = write(tmp_path, {"lea/mha.ipynb": DONE, "lea/mha.py": DONE})
    assert handins(files, tmp_path, assignment)[0].graded == Path("lea/mha.py")


def test_a_canvas_download_is_one_student_per_user_id(tmp_path, assignment):
    files = write(tmp_path, {"smithjane_1234_500_mha.py": STUB, "smithjane_LATE_1234_501_mha-1.py": DONE,
                             "doejohn_77_502_mha.ipynb": DONE})
    found = {handin.student.id: handin for handin in handins(files, tmp_path, assignment)}
    assert set(found) == {"1234", "77"}
    jane = found["1234"]
    assert jane.student.canvas_id == "1234" and jane.student.name == "smithjane"
    assert jane.graded == Path("smithjane_LATE_1234_501_mha-1.py") and jane.late and "late" in jane.note
    assert handed_in_name(Path("smithjane_LATE_1234_501_mha-1.py")) == "mha.py"
    book = {row["student"]: row for row in rows(gradebook_csv(BatchResult(assignment, {}, 0, 0, 1.0, list(found.values()))))}
    assert (book["1234"]["late"], book["77"]["late"]) == ("late", "")


@pytest.mark.parametrize("filename, name, user, late, file, ambiguous", [
    ("doe_jane_LATE_12345_67890_mha.py", "doe_jane", "12345", True, "mha.py", False),
    ("van_der_berg_anna_77_88_mha-2.ipynb", "van_der_berg_anna", "77", False, "mha.ipynb", False),
    ("smithjane_1234_500_mha.py", "smithjane", "1234", False, "mha.py", False),
    # The student's file name, after Canvas's fields, may read as another student's id: Canvas
    # wrote the name first, so the shortest name wins, and the reading is marked ambiguous.
    ("mal_33333_901_22222_1_mha.py", "mal", "33333", False, "22222_1_mha.py", True),
    ("roe_11111_44444_2024_10_mha.py", "roe", "11111", False, "2024_10_mha.py", True),
    # No split whose file is the assignment's, and two splits: read as the shortest name, and said.
    ("ann_1_2_3_notes.txt", "ann", "1", False, "3_notes.txt", True),
])
def test_canvas_download_names_are_read_with_underscores_in_the_name(filename, name, user, late, file, ambiguous):
    read = canvas_name(filename)
    assert (read.name, read.user, read.late, read.file, read.ambiguous) == (name, user, late, file, ambiguous)


def test_a_file_name_cannot_put_a_submission_on_another_students_canvas_row(tmp_path, assignment):
    files = write(tmp_path, {"vic_22222_900_mha.py": DONE, "mal_33333_901_22222_1_mha.py": STUB})
    found = {handin.student.id: handin for handin in handins(files, tmp_path, assignment)}
    assert found["22222"].files == (Path("vic_22222_900_mha.py"),)  # the victim's grade is their file's
    assert found["33333"].graded == Path("mal_33333_901_22222_1_mha.py") and found["33333"].ambiguous


def test_a_canvas_name_that_splits_two_ways_is_said_in_the_note_and_the_batch_view(tmp_path):
    assignment = Assignment.load(ASSIGNMENT_03)
    files = write(tmp_path, {"ann_1_2_3_notes.txt": "my notes"})
    (handin,) = handins(files, tmp_path, assignment)
    assert handin.ambiguous and "splits more than one way" in handin.note
    console = Console(record=True, width=200)
    console.print(batch_summary(BatchResult(assignment, {}, 0, 0, 1.0, [handin])))
    assert "Canvas file names that split more than one way, read as the students 1" in console.export_text()


ROSTER = """\ufeffStudent,Path,Name,Email,SIS User ID,ID,Section
lea,,Lea Lo,lea@uni.edu,S1,101,A
max,uploads/max-h,Max Mo,,S2,102,B
zoe,,Zoe Zu,zoe@uni.edu,,103,A
"""


def test_the_roster_names_students_maps_folders_and_lists_those_who_handed_in_nothing(tmp_path, assignment):
    files = write(tmp_path, {"lea/mha.py": DONE, "uploads/max-h/mha.py": DONE, "stray/mha.py": DONE})
    roster = Roster.parse(ROSTER)
    found = handins(files, tmp_path, assignment, roster)
    assert [handin.student.id for handin in found] == ["lea", "max", "zoe", "stray"]  # roster order, then others
    by_id = {handin.student.id: handin for handin in found}
    assert by_id["max"].graded == Path("uploads/max-h/mha.py") and by_id["max"].student.name == "Max Mo"
    assert by_id["zoe"].graded is None and by_id["zoe"].files == ()
    assert "not on the roster" in by_id["stray"].note


@pytest.mark.parametrize("separator", [",", ";", "\t"])
def test_a_roster_saved_with_semicolons_or_tabs_reads_as_one_with_commas(separator):
    # Excel saves "CSV" with semicolons where the decimal mark is a comma, and "Text" with tabs.
    text = ROSTER.replace(",", separator).replace("Lea Lo", '"Lo, Lea"')
    roster = Roster.parse(text)
    assert list(roster.students) == ["lea", "max", "zoe"]
    assert roster.students["lea"].name == "Lo, Lea" and roster.students["max"].canvas_id == "102"
    assert roster.owner(Path("uploads/max-h/mha.py")) == "max"


@pytest.mark.parametrize("text, message", [
    ("name,path\nLea,lea\n", "no `student` column"),
    ("student,path\n,lea\n", "row 2: no student id"),
    ("student,path\nlea,shared\nmax,shared\n", "row 3: shared is already lea's"),
    ("student,path\nlea,../etc\n", "inside the batch folder"),
    ("student,path\nlea,/home/lea\n", "inside the batch folder"),
])
def test_a_bad_roster_says_which_row_and_why(text, message):
    with pytest.raises(RosterError, match=message):
        Roster.parse(text)


def test_a_roster_that_is_not_text_is_refused_clearly(tmp_path):
    path = tmp_path / "roster.xlsx"
    path.write_bytes(b"PK\x03\x04\xff\xfe\x00")
    with pytest.raises(RosterError, match="not UTF-8"):
        Roster.load(path)
    with pytest.raises(RosterError, match="cannot read"):
        Roster.load(tmp_path / "absent.csv")


@pytest.fixture
def batch(tmp_path, assignment) -> BatchResult:
    """A class with duplicates, a stray file, a student who handed in nothing and one not on the roster."""
    folder = tmp_path / "submissions"
    files = write(folder, {"lea/mha.py": STUB, "lea/mha.ipynb": DONE, "max/notes.txt": "sorry",
                           "stray/mha.py": DONE})
    reports = {
        Path("lea/mha.py"): report("lea/mha.py", assignment, {part: 0 for part in assignment.parts}),
        Path("lea/mha.ipynb"): report("lea/mha.ipynb", assignment, {"MultiHeadAttention": 0.5, "split_heads": 1.5},
                                      hints={"MultiHeadAttention": "=scale by sqrt(d_k)", "split_heads": "minor"}),
        Path("max/notes.txt"): report("max/notes.txt", assignment, {part: 0 for part in assignment.parts},
                                      Status.UNGRADABLE),
        Path("stray/mha.py"): report("stray/mha.py", assignment),
    }
    # Every file graded (--all-files): lea's abandoned stub too.
    return BatchResult(assignment, reports, 4, 0, 1.0, handins(files, folder, assignment, Roster.parse(ROSTER),
                                                               all_files=True))


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_gradebook_has_one_row_per_student_with_points_parts_and_the_costliest_hint(batch, assignment):
    table = {row["student"]: row for row in rows(gradebook_csv(batch))}
    assert list(table) == ["lea", "max", "zoe", "stray"]
    lea = table["lea"]
    assert lea["submission"] == "lea/mha.ipynb" and lea["note"] == f"graded lea/mha.ipynb by the rule: {FILE_RULE}"
    assert lea["other_files"] == "lea/mha.py 0 / 6"  # graded too (--all-files), and abandoned
    assert float(lea["score"]) == sum(float(lea[part]) for part in assignment.parts) == 2.0 * len(assignment.parts) - 2
    assert float(lea["points_possible"]) == 2.0 * len(assignment.parts)
    # MultiHeadAttention lost 1.5, split_heads 0.5; a formula-looking hint stays text.
    assert lea["hint"] == "MultiHeadAttention: =scale by sqrt(d_k)"
    assert table["max"]["status"] == "ungradable" and table["max"]["score"] == "0"
    assert "not a submission" in table["max"]["hint"]
    assert table["zoe"]["status"] == "missing" and table["zoe"]["score"] == "0"  # 0 here, with the reason
    assert [table[student]["late"] for student in ("lea", "max", "zoe", "stray")] == ["", "", "", ""]
    assert table["zoe"]["hint"] == "no submission" and table["zoe"]["name"] == "Zoe Zu"
    assert all(table["zoe"][part] == "0" for part in assignment.parts)
    assert "not on the roster" in table["stray"]["note"]


def test_canvas_gradebook_imports_as_canvas_documents_it(batch, assignment):
    book = canvas_gradebook(batch)
    lines = list(csv.reader(io.StringIO(book.text)))
    assert lines[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                        f"Assignment {assignment.id}: {assignment.title}"]
    assert lines[1][0] == "Points Possible" and float(lines[1][-1]) == 2.0 * len(assignment.parts)
    by_name = {line[0]: line for line in lines[2:]}
    assert by_name["Lea Lo"][1:5] == ["101", "S1", "", "A"]
    assert by_name["Zoe Zu"][-1] == ""  # handed in nothing: blank, so Canvas keeps its missing or excused
    assert by_name["Max Mo"][-1] == "0"  # ungradable: a 0 the instructor can explain
    zero = {line[0]: line for line in csv.reader(io.StringIO(canvas_gradebook(batch, missing_zero=True).text))}
    assert zero["Zoe Zu"][-1] == "0"
    # Not the student who is not on the roster: with no Canvas or SIS id, Canvas cannot match them.
    assert set(by_name) == {"Lea Lo", "Max Mo", "Zoe Zu"} and book.left_out == ["stray"]
    assert canvas_gradebook(batch, "Assignment 03 (12345)").text.splitlines()[0].endswith("Assignment 03 (12345)")


def test_gradescope_gradebook_matches_by_email_or_sid(batch):
    book = gradescope_gradebook(batch)
    table = rows(book.text)
    assert [row["Name"] for row in table] == ["Lea Lo", "Max Mo", "Zoe Zu"]
    assert table[0] == {"Name": "Lea Lo", "Email": "lea@uni.edu", "SID": "S1", "Score": "4", "Overrides": ""}
    assert table[2]["Score"] == "" and rows(gradescope_gradebook(batch, missing_zero=True).text)[2]["Score"] == "0"
    assert book.left_out == ["stray"]


def test_outputs_agree_on_the_students(batch, tmp_path):
    out = tmp_path / "results"
    summary = write_outputs(batch, out)
    assert json.loads((out / "summary.json").read_text()) == summary
    assert summary["students"] == {"count": 4, "missing": 1, "not_on_roster": 1,
                                   "mean_score": (4 + 0 + 0 + 6) / 4}  # lea 4 of 6, max ungradable, zoe missing, stray 6
    assert [entry["student"] for entry in summary["gradebook"]] == ["lea", "max", "zoe", "stray"]
    lea = summary["gradebook"][0]
    assert lea["report"] == "reports/" + report_path(out, Path("lea/mha.ipynb")).name
    assert lea["files"] == ["lea/mha.ipynb", "lea/mha.py"]
    assert summary["left_out"] == {"canvas.csv": ["stray"], "gradescope.csv": ["stray"]}
    assert len(rows((out / "grades.csv").read_text())) == 4
    assert (out / "canvas.csv").is_file() and (out / "gradescope.csv").is_file()


def test_reports_of_files_gone_from_the_folder_are_moved_aside(tmp_path, assignment):
    out = tmp_path / "results"
    for name in ("lea/mha.py", "gone/mha.py"):
        report(name, assignment).write_json(report_path(out, Path(name)))
    (out / "reports" / "notes.json").write_text("not a report")  # not the grader's: left where it is
    moved = prune_reports(out, [Path("lea/mha.py")], "run1")
    assert [path.name for path in moved] == [report_path(out, Path("gone/mha.py")).name]
    assert moved[0].parent == out / "removed" and moved[0].is_file()
    assert sorted(path.name for path in (out / "reports").iterdir()) == sorted(
        ["notes.json", report_path(out, Path("lea/mha.py")).name])
    # The student comes back and goes again: the report removed first is kept, not overwritten.
    first = moved[0].read_text()
    report("gone/mha.py", assignment, scores={"split_heads": 0.0}).write_json(report_path(out, Path("gone/mha.py")))
    (again,) = prune_reports(out, [Path("lea/mha.py")], "run3")
    assert again.read_text() != first and (out / "history/run3/removed" / again.name).read_text() == first


@pytest.mark.parametrize("where", ["reports", "removed", "history/20261101T000000Z"])
def test_a_results_folder_that_names_another_assignment_anywhere_is_refused(tmp_path, assignment, where):
    out = tmp_path / "results"
    other = report("alice/mha.py", assignment).to_dict() | {"assignment": "04", "schema_version": 99}  # unreadable
    (out / where).mkdir(parents=True)
    (out / where / "alice%2Fmha.py.json").write_text(json.dumps(other))
    with pytest.raises(ResultsError, match="holds the results of assignment 04, not 03"):
        check_assignment(out, "03")
    check_assignment(out, "04")


def test_a_student_gone_from_the_batch_is_a_change(assignment):
    before = {"carol": {"score": 26, "submission": "carol/mha.py"}, "dan": {"score": 0, "submission": None}}
    gone = BatchResult(assignment, {}, 0, 0, 1.0, [], regrade=Regrade(before=before))
    changes = gone.class_results.changes  # dan's 0 did not move
    assert [(change.student, change.old_score, change.new_score, change.why) for change in changes] == [
        ("carol", 26.0, 0.0, "no longer in the batch")]


def test_the_class_numbers_count_the_file_graded_for_each_student_and_every_files_flags(batch, assignment, tmp_path):
    # lea's abandoned stub (all zeros) is not a second submission of hers in the class's numbers;
    # an attack in it is still listed.
    abandoned = batch.reports[Path("lea/mha.py")]
    abandoned.flags.append(Flag("torch-internals", "mha.py line 3", "torch._C.DisableTorchFunction"))
    out = tmp_path / "results"
    for relative, graded in batch.reports.items():
        graded.write_json(report_path(out, relative))
    summary = write_outputs(batch, out)
    assert summary["submissions"] == 3 and summary["also_handed_in"] == 1
    assert summary["counts"] == {"graded": 2, "ungradable": 1, "grader_error": 0}
    assert summary["score"]["mean"] == (4 + 6) / 2  # lea's notebook and stray's module
    assert summary["parts"]["split_heads"]["median"] == (1.5 + 2) / 2
    from_folder = read_results(out).statistics
    assert from_folder == batch.class_results.statistics
    assert from_folder.flagged == [abandoned]
