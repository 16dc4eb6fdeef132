"""What Jupyter gives a cell's code without an import: ``get_ipython()`` and ``display()``.

A notebook handed in as a .py (``jupyter nbconvert --to script``, or "Download as Python")
has each of its magics turned into a call of ``get_ipython()``, which no plain Python
defines: the module ended at its first ``%matplotlib inline`` and lost every part. Both graders
give a submission's cells these names as builtins, meaning what they mean for a notebook's
cells (grader.core.ingest.strip_magics): a line magic or a shell line does nothing, a cell
magic whose body is Python (``%%time``) runs its body, any other cell magic does nothing.
A submission's own definitions of these names come first, as builtins do.
"""

from __future__ import annotations

import builtins
from typing import Any

from grader.core.ingest import PYTHON_CELL_MAGICS


class _Shell:
    """The part of IPython's shell that exported notebooks call."""

    def __init__(self, namespace: dict):
        self._namespace = namespace

    def run_line_magic(self, magic_name: str, line: str, _stack_depth: int = 1) -> None:
        return None

    def magic(self, line: str) -> None:
        return None

    def system(self, command: str) -> None:
        return None

    def getoutput(self, command: str, split: bool = True) -> list[str]:
        return []  # `files = !ls`: the shell line ran nothing

    def run_cell_magic(self, magic_name: str, line: str, cell: str) -> None:
        if magic_name in PYTHON_CELL_MAGICS:
            exec(compile(cell, f"%%{magic_name} cell", "exec"), self._namespace)

    def __repr__(self) -> str:
        return "<the grader's stand-in for IPython's shell>"


def give_jupyter_names(namespace: dict) -> None:
    """Make ``get_ipython`` and ``display`` builtins of the code run in ``namespace``."""
    shell = _Shell(namespace)

    def display(*objects: Any, **options: Any) -> None:
        print(*objects)

    namespace["__builtins__"] = {**vars(builtins), "get_ipython": lambda: shell, "display": display}
