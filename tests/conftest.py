"""Shared helpers: write a submission, grade it with short limits, build notebooks."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.api import grade
from grader.report import GradeReport
from grader.sandbox.limits import Limits

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT_03 = ROOT / "assignments" / "03"
# Short enough to keep the suite quick, long enough for a correct submission on a busy CI box.
TEST_LIMITS = Limits(call_timeout_s=5.0, cell_timeout_s=2.0, memory_bytes=2 * 2**30)


def notebook_text(*cells: str, markdown_first: bool = True) -> str:
    nb_cells = [new_markdown_cell("# My solution")] if markdown_first else []
    nb_cells += [new_code_cell(source) for source in cells]
    return nbformat.writes(new_notebook(cells=nb_cells))


@pytest.fixture
def grade_source(tmp_path):
    """grade_source(text, suffix=".py") -> GradeReport for assignment 03."""
    def run(text: str | bytes, suffix: str = ".py", assignment: Path = ASSIGNMENT_03, **kwargs) -> GradeReport:
        path = tmp_path / f"submission{suffix}"
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        return grade(assignment, path, device="cpu", limits=kwargs.pop("limits", TEST_LIMITS), **kwargs)
    return run


def part(report: GradeReport, part_id: str):
    return next(p for p in report.parts if p.id == part_id)
