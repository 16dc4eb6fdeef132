"""Grade a folder of submissions into a results folder (:mod:`grader.results.folder`): the
reports, then everything made from them (:mod:`grader.views.results_folder`), from memory.

The ``grade`` process stays the warm parent: it forks up to ``jobs`` suite processes at
a time (each with its own zygote and student children) and waits on their result pipes,
so torch is imported once for the whole batch and no child is reused across
submissions. With ``executor="ray"`` each Ray worker plays that part
(:mod:`grader.engine.ray_executor`). Every report is written atomically as soon as it is ready; a re-run skips
files whose report still holds (its fingerprint). The instructor's overrides (:mod:`grader.results.overrides`)
are applied on every run, to the reports reused and new alike, once every report is there.
"""

from __future__ import annotations

import contextlib
import select
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from grader.core.assemble import failed_report
from grader.core.assignment import Assignment
from grader.core.fingerprint import Fingerprint
from grader.core.report import GradeReport
from grader.engine.api import PendingGrade, resolve_device, start_grading
from grader.engine.options import DEFAULT, DEFAULT_BATCH, BatchOptions, GradeOptions
from grader.results.changes import keep_replaced, run_stamp
from grader.results.folder import (
    BatchResult,
    Regrade,
    previous_gradebook,
    prune_reports,
    report_path,
    stored_reports,
    why_graded,
)
from grader.results.overrides import Overrides
from grader.results.students import Roster, handins
from grader.results.submissions import discover
from grader.sandbox.isolation import SandboxUnavailable
from grader.sandbox.limits import Limits
from grader.similarity.report import SimilarityOptions, find_similar
from grader.views.results_folder import write_results_folder
from grader.views.similarity_page import write_report


