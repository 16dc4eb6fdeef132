"""The student's ``grade``: an assignment's public tests on the working copy, as a table.

This is the grader that ``grade release`` ships in the handout, without the reference or
any hidden suite. Its score counts public tests (shapes, sanity checks), so it is not the
grade: the hidden tests run when the work is submitted. The student's code runs in a pytest
subprocess, never in this process.

    grade assignments/03                      # the working copy: module or notebook
    grade assignments/03 --submission FILE -v
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.text import Text

from grader.core import cells, hints
from grader.core.assemble import assemble_report
from grader.core.assignment import Assignment, AssignmentError
from grader.core.ingest import Program, Ungradable, load_submission
from grader.core.outcome import SuiteResult, TestOutcome, Verdict
from grader.core.public_cases import MISTAKE_PREFIX
from grader.core.report import GradeReport, Outcome, Status
from grader.sandbox.limits import Limits
from grader.views.terminal import error_text, render_report

EXIT_OK, EXIT_GRADER_ERROR, EXIT_USAGE = 0, 1, 2  # as the full grader's (grader/cli.py)
EXIT_INTERRUPTED = 130  # as a shell reports Ctrl-C
PUBLIC_TESTS_TIMEOUT_S = 300.0
HIDDEN_TESTS_NOTE = ("These are the public tests only, so this score is not your grade: "
                     "the hidden tests run on submission.")
OTHER_PART = "other public tests"  # for a test whose name names no part
# A test's own check failing, as opposed to the student's code raising.
_TEST_FAILURES = ("AssertionError", "Failed")
# A public test names the mistake it caught in its assertion's message (MISTAKE_PREFIX, as
# grader.core.public_cases writes it): that is the part's hint.
_MISTAKE = re.compile(rf"{MISTAKE_PREFIX}(.+)")


def grade_public(assignment: Assignment | str | Path, submission: str | Path | None = None,
                 timeout_s: float = PUBLIC_TESTS_TIMEOUT_S, limits: Limits = Limits()) -> GradeReport:
    """Run the public tests on ``submission`` (default: the working copy) and report per part.
    Its cells are loaded as the grader loads them, with ``limits``' time per cell and in all
    (:mod:`grader.core.cells`); ``timeout_s`` bounds the whole run."""
    started = time.monotonic()
    if not isinstance(assignment, Assignment):
        assignment = Assignment.load(assignment)
    path = Path(submission) if submission is not None else assignment.working_copy()
    try:
        program = load_submission(path)
    except (Ungradable, OSError) as exc:
        why = str(exc) if isinstance(exc, Ungradable) else f"the file cannot be read: {exc.strerror or exc}"
        status, error, result = Status.UNGRADABLE, why, SuiteResult()
    else:
        status, error, tests, notes, printed = _run_public_tests(assignment, program, limits, timeout_s)
        result = suite_result(assignment, tests, (*program.notes, *notes), printed)
    return assemble_report(assignment, str(submission if submission is not None else path), result, status=status,
                           error=error, device="cpu", duration_s=time.monotonic() - started, sandbox=[])


def suite_result(assignment: Assignment, tests: list[dict], notes: tuple[str, ...], printed: str) -> SuiteResult:
    """The public tests' results (pytest-json-report's) as the grader's own suites give theirs."""
    return SuiteResult(tuple(_outcome(test, assignment.parts) for test in tests), notes, printed + _printed(tests))


