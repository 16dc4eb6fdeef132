"""The pytest plugin that turns a hidden suite into graded parts.

It registers the ``part(name, points=1)`` marker, provides the ``student`` and ``device``
fixtures, and judges each test: a :class:`~grader.core.outcome.TestOutcome` per collected test,
with a message for the student and a hint (:func:`classify`). pytest's own longrepr is
never used: it quotes the hidden test's source. It also registers
:mod:`grader.suite.fixtures`, the fixtures every suite shares.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace

import pytest
import torch

from grader.core import hints
from grader.core.outcome import TestOutcome, Verdict
from grader.core.report import Outcome
from grader.sandbox.errors import StudentCrashed, StudentException, StudentNotFound, StudentTimeout
from grader.sandbox.session import StudentSession
from grader.suite import fixtures as suite_fixtures
from grader.suite.checks import CheckFailed

PART_MARKER = "part"


def classify(exc: BaseException | None, part: str = "") -> Verdict:
    """How a test of ``part`` that raised ``exc`` (None: it passed) ended."""
    if exc is None:
        return Verdict(Outcome.PASSED)
    if isinstance(exc, CheckFailed):
        return Verdict(Outcome.FAILED, exc.message, exc.hint, tuple(exc.flags))
    if isinstance(exc, StudentNotFound):
        return Verdict(Outcome.FAILED, str(exc), hints.NOT_FOUND)
    if isinstance(exc, StudentException) and exc.type_name == "NotImplementedError":
        other = hints.another_parts_stub(exc.message, part)
        if other:
            return Verdict(Outcome.FAILED, f"{exc.target} raised NotImplementedError: {exc.message}", other)
        return Verdict(Outcome.FAILED, f"`{exc.target}` is not implemented yet (it raises NotImplementedError)",
                       hints.NOT_IMPLEMENTED)
    if isinstance(exc, StudentException):
        return Verdict(Outcome.ERROR, f"{exc}\n{exc.traceback}".strip(),
                       hints.hint_for_exception(exc.type_name, exc.message, exc.traceback))
    if isinstance(exc, StudentTimeout):
        return Verdict(Outcome.TIMEOUT, str(exc), "look for a loop that never ends")
    if isinstance(exc, StudentCrashed):
        return Verdict(Outcome.ERROR, str(exc))
    # Anything else is a bug in the hidden suite or the grader, not the student's fault.
    return Verdict(Outcome.ERROR, f"internal grader error ({type(exc).__name__}: {str(exc)[:200]}); "
                                  "please report it to the course staff", internal=True)


class GradingPlugin:
    def __init__(self, session: StudentSession | None, device: torch.device):
        self._session = session  # None when only collecting
        self._device = device
        self._tests: dict[str, TestOutcome] = {}  # by node id, in run order

    def pytest_configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("markers", f"{PART_MARKER}(name, points=1): the contract part a test grades")
        config.pluginmanager.register(suite_fixtures, "grader-suite-fixtures")

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            marker = item.get_closest_marker(PART_MARKER)
            if marker is None:
                raise pytest.UsageError(f"{item.nodeid} has no @pytest.mark.{PART_MARKER}(...)")
            self._tests[item.nodeid] = TestOutcome(item.name, _part_of(item), float(marker.kwargs.get("points", 1)))

    @property
    def outcomes(self) -> list[TestOutcome]:
        """Every collected test, in run order, with its verdict once it has run."""
        return list(self._tests.values())

    @pytest.fixture(scope="session")
    def student(self) -> StudentSession:
        if self._session is None:
            raise RuntimeError("no submission to grade")
        return self._session

    @pytest.fixture(scope="session")
    def device(self) -> torch.device:
        return self._device

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        if self._session is not None:
            self._session.end_test()  # after the fixtures' own teardown

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        test = self._tests.get(item.nodeid)
        verdict = _judge(call, test.part) if test is not None else None
        if verdict is not None:  # the last stage that has one has the last word
            self._tests[item.nodeid] = replace(test, verdict=verdict)
        return report


def _judge(call: pytest.CallInfo, part: str) -> Verdict | None:
    """The verdict of one stage (setup, call, teardown) of a test of ``part``: every stage
    that raised has one, and so does the call; a teardown that fails after the call passed
    makes the test an error."""
    if call.excinfo is not None and call.excinfo.errisinstance(pytest.skip.Exception):
        return Verdict(Outcome.SKIPPED, str(call.excinfo.value))
    if call.excinfo is not None or call.when == "call":
        return classify(call.excinfo.value if call.excinfo else None, part)
    return None


def _part_of(item: pytest.Item) -> str:
    marker = item.get_closest_marker(PART_MARKER)
    return marker.args[0] if marker.args else marker.kwargs["name"]
