"""A results folder's every file beside the reports, written from one :class:`BatchResult` in
memory: ``summary.json`` and the gradebooks (:mod:`grader.results.outputs`), each student's
feedback pages, and the class report (linking the similarity report, where there is one). ``grade batch`` ends here; ``grade feedback`` and
``grade report`` call the same page writers on a folder read back (:func:`grader.results.folder.read_results`).
"""

from __future__ import annotations

from pathlib import Path

from grader.results.folder import BatchResult
from grader.results.outputs import write_outputs
from grader.views import class_report, feedback_pages, similarity_page


def write_results_folder(result: BatchResult, out: Path, canvas_column: str | None = None, *,
                         missing_zero: bool = False) -> dict:
    """Write it all into ``out``; returns the summary (also kept as ``result.summary``)."""
    result.summary = write_outputs(result, out, canvas_column, missing_zero=missing_zero)
    feedback_pages.write_feedback(result.class_results, out)
    class_report.write_page(result.class_results, out / class_report.PAGE, out / feedback_pages.FOLDER,
                            similarity_page.written(out))
    return result.summary
