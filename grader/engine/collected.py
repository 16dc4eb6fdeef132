"""A hidden suite as pytest collects it, once per grader process.

Configuring pytest (its plugins, the suite's conftest and fixtures) and collecting the suite's
tests is the same work for every submission: 0.1 s of a 03 submission's suite process, a
quarter of it. So the warm grader process does it once (:func:`collected_suite`), and each
submission's suite process, a fork of it, only runs the collected tests against its own
student (:meth:`CollectedSuite.run`). The fork gets its own copy of everything collected; the
grader process never runs a test, so it holds no submission's state, and neither does the
next fork.

pytest has no public API that stops between collection and the run; this takes the steps
``pytest.main`` takes (``_prepareconfig``, ``Config._do_configure``, the session's hooks), as
pytest-xdist's workers do, and tests/test_collected.py holds them to it. The plugins that
would change the grader process itself (capturing its output, a faulthandler, pdb's hook)
are not loaded, and the terminal reporter is quiet.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import pickle
from collections.abc import Callable, Generator, Sequence
from pathlib import Path

import pytest
import torch
from _pytest.config import _prepareconfig

from grader.core.outcome import TestOutcome
from grader.engine.forked import Forked
from grader.engine.plugin import GradingPlugin, StandIns
from grader.sandbox import trusted_bounds
from grader.sandbox.session import StudentSession
from grader.sandbox.trusted_bounds import CpuBudget, TrustedBoundExceeded
from grader.suite import computed_once
from grader.suite.checks import CheckFailed

# Only the plugins grading needs: whatever else is installed must not change grading, and
# nothing may act on the grader process that holds the collected suite.
PYTEST_ARGS = (
    "--disable-plugin-autoload", "-p", "no:cacheprovider", "--assert=plain", "--strict-markers",
    "--import-mode=importlib", "-p", "no:warnings",
    # Quiet: nothing printed while collecting, in the grader process. A failing test's report
    # never quotes the hidden suite, and formatting it would parse the suite's source.
    "-q", "--no-header", "--tb=no",
    # Both run gc.collect() twice at exit: 0.25 s with torch's objects in memory.
    "-p", "no:unraisableexception", "-p", "no:threadexception",
    # Captures log records around every test phase, adding and removing a handler on each of
    # torch's loggers: 60 ms of a 03 suite's 0.68 s. No suite reads logs.
    "-p", "no:logging",
    # Each would act on the grader process: its stdout and stderr, its fault handler, pdb.
    "-p", "no:capture", "-p", "no:faulthandler", "-p", "no:debugging",
    # Command-line features a grading never asks for.
    *(arg for name in ("pastebin", "junitxml", "doctest", "setuponly", "setupplan", "stepwise")
      for arg in ("-p", f"no:{name}")),
)


# A suite value takes a fraction of a second (06's model: 0.2 s); past this, something is wrong.
SUITE_VALUE_TIMEOUT_S = 120.0


class SuiteError(Exception):
    """The hidden suite could not run: a grader problem, not the student's."""


class TrustedBounds:
    """pytest plugin: each test's trusted side gets its CPU-time budget, and a test that
    runs the suite process out of a bound fails as the student's: the submission's values
    are what differ between submissions, and the bounds are far above what the suites need.
    Armed in the suite process (:meth:`arm`), before any test runs; the grader process only
    collects."""

    _budget: CpuBudget

    def arm(self, budget: CpuBudget) -> None:
        self._budget = budget

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        self._budget.start_test()
        return (yield from self._bounded())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        return (yield from self._bounded())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, None, None]:
        try:
            return (yield from self._bounded())
        finally:
            self._budget.end_test()

    def _bounded(self) -> Generator[None, None, None]:
        try:
            return (yield)
        except TrustedBoundExceeded as exc:
            raise _failed(str(exc), "slow") from None
        except Exception as exc:
            if trusted_bounds.memory_exhausted(exc):
                raise _failed(trusted_bounds.describe_memory(self._budget.limits), "large") from None
            raise


def _failed(bound: str, how: str) -> CheckFailed:
    return CheckFailed(f"checking this test's results took the grader past {bound}: a value your code "
                       f"returned (an index, a size or a shape far outside the contract, say) made the check "
                       f"too {how}", "return values within the contract's shapes and ranges")


