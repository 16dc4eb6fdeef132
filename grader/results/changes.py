"""What a run changed, so that a change of grade is always visible and traceable.

    OUT/changes.csv               this run's: one row per student whose score moved
    OUT/history/changes.csv       every run's rows, each with the time of its run
    OUT/history/STAMP/NAME.json   the reports a run replaced (regraded, or rewritten by an override), as they were

A student's score moved when the gradebook's score differs from the one the previous run's
``summary.json`` gave them; the row says by how much in each part and why: the reason the file
was graded again (``suite changed``, ``file changed``, ...), another file graded for them, or
``override`` (one added, changed or removed: ``grade batch --overrides``). A part whose
override holds its score gets a row too when the autograder's score under it moved
(``override: autograder's score moved 3 -> 5``): the instructor may want to look again.
A run that changes nothing writes a ``changes.csv`` with its header alone.
"""

from __future__ import annotations

import csv
import io
import math
import time
from dataclasses import dataclass
from pathlib import Path

from grader.core.report import GradeReport, PartResult, write_atomic, write_json
from grader.core.sanitize import csv_text

FILE = "changes.csv"
HISTORY = "history"
COLUMNS = ("student", "old_score", "new_score", "parts", "why")
OVERRIDE = "override"  # why a score moved when an override's was added, changed or removed


@dataclass(frozen=True)
class Change:
    student: str
    old_score: float
    new_score: float
    parts: str  # "MultiHeadAttention 10 -> 14; split_heads 3 -> 2"
    why: str


def student_change(student: str, before: dict | None, score: float, submission: str | None,
                   report: GradeReport | None, earlier: GradeReport | None, regraded: str | None, *,
                   pinned: bool = False) -> Change | None:
    """How the student's grade changed since the previous run, or None where it did not (or
    there was no previous run): ``before`` is their line of that run's gradebook; ``score``,
    ``submission`` and ``report`` are theirs now; ``earlier`` is the report their file had
    before this run, and ``regraded`` why it was graded again (None: reused). A row is due when
    the score moved, or when the autograder's score of a part under an override moved, which
    the override hides: the instructor decided on points that are no longer the grader's."""
    if before is None:
        return None
    old_score, previous = _number(before.get("score")), before.get("submission")
    if previous != submission:
        if old_score == score:
            return None
        why = (("file pinned" if pinned else "another file graded") if previous and submission
               else "handed in" if submission else "nothing graded")
        return Change(student, old_score, score, "", why)
    moved: list[str] = []
    reasons: list[str] = []
    old_parts = {part.id: part for part in earlier.parts} if earlier and report else {}
    for part in report.parts if report else []:
        if (old := old_parts.get(part.id)) is not None:
            _compare(old, part, regraded, moved, reasons)
    if old_score == score and not reasons:
        return None
    why = "; ".join(dict.fromkeys(reasons)) or regraded or "gradebook changed"
    return Change(student, old_score, score, "; ".join(moved), why)


def vanished(before: dict[str, dict], students: set[str]) -> list[Change]:
    """The students of the previous run's gradebook who are no longer in the batch (their folder
    deleted, with no roster to keep them), and whose score was not 0."""
    return [Change(student, _number(line.get("score")), 0.0, "", "no longer in the batch")
            for student, line in before.items() if student not in students and _number(line.get("score"))]


def _compare(old: PartResult, new: PartResult, regraded: str | None, moved: list[str], reasons: list[str]) -> None:
    """What moved in a part, and why: its final score moves with the autograder's, unless an
    override holds it, and with the override's."""
    autograder_moved = old.autograder_score != new.autograder_score
    # The final score is the autograder's plus what an override adds: what moved that, moved the score.
    overrides_moved = not math.isclose(new.score - new.autograder_score, old.score - old.autograder_score,
                                       abs_tol=1e-9)
    if old.score != new.score:
        moved.append(f"{new.id} {old.score:g} -> {new.score:g}")
        if autograder_moved:
            reasons.append(regraded or "gradebook changed")
        if overrides_moved:
            reasons.append(OVERRIDE)
    if old.override and new.override and autograder_moved:
        if old.score == new.score:
            moved.append(f"{new.id} {new.score:g} (overridden)")
        reasons.append(f"{OVERRIDE}: autograder's score moved {old.autograder_score:g} -> {new.autograder_score:g}")


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def run_stamp(out: Path) -> str:
    """The run's time, as its folder in ``out/history`` names it; a second run in the same
    second gets a folder of its own (``-2``), so that neither's kept reports overwrite the other's."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    taken = {path.name for path in (out / HISTORY).glob(f"{stamp}*")}
    taken |= {row.partition(",")[0] for row in _history_rows(out) if row.startswith(stamp)}
    return next(candidate for candidate in (stamp, *(f"{stamp}-{n}" for n in range(2, len(taken) + 3)))
                if candidate not in taken)


def _history_rows(out: Path) -> list[str]:
    try:
        return (out / HISTORY / FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []


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
