"""Grade a folder of submissions: one report per file, a summary and a gradebook CSV.

The ``grade`` process stays the warm parent: it forks up to ``jobs`` suite processes at
a time (each with its own zygote and student children) and waits on their result pipes,
so torch is imported once for the whole batch and no child is reused across
submissions. With ``executor="ray"`` each Ray worker plays that part
(:mod:`grader.ray_executor`). Every report is written atomically as soon as it is ready; a re-run skips
files whose report already holds the same content hash.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import select
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.api import PendingGrade, failed_report, resolve_device, start_grading
from grader.assignment import Assignment
from grader.ingest import Ungradable, read_submission, submission_sha256
from grader.report import SCHEMA_VERSION, GradeReport, Status, write_atomic, write_json
from grader.sandbox.isolation import SandboxUnavailable
from grader.sandbox.limits import Limits
from grader.sanitize import for_csv

SUMMARY_SCHEMA_VERSION = 1
MOST_FREQUENT_HINTS = 10
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


def discover(folder: Path) -> list[Path]:
    """Every file under ``folder`` (relative paths, sorted), hidden files and folders aside.

    All of them get a report: a file that is not ``.py`` or ``.ipynb`` is ungradable, so
    nothing handed in is silently skipped. Sub-folders (one per student, as LMS exports
    do) keep files of the same name apart. A link, to a file or to a folder, is listed as
    it is, never followed: it gets a report saying it is a link.
    """
    found = []
    for root, dirs, files in os.walk(folder):  # lists a link to a folder among dirs, but never enters it
        linked = [name for name in dirs if Path(root, name).is_symlink()]
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in linked)
        found += [Path(root, name).relative_to(folder) for name in files + linked if not name.startswith(".")]
    return sorted(found)


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


def grade_batch(
    assignment: Assignment | str | Path,
    folder: Path,
    out: Path,
    *,
    jobs: int = os.cpu_count() or 1,
    device: str = "auto",
    limits: Limits = Limits(),
    sandbox: str = "basic",
    force: bool = False,
    executor: str = "local",
    ray_address: str | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_report: Callable[[Path, GradeReport], None] | None = None,
) -> BatchResult:
    """Grade every file in ``folder`` into ``out``, here (``executor="local"``) or on a Ray
    cluster (``"ray"``); ``on_start(total, up_to_date)`` and ``on_report(path, report)``
    let a caller show progress."""
    started = time.monotonic()
    if not isinstance(assignment, Assignment):
        assignment = Assignment.load(assignment)
    reports: dict[Path, GradeReport] = {}
    todo: list[Path] = []
    for relative in discover(folder):
        current = None if force else load_current_report(report_path(out, relative), folder / relative)
        if current is None:
            todo.append(relative)
        else:
            reports[relative] = current
    skipped = len(reports)
    if on_start:
        on_start(len(todo) + skipped, skipped)
    if executor == "ray":
        from grader.ray_executor import run_on_ray

        results = run_on_ray(assignment, folder, todo, jobs=jobs, device=device, limits=limits, sandbox=sandbox,
                             address=ray_address)
    else:
        results = run_locally(assignment, folder, todo, jobs=jobs, device=resolve_device(device), limits=limits,
                              sandbox=sandbox)
    with contextlib.closing(results):  # interrupted: the executor stops what still runs
        for relative, report in results:
            report = _written(report, report_path(out, relative), assignment)
            reports[relative] = report
            if on_report:
                on_report(relative, report)
    return BatchResult(assignment, dict(sorted(reports.items())), len(reports) - skipped, skipped,
                       time.monotonic() - started)


def _written(report: GradeReport, path: Path, assignment: Assignment) -> GradeReport:
    """``report``, written to ``path``; when it cannot be, a grader_error report that says why
    (kept in grades.csv and summary.json even if it cannot be written either)."""
    try:
        report.write_json(path)
        return report
    except Exception as exc:  # noqa: BLE001 - one submission's failure is its report, never the batch's
        failed = failed_report(assignment, report.submission, report.device,
                               f"its report could not be written to {path}: {type(exc).__name__}: {exc}")
        with contextlib.suppress(Exception):
            failed.write_json(path)
        return failed


def run_locally(
    assignment: Assignment, folder: Path, todo: list[Path], *, jobs: int, device: str, limits: Limits, sandbox: str
) -> Iterator[tuple[Path, GradeReport]]:
    """Grade on this machine, ``jobs`` submissions at a time, yielding each report when ready.
    A submission whose grading fails in the grader gets a grader_error report; only Ctrl-C (or
    a sandbox this machine cannot give, which no submission would get) stops the batch."""
    todo = list(todo)
    pending: dict[PendingGrade, Path] = {}
    try:
        while todo or pending:
            while todo and len(pending) < max(jobs, 1):
                relative = todo.pop(0)
                try:
                    pending[start_grading(assignment, folder / relative, device=device, limits=limits,
                                          sandbox=sandbox)] = relative
                except SandboxUnavailable:
                    raise
                except Exception as exc:  # noqa: BLE001 - e.g. fork failed: this submission's report says so
                    yield relative, _grader_failed(assignment, folder / relative, device, "grading could not start",
                                                   exc)
            if not pending:
                continue
            wait = max(min(job.deadline for job in pending) - time.monotonic(), 0)
            select.select(list(pending), [], [], wait)
            for job in [job for job in pending if job.poll() or time.monotonic() >= job.deadline]:
                relative = pending.pop(job)
                try:
                    report = job.finish()
                except Exception as exc:  # noqa: BLE001
                    report = _grader_failed(assignment, folder / relative, device, "grading failed", exc)
                yield relative, report
    finally:
        for job in pending:
            job.cancel()


def _grader_failed(assignment: Assignment, submission: Path, device: str, what: str, exc: Exception) -> GradeReport:
    """The report of a submission the grader failed on: regraded by the next run, as every grader_error is."""
    return failed_report(assignment, str(submission), device, f"{what}: {type(exc).__name__}: {exc}")


# ---- views of a batch ----------------------------------------------------------------


@dataclass(frozen=True)
class Scores:
    """The graded submissions' scores for one part (or their totals) and what they are out of."""
    values: list[float]
    max_score: float

    def stats(self) -> dict:
        if not self.values:
            return {"mean": None, "median": None, "max": None, "max_score": self.max_score}
        return {"mean": round(statistics.fmean(self.values), 4), "median": statistics.median(self.values),
                "max": max(self.values), "max_score": self.max_score}


