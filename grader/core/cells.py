"""Loading a submission cell by cell, as the grader does it: the rules, their words, and the
student grader's way of applying them.

The grader runs a submission's cells (a module is one cell) in its sandboxed child, and the
parent enforces the time limits by killing that child (:mod:`grader.sandbox.child_process`).
The student's grader (:mod:`grader.student.grade`) cannot: its public tests import the assignment's
module in a pytest process, so the module it writes for them (:func:`write_loader`) runs the
cells with :func:`run_cells`, here, an alarm bounding each. Both run the cells that
:func:`grader.core.ingest.load_submission` keeps, in order; go on after a cell that raises; skip a
cell that runs past its time limit; stop when loading runs past its total; and say so in the
same words (the functions below), so that the two graders load a notebook alike.
"""

from __future__ import annotations

import __future__
import ast
import contextlib
import io
import json
import linecache
import signal
import time
import types
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from grader.core.ingest import Program
from grader.core.jupyter_names import give_jupyter_names
from grader.core.not_installed import MAX_PER_CELL, run_standing_in
from grader.core.sanitize import clean

SPEC, NOTES, OUTPUT = "cells.json", "cells-notes.json", "cells-output.txt"  # beside the loader module
MESSAGE_CHARS = 300
OUTPUT_CHARS = 20_000


def where(kind: str, label: str) -> str:
    """How a note names the cell: "cell 4" in a notebook, "your module (mha.py)" otherwise."""
    return label if kind == "notebook" else f"your module ({label})"


def raised(where_: str, type_name: str, message: str, went_on: int | None = None) -> str:
    """``went_on``: for a module, how many of its statements after the one that raised did too
    (each runs: see :func:`run_cell`)."""
    if went_on is None:
        return f"{where_} raised {type_name}: {message}"
    more = f"; {went_on} more raised" if went_on else ""
    return f"{where_} raised {type_name}: {message} (its other statements ran all the same{more})"


def ran_past(cell_timeout_s: float) -> str:
    return f"ran past the time limit of {cell_timeout_s:g} s"


def would_not_stop(cell_timeout_s: float) -> str:
    return (f"{ran_past(cell_timeout_s)} and did not stop when told to (an `except:` that catches everything "
            "swallows the stop)")


def took_too_long(load_timeout_s: float) -> str:
    return f"loading your code took longer than {load_timeout_s:g} s in total"


def let_through(where_: str, packages: list[str]) -> str:
    names = ", ".join(packages)
    return (f"{where_} imports {names}, not installed where your code is graded: the import was let through, "
            "and any use of it raises ModuleNotFoundError")


def stopped(where_: str, cell_timeout_s: float) -> str:
    return f"{where_} {ran_past(cell_timeout_s)} and was stopped there; what it defined stays"


def exception_message(exc: BaseException) -> str:
    """An exception's message, as the notes and the report quote it."""
    return f"sys.exit({exc.code!r}) was called" if isinstance(exc, SystemExit) else str(exc)


def skipped(where_: str, why: str) -> str:
    return f"{where_} {why}; it was skipped"


def not_run_after(where_: str, why: str) -> str:
    return f"{where_} and the cells after it were not run: {why}"


# ---- the student grader's loader -------------------------------------------------------

_LOADER = '''"""Written by the student grader: runs your {kind}'s cells as the grader does (grader.core.cells)."""
from grader.core.cells import run_cells

run_cells(globals(), __file__)
'''


class NotDefined(Exception):
    """What calling a name the submission does not define raises, in the student grader."""


