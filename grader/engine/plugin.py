"""The pytest plugin that turns a hidden suite into graded parts.

It registers the ``part(name, points=1)`` marker, provides the ``student`` and ``device``
fixtures, and judges each test: a :class:`~grader.core.outcome.TestOutcome` per collected test,
with a message for the student and a hint (:func:`classify`). pytest's own longrepr is
never made: it would quote the hidden test's source. It also registers
:mod:`grader.suite.fixtures`, the fixtures every suite shares.

Once every test has run, a failing test of a part that uses failing parts (the contract's
``uses``) runs once more, from its fixtures on, with the suite's stock parts standing in for
those in a fresh student process (:class:`StandIns`): whether it then passes is the evidence
for naming a used part as the cause ("fix split_heads first"; :mod:`grader.core.scoring`).
Where it fails all the same, the mistake it shows is the part's own, seen past the used part's
failure (a Block's post-norm under a Head that raises): its hint becomes the test's hint. The
rerun's verdict counts for nothing else: its student process held the stock parts, answers,
so it never scores (the first run's evidence prices the rubric).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, replace

import pytest
import torch
from _pytest.runner import runtestprotocol

from grader.core import hints
from grader.core.outcome import TestOutcome, Verdict
from grader.core.report import Outcome
from grader.sandbox.errors import StudentCrashed, StudentException, StudentNotFound, StudentTimeout
from grader.sandbox.session import RemoteObject, StudentSession
from grader.source.definitions import source_defining
from grader.suite import fixtures as suite_fixtures
from grader.suite.checks import CheckFailed

PART_MARKER = "part"
ANSWERS_MARKER = "answers"


def classify(exc: BaseException | None, part: str = "", *, quote: bool = True) -> Verdict:
    """How a test of ``part`` that raised ``exc`` (None: it passed) ended. ``quote``: its hint
    may quote the student's text (see :func:`hints.another_parts_stub`)."""
    if exc is None:
        return Verdict(Outcome.PASSED)
    if isinstance(exc, CheckFailed):
        return Verdict(Outcome.FAILED, exc.message, exc.hint, tuple(exc.flags), mistake=exc.mistake)
    if isinstance(exc, StudentNotFound):
        return Verdict(Outcome.FAILED, str(exc), hints.NOT_FOUND if exc.defined_at is None
                       else hints.NOT_DEFINED_WHEN_LOADED)
    if isinstance(exc, StudentException) and exc.stub:
        other = hints.another_parts_stub(exc.message, part, exc.stub_owner, quote=quote)
        if other:
            return Verdict(Outcome.FAILED, f"{exc.target} raised NotImplementedError: {exc.message}", other)
        return Verdict(Outcome.FAILED, f"`{exc.target}` is not implemented yet (it raises NotImplementedError)",
                       hints.NOT_IMPLEMENTED)
    if isinstance(exc, StudentException):
        return Verdict(Outcome.ERROR, f"{exc}\n{exc.traceback}".strip(),
                       hints.hint_for_exception(exc.type_name, exc.message, exc.traceback))
    if isinstance(exc, StudentTimeout):
        return Verdict(Outcome.TIMEOUT, str(exc), "look for a loop that never ends, or a Python loop over single "
                                                  "elements where one tensor operation would do")
    if isinstance(exc, StudentCrashed):
        return Verdict(Outcome.ERROR, str(exc))
    if _used_as_an_object(exc):
        return Verdict(Outcome.FAILED, f"your code gave a {type(exc.obj).__name__} where the grader needs an object "
                                       "of your process (a module, or a list of modules): it has no methods to call",
                       "return the object itself (the module, not a number or a tensor computed from it)")
    # Anything else is a bug in the hidden suite or the grader, not the student's fault.
    return Verdict(Outcome.ERROR, f"internal grader error ({type(exc).__name__}: {str(exc)[:200]}); "
                                  "please report it to the course staff", internal=True)


@dataclass(frozen=True)
class StandIns:
    """The suite's stock parts (``source``, grader-owned, defining parts by their contract
    names) and, per part, the parts it uses that they may stand in for."""

    source: str
    uses: Mapping[str, tuple[str, ...]]

    def source_for(self, names: Sequence[str]) -> str:
        """What of ``source`` the stock ``names`` need (:func:`source_defining`). A stock part is
        an answer, and a test that passes with it in place is charged to the part it stands for:
        the child it is sent to must not find beside it the answer of the part under test (a
        stock scaled_dot_product_attention next to the stock softmax it uses)."""
        return source_defining(self.source, names)