def grade_batch(
    assignment: Assignment | str | Path,
    folder: Path,
    out: Path,
    *,
    jobs: int = DEFAULT_BATCH.jobs,
    device: str = DEFAULT.device,
    limits: Limits = DEFAULT.limits,
    sandbox: str = DEFAULT.sandbox,
    force: bool = False,
    executor: str = DEFAULT_BATCH.executor,
    ray_address: str | None = None,
    roster: Roster | None = None,
    all_files: bool = DEFAULT_BATCH.all_files,
    canvas_column: str | None = None,
    missing: str = DEFAULT_BATCH.missing,
    overrides: Overrides | None = None,
    similarity: SimilarityOptions | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_begin: Callable[[Path], None] | None = None,
    on_report: Callable[[Path, GradeReport], None] | None = None,
) -> BatchResult:
    """Grade the file each student's grade comes from (``all_files``: every file) in ``folder``
    into ``out``, here (``executor="local"``) or on a Ray cluster (``"ray"``); ``roster`` names
    the students (default: one per folder, see :mod:`grader.results.students`). ``on_start(total,
    up_to_date)``, ``on_begin(path)`` (when a file starts grading here; a Ray cluster starts
    them all at once) and ``on_report(path, report)`` let a caller show progress;
    ``canvas_column`` names the Canvas gradebook's column and ``missing`` says what the LMS
    gradebooks give a student with no submission (:mod:`grader.results.lms_gradebooks`);
    ``overrides`` are the instructor's parts and files (an OverrideError, raised before any
    file is graded where it can be decided then, else before the results folder is written,
    names each row that cannot be applied). With ``similarity``, the files graded for the students
    are also compared with each other (and with known sources) into ``similarity.json`` and
    ``similarity.html`` (:mod:`grader.similarity`), which the class report links; no grade depends on it.
    The options are :class:`~grader.engine.options.GradeOptions`' and
    :class:`~grader.engine.options.BatchOptions`' fields. Returns the batch, its results folder
    written (``result.summary`` is summary.json's content)."""
    started = time.monotonic()
    options = GradeOptions(device=device, sandbox=sandbox, limits=limits)
    batch = BatchOptions(jobs=jobs, executor=executor, all_files=all_files, missing=missing)
    if not isinstance(assignment, Assignment):
        assignment = Assignment.load(assignment)
    if batch.executor != "ray":  # a Ray worker resolves the device where it grades
        options = replace(options, device=resolve_device(options.device))
    overrides = overrides or Overrides()
    stored = stored_reports(out, assignment.id)  # checks the folder is the assignment's, before anything is written
    files = discover(folder)
    students = handins(files, folder, assignment, roster, all_files=batch.all_files, pins=overrides.pins())
    overrides.check(students, assignment.parts)  # and there
    graded = files if batch.all_files else sorted(handin.graded for handin in students if handin.graded)
    before, stamp = previous_gradebook(out), run_stamp(out)
    removed = prune_reports(out, graded, stamp)  # also those of files an --all-files run graded
    settled = Fingerprint.of(assignment, options)  # what decides every file's grade but its bytes
    reports: dict[Path, GradeReport] = {}  # as their files say
    why: dict[Path, str] = {}
    earlier = {relative: stored[name] for relative in graded if (name := report_path(out, relative).name) in stored}
    for relative in graded:
        report = earlier.get(relative)
        reason = "--force" if force and report else why_graded(report, settled, folder / relative)
        if reason is None:
            reports[relative] = report
        else:
            why[relative] = reason
    skipped = len(reports)
    if on_start:
        on_start(len(why) + skipped, skipped)
    if batch.executor == "ray":
        from grader.engine.ray_executor import run_on_ray

        results = run_on_ray(assignment, folder, list(why), jobs=batch.jobs, options=options, address=ray_address)
    else:
        results = run_locally(assignment, folder, list(why), jobs=batch.jobs, options=options, on_begin=on_begin,
                              settled=settled, private=(folder, out))
    with contextlib.closing(results):  # interrupted: the executor stops what still runs
        for relative, report in results:
            path = report_path(out, relative)
            if (previous := earlier.get(relative)) is not None:
                keep_replaced(out, stamp, path.name, previous)
            reports[relative] = _written(report, path, assignment)
            if on_report:
                on_report(relative, reports[relative])
    final = overrides.apply(students, reports)
    for relative, report in final.items():
        if report != reports[relative]:  # an override added, changed or taken off: the file says so too
            path = report_path(out, relative)
            if relative not in why:  # a reused report: kept as it was, as a regraded one is
                keep_replaced(out, stamp, path.name, reports[relative])
            final[relative] = _written(report, path, assignment)
    result = BatchResult(assignment, dict(sorted(final.items())), len(reports) - skipped, skipped,
                         time.monotonic() - started, students, removed,
                         Regrade(stamp, why, earlier, before))
    if similarity is not None:  # before the class report, which links it
        try:
            write_report(find_similar(assignment, folder, students, against=similarity.against,
                                      threshold=similarity.threshold), out)
        except Exception as exc:  # no grade depends on it: the results folder is written all the same
            result.similarity_error = f"{type(exc).__name__}: {exc}"
    write_results_folder(result, out, canvas_column, missing_zero=batch.missing == "zero")
    return result


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
    assignment: Assignment, folder: Path, todo: list[Path], *, jobs: int, options: GradeOptions,
    on_begin: Callable[[Path], None] | None = None, settled: Fingerprint | None = None,
    private: Sequence[Path] | None = None,
) -> Iterator[tuple[Path, GradeReport]]:
    """Grade on this machine, ``jobs`` submissions at a time, yielding each report when ready.
    ``private``: what no student's process may see (the class's folder and its results; by
    default each submission's own folder).
    A submission whose grading fails in the grader gets a grader_error report; only Ctrl-C (or
    a sandbox this machine cannot give, which no submission would get) stops the batch."""
    todo = list(todo)
    pending: dict[PendingGrade, Path] = {}
    try:
        while todo or pending:
            while todo and len(pending) < max(jobs, 1):
                relative = todo.pop(0)
                if on_begin:
                    on_begin(relative)
                try:
                    pending[start_grading(assignment, folder / relative, options, settled, private)] = relative
                except SandboxUnavailable:
                    raise
                except Exception as exc:  # noqa: BLE001 - e.g. fork failed: this submission's report says so
                    yield relative, _grader_failed(assignment, folder / relative, options.device,
                                                   "grading could not start", exc)
            if not pending:
                continue
            wait = max(min(job.deadline for job in pending) - time.monotonic(), 0)
            select.select(list(pending), [], [], wait)
            for job in [job for job in pending if job.poll() or time.monotonic() >= job.deadline]:
                relative = pending.pop(job)
                try:
                    report = job.finish()
                except Exception as exc:  # noqa: BLE001
                    report = _grader_failed(assignment, folder / relative, options.device, "grading failed", exc)
                yield relative, report
    finally:
        for job in pending:
            job.cancel()


def _grader_failed(assignment: Assignment, submission: Path, device: str, what: str, exc: Exception) -> GradeReport:
    """The report of a submission the grader failed on: regraded by the next run, as every grader_error is."""
    return failed_report(assignment, str(submission), device, f"{what}: {type(exc).__name__}: {exc}")