def part_of(test_id: str, part_ids: tuple[str, ...]) -> str:
    """The part a public test checks, from its name: ``test_multi_head_attention_...`` checks
    ``MultiHeadAttention`` (the longest part name that starts it, for parts that share a prefix).

    Not from a ``part`` marker, as hidden tests say it: public tests are the student's to read
    and run with plain ``pytest``, where an unregistered marker warns, and their names already
    follow the contract (``test_<part>_<property>``)."""
    name = test_id.rpartition("::")[2].removeprefix("test_")
    named = [part for part in part_ids if name == _snake(part) or name.startswith(_snake(part) + "_")]
    return max(named, key=len, default=OTHER_PART)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _run_public_tests(assignment: Assignment, program: Program, limits: Limits,
                      timeout_s: float) -> tuple[str, str | None, list[dict], list[str], str]:
    """(status, error, pytest-json-report's tests, notes, what loading printed) for the public
    tests run on ``program``."""
    with tempfile.TemporaryDirectory(prefix="grade-public-") as scratch:
        scratch_dir = Path(scratch)
        # The module the tests import runs the program's cells as the grader loads them.
        names = tuple(name for name in assignment.parts if name not in assignment.parts_without_stub)
        cells.write_loader(program, scratch_dir, assignment.module, names, limits.cell_timeout_s, limits.load_timeout_s)
        report_path, log_path = scratch_dir / "report.json", scratch_dir / "pytest.log"
        exit_code = _pytest(assignment, scratch_dir, report_path, log_path, timeout_s)
        notes, printed = cells.loading_result(scratch_dir)
        if exit_code is None:
            return (Status.UNGRADABLE,
                    f"the public tests did not finish in {timeout_s:g} s: look for a loop that never ends",
                    [], notes, printed)
        status, error, tests = read_results(report_path, exit_code, log_path.read_text(encoding="utf-8", errors="replace"))
    return status, error, tests, notes, printed


def read_results(report_path: Path, exit_code: int, log: str) -> tuple[str, str | None, list[dict]]:
    """(status, error, the tests that ran) from pytest's exit code and pytest-json-report's file."""
    report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.is_file() else {}
    broken = [collector for collector in report.get("collectors", []) if collector.get("outcome") == "failed"]
    if broken:
        return Status.UNGRADABLE, f"the public tests cannot import your code: {_last_error(broken[0]['longrepr'])}", []
    # 5: every test deselected, which check() of a part without public tests does.
    if exit_code not in (0, 1, 5) or "tests" not in report:
        return Status.GRADER_ERROR, f"pytest failed to run the public tests (exit code {exit_code}): {log[-2000:]}", []
    return Status.GRADED, None, [test for test in report["tests"] if test["outcome"] != "skipped"]


def own_configuration(scratch: Path) -> list[str]:
    """pytest's options for a configuration of the run's own, written in ``scratch``: a pytest.ini
    or pyproject.toml above the assignment (the course repository's, the student's own) must
    not add options or plugins to the public tests."""
    config = scratch / "pytest.ini"
    config.write_text("[pytest]\n", encoding="utf-8")
    return ["-c", str(config)]


