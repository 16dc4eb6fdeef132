"""What a suite run found, test by test: the typed data between running tests and the report.

The grader's suite process builds it (:mod:`grader.engine.plugin`, :mod:`grader.engine.runner`) and sends
it over a pipe as JSON; the student's grader builds it from pytest's JSON report
(:mod:`grader.student.grade`). Either way one function turns it into a report
(:func:`grader.core.assemble.assemble_report`). Read back, a payload is checked field by field:
a malformed one raises :class:`MalformedResult` instead of crashing the grader later.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from grader.core.report import Flag, Outcome

_LIST = (list, tuple)  # JSON gives lists; to_dict tuples
_OUTCOMES = (Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.TIMEOUT, Outcome.SKIPPED)


class MalformedResult(ValueError):
    """A suite result that is not what :meth:`SuiteResult.to_dict` writes."""


@dataclass(frozen=True)
class Verdict:
    """How one test ended, as the student reads it."""

    outcome: str  # an Outcome
    message: str = ""
    hint: str | None = None
    flags: tuple[Flag, ...] = ()  # what a failed source check found (see grader.source.flags)
    internal: bool = False  # the suite or the grader failed, not the student's code
    # The rubric's evidence: the contract's words for the mistake whose value the student's
    # matched in the check that failed; None when it matched none (see grader.core.hints.Mistake).
    mistake: str | None = None
    # For a failing test of a part that uses others: whether it passed when the grader's stock
    # parts stood in for those (grader.engine.plugin); None when that was not tried.
    passes_with_stock: bool | None = None


@dataclass(frozen=True)
class TestOutcome:
    """One collected test of a part, and its verdict; None when it did not run (the suite
    was only collected, or the run ended before it)."""

    __test__ = False  # not a pytest test class, whatever its name

    name: str
    part: str
    points: float
    verdict: Verdict | None = None


@dataclass(frozen=True)
class SuiteResult:
    """Everything a suite run sends back: its tests in run order, notes about loading the
    submission, what the submission printed, and the flags its source raised."""

    tests: tuple[TestOutcome, ...] = ()
    notes: tuple[str, ...] = ()
    output: str = ""
    flags: tuple[Flag, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> SuiteResult:
        """The result ``to_dict`` wrote; raises :class:`MalformedResult` for anything else."""
        fields = _fields(data, "the result", {"tests": _LIST, "notes": _LIST, "output": str, "flags": _LIST})
        return cls(tests=tuple(_test(test) for test in fields["tests"]),
                   notes=tuple(_typed(note, str, "a note") for note in fields["notes"]),
                   output=fields["output"], flags=_flags(fields["flags"]))


def _test(data: Any) -> TestOutcome:
    fields = _fields(data, "a test", {"name": str, "part": str, "points": (int, float), "verdict": (dict, type(None))})
    verdict = fields["verdict"]
    return TestOutcome(fields["name"], fields["part"], float(fields["points"]),
                       None if verdict is None else _verdict(verdict))


def _verdict(data: Any) -> Verdict:
    fields = _fields(data, "a verdict", {"outcome": str, "message": str, "hint": (str, type(None)), "flags": _LIST,
                                         "internal": bool, "mistake": (str, type(None)),
                                         "passes_with_stock": (bool, type(None))})
    if fields["outcome"] not in _OUTCOMES:
        raise MalformedResult(f"unknown outcome {fields['outcome']!r}")
    return Verdict(**{**fields, "flags": _flags(fields["flags"])})


def _flags(items: list | tuple) -> tuple[Flag, ...]:
    return tuple(Flag(**_fields(item, "a flag", {"kind": str, "where": str, "detail": str})) for item in items)


def _fields(data: Any, what: str, types: dict[str, type | tuple[type, ...]]) -> dict[str, Any]:
    """``data``'s fields, which must be exactly ``types``' keys, each of its type."""
    if not isinstance(data, dict) or set(data) != set(types):
        keys = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise MalformedResult(f"{what} should have the fields {sorted(types)}, not {keys}")
    return {name: _typed(data[name], types[name], f"{what}'s {name}") for name in types}


def _typed(value: Any, expected: type | tuple[type, ...], what: str) -> Any:
    # bool is an int to isinstance, but never a number of points.
    if not isinstance(value, expected) or (isinstance(value, bool) and bool not in _as_tuple(expected)):
        raise MalformedResult(f"{what} is a {type(value).__name__}")
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)
