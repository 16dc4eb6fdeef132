"""What a batch writes beside the reports: ``summary.json`` and the gradebooks, one row per
student: ``grades.csv`` and the LMS imports of :mod:`grader.results.lms_gradebooks`."""

from __future__ import annotations

import statistics
from dataclasses import asdict
from pathlib import Path

from grader.core.report import Status, write_atomic, write_json
from grader.core.report_words import NOT_GRADED, file_score, overrides_line
from grader.core.sanitize import csv_text
from grader.results.changes import write_changes
from grader.results.folder import MISSING, BatchResult, StudentGrade
from grader.results.lms_gradebooks import write_gradebooks

# 2: the students, each with the file graded for them. 3: submissions, counts, scores and hints
# are those of the files graded for the students; also_handed_in counts the other files. 4: only
# those files are graded (unless --all-files); not_graded counts the others, and each student's
# lists theirs. 5: regraded counts the files graded again, by why; changes lists the students
# whose score moved (as changes.csv does); each student's overrides (the parts an instructor
# decided: final score, the autograder's, comment), pinned (the comment of the instructor's
# choice of their file, else null) and other_files (each other file with its status and score).
SUMMARY_SCHEMA_VERSION = 5


def summarize(result: BatchResult) -> dict:
    """Counts by status, per-part statistics, the most frequent hints, timing, and each student
    with the file graded for them."""
    results = result.class_results
    stats, students = results.statistics, results.students
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "assignment": result.assignment.id,
        "submissions": stats.submissions,
        "also_handed_in": stats.also_handed_in,
        "not_graded": sum(len(grade.handin.not_graded) for grade in students),
        "counts": stats.counts,
        # The gradebook's mean: 0 for a student with no score, where "score" leaves them out.
        "students": {"count": len(students), "missing": sum(grade.status == MISSING for grade in students),
                     "not_on_roster": sum(grade.handin.unlisted for grade in students),
                     "mean_score": round(statistics.fmean(grade.score for grade in students), 4) if students else None},
        "score": stats.total.stats(),
        "parts": {part_id: scores.stats() for part_id, scores in stats.parts.items()},
        "hints": [{"hint": hint, "count": count} for hint, count in stats.hints],
        "timing": {
            "duration_s": round(result.duration_s, 3),
            "graded": result.graded,
            "skipped_up_to_date": result.skipped,
            "seconds_per_submission": round(result.duration_s / result.graded, 4) if result.graded else None,
        },
        "removed_reports": [path.name for path in result.removed],
        "gradebook": [_student_entry(grade) for grade in students],
    }


def _student_entry(grade: StudentGrade) -> dict:
    handin = grade.handin
    return {"student": grade.student, "name": grade.name, "status": grade.status, "score": grade.score,
            "submission": grade.submission, "report": grade.report_file,
            "files": [path.as_posix() for path in handin.files],
            "not_graded": [path.as_posix() for path in handin.not_graded],
            "late": grade.late, "note": grade.note, "pinned": handin.pinned,
            "overrides": [{"part": part.id, "score": part.score, "autograder_score": part.autograder_score,
                           "comment": part.override.comment} for part in grade.overridden if part.override],
            "other_files": [{"file": path.as_posix(), "status": report.status if report else NOT_GRADED,
                             "score": report.score if report and report.status == Status.GRADED else None}
                            for path, report in grade.others.items()]}


GRADEBOOK_COLUMNS = ("student", "name", "status", "score", "points_possible")


def gradebook_csv(result: BatchResult) -> str:
    """One row per student: who, status, score and points possible, one column per part (the
    final scores, overrides applied), the headline hint, the file graded, whether it was late,
    a note on the choice, the instructor's overrides and the other files handed in."""
    parts = result.assignment.parts
    results = result.class_results
    rows = [[*GRADEBOOK_COLUMNS, *parts, "hint", "submission", "late", "note", "overrides", "other_files"]]
    for grade in results.students:
        rows.append([grade.student, grade.name, grade.status, f"{grade.score:g}",
                     f"{results.statistics.total.max_score:g}", *(f"{grade.part_score(part):g}" for part in parts),
                     grade.hint, grade.submission or "", "late" if grade.late else "", grade.note,
                     overrides_line(grade.overridden), other_files_cell(grade)])
    return csv_text(rows)


def other_files_cell(grade: StudentGrade) -> str:
    """Each other file the student handed in, with its score: ``lea/mha_final.py 6 / 6``, or
    why it has none (``not graded`` without --all-files)."""
    return "; ".join(f"{path.as_posix()} {file_score(report)}" for path, report in grade.others.items())


def write_outputs(result: BatchResult, out: Path, canvas_header: str | None = None, *,
                  missing_zero: bool = False) -> dict:
    """``summary.json``, the gradebooks and ``changes.csv``; returns the summary, which says
    which students each LMS's gradebook leaves out for want of an id it matches on, why files
    were graded again, and how many students' scores that moved."""
    summary = summarize(result)
    books = write_gradebooks(result, out, canvas_header, missing_zero=missing_zero)
    summary["left_out"] = {book.name: book.left_out for book in books}
    changes = result.class_results.changes
    write_changes(out, changes, result.regrade.stamp)
    summary["regraded"] = result.regrade.reasons()
    summary["changes"] = [asdict(change) for change in changes]
    write_json(out / "summary.json", summary)
    write_atomic(out / "grades.csv", gradebook_csv(result))
    return summary
