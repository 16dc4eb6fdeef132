"""Batch grading on a Ray cluster (``grade batch ... --executor ray``; extra ``ray``).

Each task carries one submission's bytes to a Ray worker, which grades it exactly as
``grade`` does: the worker is the trusted parent, and the student's code still runs in a
sandboxed child forked there. Reports come back as plain dicts and are written by the
driver, so the results folder is the same as with the local executor. Workers need the
grader installed (same version); they need not see the submissions folder.

The driver reads each submission as ``grade`` does (:func:`grader.core.ingest.read_submission`):
a file it refuses to read (a link, not a regular file, too large) is never shipped, and is
reported here, where the refusal is made; no student code runs for it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from grader.core.assemble import failed_report
from grader.core.assignment import Assignment
from grader.core.ingest import Ungradable, read_submission
from grader.core.report import GradeReport
from grader.engine.api import grade
from grader.engine.options import GradeOptions
from grader.sandbox.limits import Limits

GPU_FRACTION_PER_TASK = 0.25  # four submissions share a GPU; each child's memory is capped too


def _grade_on_worker(assignment_dir: str, name: str, content: bytes, label: str, device: str, limits: dict,
                     sandbox: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="grader-ray-") as tmp:
        path = Path(tmp) / name  # the name keeps its suffix: .py or .ipynb
        path.write_bytes(content)
        report = grade(assignment_dir, path, device=device, limits=Limits(**limits), sandbox=sandbox)
    report.submission = label  # the path as given on the driver, as `grade` would write
    return report.to_dict()


def run_on_ray(
    assignment: Assignment,
    folder: Path,
    todo: list[Path],
    *,
    jobs: int,
    options: GradeOptions,
    address: str | None = None,
) -> Iterator[tuple[Path, GradeReport]]:
    """Submit every file as a task; yield each report as it completes."""
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        address = address or os.environ.get("RAY_ADDRESS")
        with _stdout_to_stderr():
            # No address: start a local cluster with `jobs` CPUs, so --jobs means the same here.
            ray.init(address=address, num_cpus=None if address else jobs, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
    task = ray.remote(num_cpus=1, num_gpus=GPU_FRACTION_PER_TASK if options.device == "cuda" else 0,
                      max_retries=0)(_grade_on_worker)
    assignment_dir = str(assignment.directory.resolve())
    pending = {}
    try:
        for relative in todo:
            try:
                content = read_submission(folder / relative)
            except Ungradable:  # refused unread: the report that says why needs no worker (nor a device)
                yield relative, grade(assignment, folder / relative, device="cpu", limits=options.limits,
                                      sandbox=options.sandbox)
                continue
            pending[task.remote(assignment_dir, relative.name, content, str(folder / relative), options.device,
                                asdict(options.limits), options.sandbox)] = relative
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            relative = pending.pop(ready[0])
            try:
                report = GradeReport.from_dict(ray.get(ready[0]))
            except ray.exceptions.RayError as exc:  # the worker died or raised: the grader's fault
                report = failed_report(assignment, str(folder / relative), options.device,
                                       f"the Ray task failed: {type(exc).__name__}: {str(exc)[:500]}")
            yield relative, report
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started_here:
            with _stdout_to_stderr():
                ray.shutdown()


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Ray's processes inherit the descriptors open while it starts and stops, and print
    notices on stdout; send them to stderr, so stdout stays the JSON summary."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