class GradingPlugin:
    """Registered when the suite is collected (:mod:`grader.engine.collected`), bound to one
    submission in the suite process that runs it (:meth:`bind`). ``parts``: the contract's parts,
    in its order, which puts each part after those it uses."""

    def __init__(self, parts: Sequence[str] = ()) -> None:
        self._order = {part: index for index, part in enumerate(parts)}
        self._session: StudentSession | None = None  # None when only collecting
        self._device = torch.device("cpu")
        self._stand_ins: StandIns | None = None
        self._tests: dict[str, TestOutcome] = {}  # by node id, in run order
        self._rerunning = False  # a rerun's verdicts are not the test's
        self._rerun_verdict: Verdict | None = None  # the last stage's that had one, in the rerun

    def bind(self, session: StudentSession | None, device: str, stand_ins: StandIns | None) -> None:
        """Grade ``session``'s submission on ``device``, with the suite's ``stand_ins``."""
        self._session, self._device, self._stand_ins = session, torch.device(device), stand_ins

    def pytest_configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("markers", f"{PART_MARKER}(name, points=1): the contract part a test grades")
        config.addinivalue_line("markers", f"{ANSWERS_MARKER}(name): the answers a test sends the student's process "
                                "(a model the reference trained): the tests next to it that name the same answers "
                                "share that process, which ends before any other test")
        config.pluginmanager.register(suite_fixtures, "grader-suite-fixtures")

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            if item.get_closest_marker(PART_MARKER) is None:
                raise pytest.UsageError(f"{item.nodeid} has no @pytest.mark.{PART_MARKER}(...)")
        # A part's tests run after those of the parts it uses: a piece that hangs is found by
        # its own tests, which leaves the parts built on it the shorter limit of calls near a
        # hang (hung_calls.py), and 07's training, last, cannot take the time of the others.
        items.sort(key=lambda item: self._order.get(_part_of(item), len(self._order)))
        for item in items:
            points = float(item.get_closest_marker(PART_MARKER).kwargs.get("points", 1))
            self._tests[item.nodeid] = TestOutcome(item.name, _part_of(item), points)

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
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        if self._session is not None:  # after the fixtures' own teardown
            answers = _answers_of(item)
            self._session.end_test(answers_carry_on=answers is not None and answers == _answers_of(nextitem))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
        test = self._tests.get(item.nodeid)
        # A rerun's hint may become the test's; its process held the stock parts, answers.
        verdict = _judge(call, test.part, quote=not self._rerunning) if test is not None else None
        if verdict is not None and self._rerunning:
            self._rerun_verdict = verdict
        elif verdict is not None:  # the last stage that has one has the last word
            self._tests[item.nodeid] = replace(test, verdict=verdict)
        return _plain_report(item, call)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        result = yield
        if self._session is not None and self._stand_ins is not None:
            self._try_stock_parts(session)
        return result

    def _try_stock_parts(self, session: pytest.Session) -> None:
        """Once every test has run (and every fixture is torn down): each failing test of a part
        that uses failing parts runs again, with stock parts standing in for those. A part's
        reruns that stock the same parts share one student process, given those parts before its
        first request and ended with the last of them (they are answers): a fresh one sees none
        of the student's own parts at work, none outlives the stock parts it was given, and what
        one part's code leaves in it (autograd switched off) reaches no other part's rerun."""
        failing = {test.part for test in self._tests.values() if test.verdict is not None
                   and test.verdict.outcome not in (Outcome.PASSED, Outcome.SKIPPED)}
        reruns: dict[tuple[str, tuple[str, ...]], list[pytest.Item]] = {}
        for item in session.items:
            test = self._tests.get(item.nodeid)
            used = tuple(part for part in self._stand_ins.uses.get(test.part, ()) if part in failing)
            if used and _worth_rerunning(test.verdict):
                reruns.setdefault((test.part, used), []).append(item)
        for (_, used), items in reruns.items():
            with self._session.standing_in(self._stand_ins.source_for(used), used):
                for item in items:
                    passed, rerun = self._passes_with_stock(item)
                    test = self._tests[item.nodeid]
                    own_hint = (rerun.hint if not passed and _worth_rerunning(rerun) and rerun.hint
                                and not hints.quotes_stub(test.verdict.hint, rerun.hint)  # the same, unquoted
                                else test.verdict.hint)
                    self._tests[item.nodeid] = replace(test, verdict=replace(test.verdict, passes_with_stock=passed,
                                                                             hint=own_hint))

    def _passes_with_stock(self, item: pytest.Item) -> tuple[bool, Verdict | None]:
        """Whether ``item`` passes with the stock parts standing in, and how it ended then: run
        from scratch (its fixtures set up and torn down again, so none holds what the student's
        own parts built)."""
        self._rerunning, self._rerun_verdict = True, None
        try:
            item._initrequest()
            reports = runtestprotocol(item, log=False, nextitem=None)
        finally:
            self._rerunning = False
        return all(report.passed for report in reports), self._rerun_verdict


