"""What a run changed, so that a change of grade is always visible and traceable.

    OUT/changes.csv               this run's: one row per student whose score moved
    OUT/history/changes.csv       every run's rows, each with the time of its run
    OUT/history/STAMP/NAME.json   the reports a run replaced, as they were

A student's score moved when the gradebook's score differs from the one the previous run's
``summary.json`` gave them; the row says by how much in each part and why: the reason the file
was graded again (``suite changed``, ``file changed``, ...), or another file graded for them.
A run that changes nothing writes a ``changes.csv`` with its header alone.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from grader.core.report import GradeReport, write_atomic, write_json
from grader.core.sanitize import csv_text
from grader.results.folder import BatchResult

FILE = "changes.csv"
HISTORY = "history"
COLUMNS = ("student", "old_score", "new_score", "parts", "why")


@dataclass(frozen=True)
class Change:
    student: str
    old_score: float
    new_score: float
    parts: str  # "MultiHeadAttention 10 -> 14; split_heads 3 -> 2"
    why: str


def score_changes(result: BatchResult) -> list[Change]:
    """Each student of the batch whose score differs from the previous run's gradebook."""
    regrade = result.regrade
    why = {path.as_posix(): reason for path, reason in regrade.why.items()}
    replaced = {path.as_posix(): report for path, report in regrade.replaced.items()}
    changes = []
    for grade in result.class_results.students:
        line = regrade.before.get(grade.student)
        if line is None or _number(line.get("score")) == grade.score:
            continue
        previous = line.get("submission")
        if previous != grade.submission:
            reason = "another file graded" if previous and grade.submission else "handed in" if grade.submission else "nothing graded"
        else:
            reason = why.get(grade.submission or "", "gradebook changed")
        old = replaced.get(grade.submission or "")
        changes.append(Change(grade.student, _number(line.get("score")), grade.score,
                              _moved_parts(old, grade.report) if previous == grade.submission else "", reason))
    return changes


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def _moved_parts(old: GradeReport | None, new: GradeReport | None) -> str:
    if old is None or new is None:
        return ""
    before = {part.id: part.score for part in old.parts}
    return "; ".join(f"{part.id} {before.get(part.id, 0):g} -> {part.score:g}" for part in new.parts
                     if before.get(part.id, 0) != part.score)


def keep_replaced(out: Path, stamp: str, name: str, report: GradeReport) -> None:
    """Keep the report a run is about to replace, as it was."""
    write_json(out / HISTORY / stamp / name, report.to_dict())


def write_changes(out: Path, changes: list[Change], stamp: str) -> None:
    rows = [[change.student, f"{change.old_score:g}", f"{change.new_score:g}", change.parts, change.why]
            for change in changes]
    write_atomic(out / FILE, csv_text([list(COLUMNS), *rows]))
    if rows:
        history = out / HISTORY / FILE
        earlier = history.read_text(encoding="utf-8") if history.is_file() else csv_text([["run", *COLUMNS]])
        write_atomic(history, earlier + csv_text([[stamp, *row] for row in rows]))


def read_changes(folder: Path) -> list[Change]:
    """The last run's changes, read back (none where the folder has no changes.csv)."""
    try:
        rows = list(csv.DictReader(io.StringIO((folder / FILE).read_text(encoding="utf-8"))))
        return [Change(row["student"], float(row["old_score"]), float(row["new_score"]), row["parts"], row["why"])
                for row in rows]
    except (OSError, KeyError, ValueError, TypeError):
        return []
