"""``check()`` in a notebook: one part's public tests on the notebook's current definitions.

    from grader import check
    check("MultiHeadAttention")     # or check() for every part

As otter's ``grader.check`` does, it runs in the notebook's own kernel, on what the cells
have defined so far (``__main__``'s names, as the module the public tests import), and shows
the result inline: the part's score, the hint, each failing test. It is the student grader's
(:mod:`grader.student.grade`) way of running the public tests, so a test counts the same for both;
only the loading differs, since the kernel has run the cells already. Nothing here is
trusted: it is the student's machine, their code and the public tests.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from pathlib import Path

from grader.core import cells
from grader.core.assemble import assemble_report
from grader.core.assignment import Assignment, AssignmentError
from grader.core.report import GradeReport
from grader.student.grade import HIDDEN_TESTS_NOTE, own_configuration, part_of, read_results, suite_result


def find_assignment(start: Path) -> Assignment:
    """The assignment whose folder holds ``start`` (a notebook runs in its own folder)."""
    for folder in (start, *start.parents):
        if (folder / "assignment.toml").is_file():
            return Assignment.load(folder)
    raise AssignmentError(f"{start} is in no assignment's folder (one with an assignment.toml): "
                          "give it, as check(part, assignment='assignments/03')")


def check_namespace(namespace: dict, part: str | None = None, assignment: Assignment | str | Path | None = None
                    ) -> GradeReport:
    """The public tests of ``part`` (None: every part) on the definitions in ``namespace``."""
    started = time.monotonic()
    if not isinstance(assignment, Assignment):
        assignment = find_assignment(Path.cwd()) if assignment is None else Assignment.load(assignment)
    if part is not None and part not in assignment.parts:
        raise ValueError(f"assignment {assignment.id} has no part {part!r}; its parts: {', '.join(assignment.parts)}")
    module = _module_of(namespace, assignment)
    name = Path(assignment.module).stem
    before, saved = set(sys.modules), sys.modules.get(name)
    sys.modules[name] = module
    try:
        with tempfile.TemporaryDirectory(prefix="grade-check-") as scratch:
            status, error, tests = _run(assignment, part, Path(scratch) / "report.json")
    finally:
        # The tests' modules too: the next check imports them again, with the definitions of then.
        for added in set(sys.modules) - before:
            del sys.modules[added]
        if saved is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = saved
    report = assemble_report(assignment, "your notebook's current definitions", suite_result(assignment, tests, (), ""),
                             status=status, error=error, device="cpu", duration_s=time.monotonic() - started,
                             sandbox=[])
    if part is not None:
        report.parts = [result for result in report.parts if result.id == part]
        report.score, report.max_score = (sum(result.score for result in report.parts),
                                          sum(result.max_score for result in report.parts))
    return report


def _module_of(namespace: dict, assignment: Assignment) -> types.ModuleType:
    """The assignment's module, made of the namespace's names; a contract name it lacks is a
    stand-in that says so, as in the student grader."""
    module = types.ModuleType(Path(assignment.module).stem)
    module.__dict__.update({key: value for key, value in namespace.items() if not key.startswith("__")})
    for name in assignment.parts:
        if name not in assignment.parts_without_stub and name not in module.__dict__:
            setattr(module, name, cells.not_defined(name))
    return module


class _OnlyPart:
    """A pytest plugin that keeps the tests of one part (named as grader.student.grade.part_of reads them)."""

    def __init__(self, part: str, parts: tuple[str, ...]) -> None:
        self.part, self.parts = part, parts

    def pytest_collection_modifyitems(self, config, items) -> None:
        kept = [item for item in items if part_of(item.nodeid, self.parts) == self.part]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


def _run(assignment: Assignment, part: str | None, report_path: Path) -> tuple[str, str | None, list[dict]]:
    import pytest

    arguments = [*(str(path) for path in sorted(assignment.directory.glob("test_*.py"))),
                 *own_configuration(report_path.parent), "--rootdir", str(assignment.directory), "--import-mode=importlib", "-p", "no:cacheprovider",
                 "--capture=sys", "-q", "-p", "pytest_jsonreport.plugin", "--json-report",
                 f"--json-report-file={report_path}"]
    log = io.StringIO()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log), _only_named_plugins():
        exit_code = pytest.main(arguments, plugins=[_OnlyPart(part, assignment.parts)] if part else [])
    return read_results(report_path, int(exit_code), log.getvalue())


@contextlib.contextmanager
def _only_named_plugins() -> Iterator[None]:
    """Only the plugins the run names, as in the student grader's pytest process: others
    installed in the kernel's environment must not change it (nor load one twice)."""
    saved = os.environ.get(_AUTOLOAD)
    os.environ[_AUTOLOAD] = "1"
    try:
        yield
    finally:
        if saved is None:
            del os.environ[_AUTOLOAD]
        else:
            os.environ[_AUTOLOAD] = saved


_AUTOLOAD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"


def check(part: str | None = None, assignment: str | Path | None = None) -> None:
    """Run the public tests of ``part`` (None: every part) on the notebook's current definitions,
    and show the result below the cell."""
    from rich.console import Console
    from rich.text import Text

    from grader.views.terminal import render_report

    report = check_namespace(sys.modules["__main__"].__dict__, part, assignment)
    console = Console()
    console.print(render_report(report, verbose=True))
    console.print(Text(HIDDEN_TESTS_NOTE, style="bold"))