# What the suites call on an object of the student's process (grader.suite's Remote).
_REMOTE_OBJECT_METHODS = frozenset(name for name in vars(RemoteObject) if not name.startswith("__"))
# The values a reply can hold besides objects (grader.sandbox.protocol.decode).
_PLAIN_VALUES = (type(None), bool, int, float, str, list, tuple, dict, torch.Tensor, torch.dtype, torch.device)


def _used_as_an_object(exc: BaseException) -> bool:
    """Whether ``exc`` is a suite calling an object's method (``.method``, ``.attr``) on a value
    the student's process sent where the suite needs an object: a getattr or a call that answered
    a number, say. Every other value the suite holds is its own."""
    return (type(exc) is AttributeError and exc.name in _REMOTE_OBJECT_METHODS
            and type(exc.obj) in _PLAIN_VALUES)


def _plain_report(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
    """pytest's report of one stage of ``item``, without the failure's text (longrepr), which
    pytest would format from the hidden suite's traceback and source for every failing stage:
    a few milliseconds of each submission whose tests fail, for text no one reads (the verdict
    comes from ``call`` itself, :func:`_judge`)."""
    excinfo = call.excinfo
    if excinfo is None:
        outcome, longrepr = "passed", None
    elif excinfo.errisinstance(pytest.skip.Exception):
        path, line = item.location[0], item.location[1] or 0
        outcome, longrepr = "skipped", (path, line + 1, str(excinfo.value))
    else:
        outcome, longrepr = "failed", excinfo.typename
    return pytest.TestReport(item.nodeid, item.location, dict.fromkeys(item.keywords, 1), outcome, longrepr,
                             call.when, (), call.duration, call.start, call.stop, item.user_properties)


def _judge(call: pytest.CallInfo, part: str, *, quote: bool = True) -> Verdict | None:
    """The verdict of one stage (setup, call, teardown) of a test of ``part``: every stage
    that raised has one, and so does the call; a teardown that fails after the call passed
    makes the test an error."""
    if call.excinfo is not None and call.excinfo.errisinstance(pytest.skip.Exception):
        return Verdict(Outcome.SKIPPED, str(call.excinfo.value))
    if call.excinfo is not None or call.when == "call":
        return classify(call.excinfo.value if call.excinfo else None, part, quote=quote)
    return None


def _worth_rerunning(verdict: Verdict | None) -> bool:
    """A test that failed for the student's code, where a used part may be the cause: not one
    that passed, was skipped or failed inside the grader, nor the part's own stub."""
    return (verdict is not None and verdict.outcome in (Outcome.FAILED, Outcome.ERROR, Outcome.TIMEOUT)
            and not verdict.internal
            and verdict.hint not in (hints.NOT_IMPLEMENTED, hints.NOT_FOUND, hints.NOT_DEFINED_WHEN_LOADED))


def _answers_of(item: pytest.Item | None) -> str | None:
    """The answers ``item`` declares it sends (its ``answers`` marker), if any."""
    marker = item.get_closest_marker(ANSWERS_MARKER) if item is not None else None
    return str(marker.args[0]) if marker is not None and marker.args else None


def _part_of(item: pytest.Item) -> str:
    marker = item.get_closest_marker(PART_MARKER)
    return marker.args[0] if marker.args else marker.kwargs["name"]