def _pytest(assignment: Assignment, module_dir: Path, report_path: Path, log_path: Path,
            timeout_s: float) -> int | None:
    """pytest's exit code on the public tests importing the module in ``module_dir``; None on timeout."""
    command = [
        # -S as we were started: pytest and torch must come from where this grader found them.
        sys.executable, *(["-S"] if sys.flags.no_site else []),
        # -P keeps the assignment folder (the cwd) off the front of sys.path and
        # --import-mode=append puts it last: the module in module_dir is the one imported.
        "-P", "-m", "pytest", *sorted(path.name for path in assignment.directory.glob("test_*.py")),
        *own_configuration(report_path.parent), "--rootdir", ".", "--import-mode=append", "-p", "no:cacheprovider",
        "-q",
        "-p", "pytest_jsonreport.plugin", "--json-report", f"--json-report-file={report_path}",
    ]
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(module_dir), os.environ.get("PYTHONPATH")])),
           # Only the plugins named above: others installed here must not change the run.
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    with log_path.open("wb") as log:
        # A session of its own, so that a timeout kills whatever the student's code started too.
        process = subprocess.Popen(command, cwd=assignment.directory, env=env, stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None
        finally:
            _kill_group(process)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group has ended already
    process.wait()


def _last_error(longrepr: str) -> str:
    """The exception line of a pytest traceback ("E   NameError: ..."), else its last line."""
    lines = [line for line in longrepr.splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return (errors or lines or [""])[-1]


def _outcome(test: dict, part_ids: tuple[str, ...]) -> TestOutcome:
    """A test of pytest-json-report's, judged as the grader judges hidden tests
    (:func:`grader.engine.plugin.classify`) as far as its JSON tells: a failed check is ``failed``, the
    student's code raising is ``error`` with the hint the exception suggests, a stub ``failed``."""
    part = part_of(test["nodeid"], part_ids)
    name = test["nodeid"].rpartition("::")[2]
    return TestOutcome(name, part, 1.0, _verdict(test, part))


def _verdict(test: dict, part: str) -> Verdict:
    if test["outcome"] == "passed":
        return Verdict(Outcome.PASSED)
    stage = next((test[when] for when in ("setup", "call", "teardown")
                  if test.get(when, {}).get("outcome") not in (None, "passed")), {})
    message = stage.get("crash", {}).get("message") or _last_error(stage.get("longrepr", ""))
    # The innermost traceback entry names the exception's type; the message may not
    # (a failed `assert` reads "assert False ...").
    type_name = (stage.get("traceback") or [{}])[-1].get("message") or message.partition(": ")[0]
    if type_name in _TEST_FAILURES:
        named = _MISTAKE.search(message)
        if named:  # the test's own words say it all; pytest's "assert not True + where ..." repeats tensors
            return Verdict(Outcome.FAILED, message.partition("\nassert ")[0], named[1].strip())
        return Verdict(Outcome.FAILED, message)
    prefix, _, rest = message.partition(": ")
    detail = rest if prefix.rpartition(".")[2] == type_name else message  # "grader.core.cells.NotDefined: ..."
    if type_name == cells.NotDefined.__name__:
        return Verdict(Outcome.FAILED, detail, hints.NOT_FOUND)
    if type_name == "NotImplementedError":
        return Verdict(Outcome.FAILED, message, hints.another_parts_stub(detail, part) or hints.NOT_IMPLEMENTED)
    return Verdict(Outcome.ERROR, message, hints.hint_for_exception(type_name, detail))


def _printed(tests: list[dict]) -> str:
    """What the student's code printed during the tests (pytest captured it per test)."""
    return "".join(test.get(when, {}).get(stream, "") for test in tests
                   for when in ("setup", "call", "teardown") for stream in ("stdout", "stderr"))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grade", description="Run an assignment's public tests on your work. "
                                                               + HIDDEN_TESTS_NOTE)
    parser.add_argument("assignment", type=Path, help="the assignment directory, e.g. assignments/03")
    parser.add_argument("--submission", type=Path, help=".py or .ipynb to test (default: your working copy)")
    parser.add_argument("--timeout", type=float, default=Limits().cell_timeout_s, metavar="SECONDS",
                        help="time limit per notebook cell, as the grader's (default %(default)g)")
    parser.add_argument("--verbose", "-v", action="store_true", help="also show every failing test and your output")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    errors = Console(stderr=True)
    if args.submission is not None and not args.submission.is_file():
        errors.print(error_text(f"no such submission file: {args.submission}"), soft_wrap=True)  # the path whole
        return EXIT_USAGE
    try:
        report = grade_public(args.assignment, args.submission, limits=replace(Limits(), cell_timeout_s=args.timeout))
    except AssignmentError as exc:
        errors.print(error_text(exc), soft_wrap=True)
        return EXIT_USAGE
    except KeyboardInterrupt:  # the tests' process group is killed on the way out (_pytest)
        errors.print(Text("interrupted: nothing was graded", style="yellow"))
        return EXIT_INTERRUPTED
    console = Console()
    console.print(render_report(report, verbose=args.verbose))
    console.print(Text(HIDDEN_TESTS_NOTE, style="bold"))
    return EXIT_GRADER_ERROR if report.status == Status.GRADER_ERROR else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