@dataclass(frozen=True)
class ClassStatistics:
    """What a class's reports add up to: ``summary.json`` and ``grade report`` show it."""
    submissions: int
    counts: dict[str, int]  # by status
    total: Scores
    parts: dict[str, Scores]
    hints: list[tuple[str, int]]  # "part: hint" of parts that lost points, most frequent first


def class_statistics(part_ids: Iterable[str], reports: Sequence[GradeReport]) -> ClassStatistics:
    """Scores count for graded reports only; max scores come from every report, since an
    ungradable one still lists each part with its max_score."""
    graded = [report for report in reports if report.status == Status.GRADED]
    parts = {}
    for part_id in part_ids:
        scores = [part.score for report in graded for part in report.parts if part.id == part_id]
        max_score = max((part.max_score for report in reports for part in report.parts if part.id == part_id), default=0)
        parts[part_id] = Scores(scores, max_score)
    hints = Counter(f"{part.id}: {part.hint}" for report in graded for part in report.parts
                    if part.hint and part.score < part.max_score)
    return ClassStatistics(
        submissions=len(reports),
        counts={status: sum(r.status == status for r in reports)
                for status in (Status.GRADED, Status.UNGRADABLE, Status.GRADER_ERROR)},
        total=Scores([r.score for r in graded], max((r.max_score for r in reports), default=0)),
        parts=parts,
        hints=hints.most_common(MOST_FREQUENT_HINTS),
    )


def summarize(result: BatchResult) -> dict:
    """Counts by status, per-part statistics, the most frequent hints, timing."""
    stats = class_statistics(result.assignment.parts, list(result.reports.values()))
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