def write_loader(program: Program, directory: Path, module: str, names: tuple[str, ...], cell_timeout_s: float,
                 load_timeout_s: float) -> Path:
    """Write ``directory/module``: a module that, imported, runs ``program``'s cells into itself.
    Each of ``names`` the cells leave undefined is a stand-in that raises :class:`NotDefined`, so
    that the module imports and only the parts that need it fail, as in the grader."""
    spec = {"kind": program.kind, "cells": [[cell.label, cell.source] for cell in program.cells],
            "names": list(names), "cell_timeout_s": cell_timeout_s, "load_timeout_s": load_timeout_s}
    (directory / SPEC).write_text(json.dumps(spec), encoding="utf-8")
    path = directory / module
    path.write_text(_LOADER.format(kind=program.kind), encoding="utf-8")
    return path


class CellTimedOut(BaseException):
    """Raised by the alarm into a cell running past its time limit; a BaseException, so
    `except Exception` in the cell does not swallow it."""


def run_cells(namespace: dict, loader_file: str) -> None:
    """Run the cells of the spec beside ``loader_file`` into ``namespace``; write the notes and
    what the cells printed beside it."""
    folder = Path(loader_file).parent
    spec = json.loads((folder / SPEC).read_text(encoding="utf-8"))
    kind, cell_timeout_s, load_timeout_s = spec["kind"], spec["cell_timeout_s"], spec["load_timeout_s"]
    notes: list[str] = []
    printed = io.StringIO()
    started = time.monotonic()
    # A notebook runs as __main__, as in Jupyter and in the grader; a module is imported.
    own_name = namespace.get("__name__")
    if kind == "notebook":
        namespace["__name__"] = "__main__"
    give_jupyter_names(namespace)
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed), loading_submission():
            for label, source in spec["cells"]:
                here, left = where(kind, label), load_timeout_s - (time.monotonic() - started)
                run = (run_cell(namespace, label, source, min(cell_timeout_s, left), module=kind == "module")
                       if left > 0 else CellRun(stopped=[0]))
                if run.stood_in:
                    notes.append(let_through(here, run.stood_in))
                if run.errors:
                    first = run.errors[0]
                    notes.append(raised(here, type(first).__name__, clean(exception_message(first), MESSAGE_CHARS),
                                        went_on=run.later_errors))
                if run.stopped and cell_timeout_s < left:
                    notes.append(stopped(here, cell_timeout_s))
                elif run.stopped:
                    notes.append(not_run_after(here, took_too_long(load_timeout_s)))
                    break
    finally:
        namespace["__name__"] = own_name
        for name in spec["names"]:
            namespace.setdefault(name, not_defined(name))
        (folder / NOTES).write_text(json.dumps(notes), encoding="utf-8")
        (folder / OUTPUT).write_text(printed.getvalue()[-OUTPUT_CHARS:], encoding="utf-8")


_loading = False  # a grader is running a submission's cells in this process


@contextlib.contextmanager
def loading_submission() -> Iterator[None]:
    """While a grader runs a submission's cells (this module's loader, or the real grader's
    child): the notebook's ``check()`` cells do nothing (see :func:`check_while_graded`)."""
    global _loading
    was, _loading = _loading, True
    try:
        yield
    finally:
        _loading = was


def loading() -> bool:
    """Whether a grader is running a submission's cells in this process."""
    return _loading


def check_while_graded(part: str | None = None, assignment: object = None) -> None:
    """What ``from grader import check`` gives while :func:`loading`, as otter's check does in a
    notebook being graded: nothing to run, nothing to show; the grader runs the tests.

    The package's face (``grader/__init__.py``, and the handout's) gives it before importing
    anything else: the grader's sandboxed child holds this module, imported before it was
    confined, and may read no other file of the grader (Landlock), so importing the real
    check there would fail the cell.
    """


def not_defined(name: str) -> Callable[..., NoReturn]:
    """A stand-in for a name the submission does not define: calling it says so."""
    def stand_in(*args, **kwargs):
        raise NotDefined(f"not found: your submission does not define `{name}`")

    return stand_in


def readable_source(label: str, source: str) -> None:
    """Let Python find a cell's source under its label, as Jupyter does for its cells: code
    that reads its own (``inspect.getsource``, ``@torch.jit.script``) runs as it does there."""
    linecache.cache[label] = (len(source), None, source.splitlines(keepends=True), label)