class CollectedSuite:
    """A hidden suite's pytest session, configured and collected, ready to run in a fork."""

    def __init__(self, suite: Path, parts: Sequence[str] = ()):
        """``parts``: the contract's, in its order: the order the tests run in."""
        self._grading = GradingPlugin(parts)
        self._bounds = TrustedBounds()
        self.error: str | None = None  # why the suite cannot run, said in every submission's report
        args = [str(suite), "-c", str(suite.parent / "pytest.ini"), "--rootdir", str(suite.parent), *PYTEST_ARGS]
        # pytest's terminal reporter keeps the sys.stdout it is configured under, and writes to it
        # in every run: give it a stream of its own that stays open, not the caller's of the
        # moment (a notebook's or a test's, which may be closed by the next grading).
        self._terminal = open(os.devnull, "w")  # noqa: SIM115 - open for as long as the suite
        with contextlib.redirect_stdout(self._terminal):
            self._config = _prepareconfig(args, plugins=[self._grading, self._bounds])
            self._config._do_configure()
            self._session = pytest.Session.from_config(self._config)
            self._config.hook.pytest_sessionstart(session=self._session)
            try:
                self._config.hook.pytest_collection(session=self._session)
            except (pytest.UsageError, pytest.Session.Interrupted, pytest.Session.Failed) as exc:
                self.error = f"the hidden suite in {suite.name} failed to collect: {exc}"
        if self.error is None and (self._session.testsfailed or not self._grading.outcomes):
            self.error = (f"the hidden suite in {suite.name} failed to collect: "
                          f"{self._session.testsfailed} error(s), {len(self._grading.outcomes)} test(s)")
        for item in self._session.items:  # cached here, where every suite process forked from finds it
            item.location  # noqa: B018

    @property
    def tests(self) -> list[TestOutcome]:
        """Every collected test, with no verdict."""
        return self._grading.outcomes

    def run(self, student: StudentSession | None, device: str, stand_ins: StandIns | None,
            budget: CpuBudget) -> list[TestOutcome]:
        """Run every test against ``student``, with the suite process's CPU ``budget``; call it
        in that process, a fork of the one that collected the suite. Returns each test with its
        verdict, in run order."""
        if self.error is not None:
            raise SuiteError(self.error)
        self._grading.bind(student, device, stand_ins)
        self._bounds.arm(budget)
        # The last test, and each rerun, tears down every fixture: no session to finish after.
        self._config.hook.pytest_runtestloop(session=self._session)
        return self._grading.outcomes


@functools.cache
def collected_suite(suite: Path, parts: tuple[str, ...]) -> CollectedSuite:
    """``suite`` collected in this process, once: every suite process forked from it runs it."""
    preload_suite(suite)
    compute_suite_values(suite)
    return CollectedSuite(suite, parts)


def compute_suite_values(suite: Path) -> None:
    """Compute the suite's values that depend on no submission (:func:`grader.suite.once_per_grader`),
    each in a fork of this process, which runs no torch op itself: every suite process forked
    from it then starts with them. A value that fails or runs past ``SUITE_VALUE_TIMEOUT_S``
    there is left to each suite process, which reports a failure as the suite's."""
    for key, function in computed_once.pending(f"reference.hidden.{suite.name}"):
        fork = Forked(functools.partial(_pickled, function), SUITE_VALUE_TIMEOUT_S)
        fork.wait()
        data = fork.take()
        if data is not None and fork.exited_cleanly():
            computed_once.provide(key, pickle.loads(data))


def _pickled(function: Callable[[], object]) -> bytes:
    """In the fork: ``function``'s value, computed with torch's one thread, as every suite
    process computes."""
    torch.set_num_threads(1)
    return pickle.dumps(function())


def preload_suite(suite: Path) -> None:
    """Import the hidden suite's modules (and so the reference) in this process, under the
    names pytest gives them, so that every suite process forked from it finds them imported,
    those its tests import only as they run included. Student code never forks from this
    process, so it may hold them. A module that fails to import is left to pytest, which
    reports it as the suite's error."""
    package = f"reference.hidden.{suite.name}"
    for path in sorted(suite.glob("*.py"), key=lambda p: p.name != "conftest.py"):
        name = package if path.stem == "__init__" else f"{package}.{path.stem}"
        try:
            importlib.import_module(name)
        except (Exception, pytest.fail.Exception):  # noqa: BLE001 - reported by pytest as it collects
            pass
