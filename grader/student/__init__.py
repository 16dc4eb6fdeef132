"""The student's side, all of which ships in the handout (``grade release``): the student's
``grade`` (:mod:`grader.student.grade`, the public tests on the working copy) and ``check()``
in a notebook (:mod:`grader.student.notebook`).
"""

from __future__ import annotations

from collections.abc import Callable

from grader.core import cells


def check_function() -> Callable[..., None]:
    """What ``from grader import check`` gives: :func:`grader.student.notebook.check`, but a check
    that does nothing in a notebook being graded, as otter's does; the grader runs the tests."""
    if cells.loading():
        return _check_while_graded
    from grader.student.notebook import check

    return check


def _check_while_graded(part: str | None = None, assignment: object = None) -> None:
    """``check()`` in a notebook that a grader is loading: nothing to run, nothing to show."""
