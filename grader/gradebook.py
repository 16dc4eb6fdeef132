"""A batch's results folder: ``reports/NAME.json`` per submission, ``summary.json``, ``grades.csv``.

Written by ``grade batch`` (:mod:`grader.batch`), read by ``grade report``
(:mod:`grader.class_report`). Every report is written atomically; a report is current
when it is in the current schema and holds the submission's content hash.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

from grader.assignment import Assignment
from grader.class_stats import ClassStatistics, class_statistics
from grader.ingest import Ungradable, read_submission, submission_sha256
from grader.report import SCHEMA_VERSION, GradeReport, Status, write_atomic, write_json
from grader.sanitize import for_csv

SUMMARY_SCHEMA_VERSION = 1
# Bytes in a report's file name: write_atomic's temporary ".NAME.XXXXXXXX.tmp" beside it must fit
# in NAME_MAX (255) too.
REPORT_NAME_MAX = 200
_PLAIN_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789._-")


@dataclass
class BatchResult:
    assignment: Assignment
    reports: dict[Path, GradeReport]  # by path relative to the submissions folder
    graded: int  # graded in this run
    skipped: int  # reports already up to date
    duration_s: float

    def statistics(self) -> ClassStatistics:
        return class_statistics(self.assignment.parts, list(self.reports.values()))


def report_path(out: Path, relative: Path) -> Path:
    """Where the report of the submission at ``relative`` goes: ``out/reports/NAME.json``, NAME
    one flat name per submission, so that no two share a report whatever their names."""
    return out / "reports" / (report_name(relative) + ".json")


def report_name(relative: Path) -> str:
    """The path's bytes, percent-encoded but for lowercase letters, digits and ``._-``, so that
    ``/`` (and ``%``) cannot collide, nor capitals on a case-insensitive disk; a name too long
    for REPORT_NAME_MAX keeps its start and ends in ``~`` and a hash of the whole path (``~``
    is always encoded otherwise, so no plain name looks like one)."""
    raw = os.fsencode(relative.as_posix())  # undecodable names come back as the bytes on disk
    name = "".join(chr(byte) if byte in _PLAIN_BYTES else f"%{byte:02X}" for byte in raw)
    if len(name) + len(".json") <= REPORT_NAME_MAX:
        return name
    digest = hashlib.sha256(raw).hexdigest()[:32]
    start = name[:REPORT_NAME_MAX - len(".json") - len("~") - len(digest)]
    if "%" in start[-2:]:  # no escape cut in half: the start stays readable
        start = start[:start.rindex("%")]
    return f"{start}~{digest}"


def read_report(path: Path, *, current_only: bool = False) -> GradeReport | None:
    """The report in ``path`` (upgraded to the current schema), or None when the file is not
    one this grader can read, or with ``current_only``, not written in the current schema."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if current_only and data.get("schema_version") != SCHEMA_VERSION:
            return None
        return GradeReport.from_dict(data)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # AttributeError: JSON that is not an object
        return None


def load_current_report(path: Path, submission: Path) -> GradeReport | None:
    """The report at ``path`` if it is worth keeping and for the submission's current bytes:
    an older schema's report is regraded (an upgraded one lacks what the new version adds).
    The submission is read only when there is such a report to compare it with."""
    report = read_report(path, current_only=True)
    if report is None or report.status == Status.GRADER_ERROR or not report.submission_sha256:
        return None
    try:
        current = submission_sha256(read_submission(submission))
    except Ungradable:  # no longer readable: its report must say so
        return None
    return report if report.submission_sha256 == current else None


def summarize(result: BatchResult) -> dict:
    """Counts by status, per-part statistics, the most frequent hints, timing."""
    stats = result.statistics()
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "assignment": result.assignment.id,
        "submissions": stats.submissions,
        "counts": stats.counts,
        "score": stats.total.stats(),
        "parts": {part_id: scores.stats() for part_id, scores in stats.parts.items()},
        "hints": [{"hint": hint, "count": count} for hint, count in stats.hints],
        "timing": {
            "duration_s": round(result.duration_s, 3),
            "graded": result.graded,
            "skipped_up_to_date": result.skipped,
            "seconds_per_submission": round(result.duration_s / result.graded, 4) if result.graded else None,
        },
    }


def gradebook_csv(result: BatchResult) -> str:
    """One row per submission: submission, status, total, then one column per part."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    rows = [["submission", "status", "total", *result.assignment.parts]]
    for relative, report in result.reports.items():
        scores = {part.id: part.score for part in report.parts}
        rows.append([relative.as_posix(), report.status, f"{report.score:g}",
                     *(f"{scores.get(part_id, 0):g}" for part_id in result.assignment.parts)])
    # Submissions name themselves (a folder called =HYPERLINK(...)): no cell may be a formula.
    writer.writerows([for_csv(cell) for cell in row] for row in rows)
    return buffer.getvalue()


def write_outputs(result: BatchResult, out: Path) -> dict:
    summary = summarize(result)
    write_json(out / "summary.json", summary)
    write_atomic(out / "grades.csv", gradebook_csv(result))
    return summary
