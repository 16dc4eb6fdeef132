"""The pytest plugin that turns a hidden suite into graded parts.

It registers the ``part(name, points=1)`` marker, provides the ``student`` and ``device``
fixtures, and classifies each test's result for pytest-json-report's metadata (outcome,
a message for the student, a hint). pytest's own longrepr is never used: it quotes the
hidden test's source. It also registers :mod:`grader.suite_fixtures`, the fixtures every
suite shares.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest
import torch

from grader import hints, suite_fixtures
from grader.checks import CheckFailed
from grader.report import Outcome
from grader.sandbox.errors import StudentCrashed, StudentException, StudentNotFound, StudentTimeout
from grader.sandbox.session import StudentSession

PART_MARKER = "part"

def classify(exc: BaseException | None, part: str = "") -> dict[str, Any]:
    """Outcome, message and hint for a test of ``part`` that raised ``exc`` (None: it passed)."""
    if exc is None:
        return {"outcome": Outcome.PASSED, "message": "", "hint": None}
    if isinstance(exc, CheckFailed):
        flags = {"flags": [asdict(flag) for flag in exc.flags]} if exc.flags else {}
        return {"outcome": Outcome.FAILED, "message": exc.message, "hint": exc.hint, **flags}
    if isinstance(exc, StudentNotFound):
        return {"outcome": Outcome.FAILED, "message": str(exc), "hint": hints.NOT_FOUND}
    if isinstance(exc, StudentException) and exc.type_name == "NotImplementedError":
        # Stubs say whose they are ("MultiHeadAttention: from assignment 03: paste ...").
        stub, _, detail = exc.message.partition(":")
        stub = stub.split(".")[0].strip()
        if stub.isidentifier() and part and stub != part:
            return {"outcome": Outcome.FAILED, "message": f"{exc.target} raised NotImplementedError: {exc.message}",
                    "hint": f"{part} uses your {stub}, which is still a stub ({detail.strip()})"}
        return {"outcome": Outcome.FAILED, "message": f"`{exc.target}` is not implemented yet (it raises NotImplementedError)",
                "hint": hints.NOT_IMPLEMENTED}
    if isinstance(exc, StudentException):
        message = f"{exc}\n{exc.traceback}".strip()
        return {"outcome": Outcome.ERROR, "message": message, "hint": hints.hint_for_exception(exc.type_name, exc.message)}
    if isinstance(exc, StudentTimeout):
        return {"outcome": Outcome.TIMEOUT, "message": str(exc), "hint": "look for a loop that never ends"}
    if isinstance(exc, StudentCrashed):
        return {"outcome": Outcome.ERROR, "message": str(exc), "hint": None}
    # Anything else is a bug in the hidden suite or the grader, not the student's fault.
    return {"outcome": Outcome.ERROR, "hint": None, "internal": True,
            "message": f"internal grader error ({type(exc).__name__}: {str(exc)[:200]}); "
                       "please report it to the course staff"}


class GradingPlugin:
    def __init__(self, session: StudentSession | None, device: torch.device):
        self._session = session  # None when only collecting
        self._device = device
        self.collected: list[dict[str, Any]] = []  # nodeid, name, part, points; in run order

    def pytest_configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("markers", f"{PART_MARKER}(name, points=1): the contract part a test grades")
        config.pluginmanager.register(suite_fixtures, "grader-suite-fixtures")

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            marker = item.get_closest_marker(PART_MARKER)
            if marker is None:
                raise pytest.UsageError(f"{item.nodeid} has no @pytest.mark.{PART_MARKER}(...)")
            self.collected.append({
                "nodeid": item.nodeid,
                "name": item.name,
                "part": _part_of(item),
                "points": marker.kwargs.get("points", 1),
            })

    @pytest.fixture(scope="session")
    def student(self) -> StudentSession:
        if self._session is None:
            raise RuntimeError("no submission to grade")
        return self._session

    @pytest.fixture(scope="session")
    def device(self) -> torch.device:
        return self._device

    def pytest_json_runtest_metadata(self, item: pytest.Item, call: pytest.CallInfo) -> dict | None:
        metadata: dict[str, Any] = {}
        if call.excinfo is not None and call.excinfo.errisinstance(pytest.skip.Exception):
            metadata.update(outcome=Outcome.SKIPPED, message=str(call.excinfo.value), hint=None)
        elif call.excinfo is not None or call.when == "call":
            metadata.update(classify(call.excinfo.value if call.excinfo else None, _part_of(item)))
        return metadata


def _part_of(item: pytest.Item) -> str:
    marker = item.get_closest_marker(PART_MARKER)
    return marker.args[0] if marker.args else marker.kwargs["name"]