@dataclass
class CellRun:
    """How a cell ran (:func:`run_cell`)."""

    stood_in: list[str] = field(default_factory=list)  # packages not installed here, stood in for
    errors: list[BaseException] = field(default_factory=list)  # what its statements raised, the first first
    stopped: list[int] = field(default_factory=list)  # its top-level statements stopped at the time limit
    went_on: bool = False  # a module with statements after its first error, which ran

    @property
    def later_errors(self) -> int | None:
        """How many of a module's statements after its first error raised too; None where the
        cell ended at its first error (a notebook's, or a module's last statement's)."""
        return len(self.errors) - 1 if self.errors and (self.went_on or self.stopped) else None


def run_cell(namespace: dict, label: str, source: str, limit_s: float, *, module: bool = False,
             skip: Collection[int] = ()) -> CellRun:
    """Run one cell into ``namespace`` as both graders do: its source readable
    (:func:`readable_source`), an import of a package not installed here stood in for
    (:func:`run_standing_in`), and stopped once it runs past ``limit_s`` of wall clock by a
    :class:`CellTimedOut` raised into it: what it defined before then stays.

    A notebook's cell ends at its first error or stop, as in Jupyter. A ``module``'s top-level
    statements are its cells: each has ``limit_s`` and runs whatever those before it raised or
    ran into (a script that reads its data file first, or trains before its last classes, keeps
    them); ``sys.exit()`` still ends it. ``skip``: the statements an earlier student process of
    the same grading was stopped in (:attr:`CellRun.stopped`), which a later one skips, with
    the rest of a notebook's cell, so that every process holds what the first one did."""
    def alarm(signum, frame):
        raise CellTimedOut

    try:
        previous = signal.signal(signal.SIGALRM, alarm)
    except ValueError:  # not the main thread: no alarm can be set, so no time limit
        previous = None
    run = CellRun()
    try:
        readable_source(label, source)
        for index, code in enumerate(_statements(source, label)):
            if index in skip or (not module and skip and index > min(skip)):
                continue
            if previous is not None and (module or index == 0):
                # Then again every second: a cell that catches the first (a bare `except:`) gets another.
                signal.setitimer(signal.ITIMER_REAL, limit_s, 1.0)
            run.went_on = bool(run.errors)
            stood_in, exc = run_standing_in(lambda: exec(code(), namespace), MAX_PER_CELL - len(run.stood_in))
            run.stood_in += stood_in
            if isinstance(exc, CellTimedOut):
                run.stopped.append(index)
                if not module:
                    break
            elif exc is not None:
                run.errors.append(exc)
                if not (module and isinstance(exc, Exception)):  # sys.exit() ends a module, as in Python
                    break
        return run
    finally:
        if previous is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def _statements(source: str, label: str) -> list[Callable[[], types.CodeType]]:
    """A cell's top-level statements, each compiled on its own with the cell's line numbers and
    ``__future__`` imports (so that a stop is known by its statement); the whole cell as one
    where it does not parse."""
    try:
        tree = ast.parse(source, label)
    except (SyntaxError, ValueError):
        return [lambda: compile(source, label, "exec")]
    flags = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                flags |= getattr(getattr(__future__, alias.name, None), "compiler_flag", 0)
    return [lambda node=node: compile(ast.Module(body=[node], type_ignores=[]), label, "exec",
                                      flags=flags, dont_inherit=True) for node in tree.body]


def loading_result(directory: Path) -> tuple[list[str], str]:
    """The notes and the output :func:`run_cells` left in ``directory`` (none if it never ran)."""
    try:
        notes = json.loads((directory / NOTES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        notes = []
    try:
        output = (directory / OUTPUT).read_text(encoding="utf-8", errors="replace")
    except OSError:
        output = ""
    return [str(note) for note in notes], output
