"""The grade report: plain data with a versioned JSON form (``schema/report.v7.json``).

The terminal table, CSV and exports are views of this; nothing here formats for people.
A part's ``score`` is its final score: the autograder's, or the instructor's where an
:class:`Override` (``grade batch --overrides``) gives one, which keeps the autograder's beside it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from grader.core.sanitize import clean, each_string

SCHEMA_VERSION = 7


class Status:
    GRADED = "graded"
    UNGRADABLE = "ungradable"  # the submission itself cannot be run (empty, binary, syntax error...)
    GRADER_ERROR = "grader_error"  # the grader failed; not the student's fault


class Outcome:
    """A test's ``outcome``."""
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"  # not counted: e.g. a CUDA-only test when grading on the CPU


class SchemaTooNewError(ValueError):
    pass


@dataclass
class TestResult:
    name: str
    outcome: str  # an Outcome (passed | failed | error | timeout)
    message: str
    hint: str | None
    score: float
    max_score: float
    # The rubric's evidence: the contract's words for the mistake whose value this failing
    # test's check matched; None when it matched none (or the test passed).
    mistake: str | None = None
    # For a failing test of a part that uses others (the contract's uses): whether it passed when
    # the grader's stock parts stood in for those; None when that was not tried.
    passes_with_stock: bool | None = None


class Rule:
    """What a part's ``scored_by.rule`` says decided its score."""
    TESTS = "tests"  # the points of the tests it passed, and of those it failed only through parts it uses
    # Its points less each priced mistake's deduction (once, however many tests show it) and the
    # points of the failing tests no priced mistake explains.
    RUBRIC = "rubric"


@dataclass
class ScoredBy:
    """Which rule scored a part. Under the rubric: each priced mistake a failing check matched
    (the contract's words) and the points it cost (``deductions``), and the points of the
    failing tests that no priced mistake explains (``unexplained``). ``tests_score``: what
    the tests alone gave, where the score is not that."""

    rule: str = Rule.TESTS
    deductions: dict[str, float] = field(default_factory=dict)
    unexplained: float | None = None
    tests_score: float | None = None
    # The failing parts this part uses, where some of its failing tests passed with stock parts in
    # their place: those tests' points are charged there, not here (tests_score: what the tests gave).
    charged_to: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Override:
    """An instructor's decision on a part, made after the grader's: the part's ``score`` is then
    the instructor's (or still the autograder's, when they only commented), and the autograder's
    own score is kept here, so that a regrade can say when it moved."""
    autograder_score: float
    comment: str


@dataclass
class PartResult:
    id: str
    score: float  # the final score: the override's, where there is one
    max_score: float
    hint: str | None  # the headline: hints[0], or None
    tests: list[TestResult]
    # The part's distinct mistakes, costliest first (or first, the part to fix first), at most two.
    hints: list[str] = field(default_factory=list)
    override: Override | None = None  # the instructor's, applied by grade batch --overrides
    scored_by: ScoredBy = field(default_factory=ScoredBy)  # the rule that gave the autograder's score

    @property
    def autograder_score(self) -> float:
        return self.override.autograder_score if self.override else self.score


@dataclass(frozen=True)
class Flag:
    """Something for the instructor to look at: a construct in the submission's source that
    looks evasive, found by reading it, or a call whose operators may have run without the
    grader's recording, found while running it. No points follow from a flag."""

    kind: str  # e.g. "torch-internals", "computed-attribute", "unrecorded-operators"
    where: str  # as the student numbers it: "mha.py line 12", "cell 4, line 3"
    detail: str  # what was found, e.g. "torch._C.DisableTorchFunction"


MAX_FLAGS = 20  # then one flag of kind "more" counts the rest (the schema allows 21)
MAX_WHERE, MAX_DETAIL = 120, 200  # characters; a file name or an identifier can be long


def bounded(flags: Iterable[Flag]) -> list[Flag]:
    """``flags`` without repeats, their text cleaned and cut, at most :data:`MAX_FLAGS`."""
    unique = list(dict.fromkeys(Flag(flag.kind, clean(flag.where, MAX_WHERE), clean(flag.detail, MAX_DETAIL))
                                for flag in flags))
    if len(unique) <= MAX_FLAGS:
        return unique
    return unique[:MAX_FLAGS] + [Flag("more", "", f"{len(unique) - MAX_FLAGS} more not listed")]


@dataclass
class GradeReport:
    assignment: str
    submission: str
    status: str
    error: str | None
    score: float
    max_score: float
    device: str
    duration_s: float
    grader_version: str
    parts: list[PartResult]
    notes: list[str] = field(default_factory=list)  # about loading: cells skipped, exceptions
    output: str = ""  # what the submission printed, truncated
    sandbox: list[str] = field(default_factory=list)  # isolation layers that were active
    submission_sha256: str = ""  # of the file's bytes; batch grading skips unchanged files
    flags: list[Flag] = field(default_factory=list)  # evasive-looking source, see grader.source.flags
    # Handed in after its due date, as the course platform says; None: not known (no platform said).
    late: bool | None = None
    # What decided the grade (grader.core.fingerprint): a stored report is reused only while it holds.
    fingerprint: dict[str, str] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict:
        data = asdict(self)
        return {"schema_version": data.pop("schema_version"), **data}

    @property
    def autograder_score(self) -> float:
        """The score the grader gave, before any override."""
        return self.score + sum(part.autograder_score - part.score for part in self.parts)

    def autograders(self) -> GradeReport:
        """The report as the grader wrote it: every override taken off, each part's own score back."""
        if not any(part.override for part in self.parts):
            return self
        return replace(self, score=self.autograder_score,
                       parts=[replace(part, score=part.autograder_score, override=None) for part in self.parts])

    @classmethod
    def from_dict(cls, data: dict) -> GradeReport:
        version = data.get("schema_version")
        if not isinstance(version, int) or version < 1:
            raise ValueError(f"not a grade report (schema_version={version!r})")
        if version > SCHEMA_VERSION:
            raise SchemaTooNewError(f"report schema {version} is newer than this grader's ({SCHEMA_VERSION}); upgrade the grader")
        fields = upgraded(data)
        fields["parts"] = [
            PartResult(**{**part, "tests": [TestResult(**test) for test in part["tests"]],
                          "override": Override(**part["override"]) if part.get("override") else None,
                          "scored_by": ScoredBy(**part["scored_by"])})
            for part in fields["parts"]
        ]
        fields["flags"] = [Flag(**flag) for flag in fields["flags"]]
        return cls(**fields)

    def write_json(self, path: Path) -> None:
        """Write atomically: a reader never sees half a report."""
        write_json(path, self.to_dict())


def json_text(data: Any, *, indent: int | None = 2, ascii_only: bool = False) -> str:
    """``data`` as JSON that every parser accepts. Its strings may hold what a submission wrote,
    lone surrogates included (an exception message, an undecodable file name), which UTF-8
    cannot encode: they become U+FFFD."""
    return json.dumps(each_string(data, clean), indent=indent, ensure_ascii=ascii_only)


def write_json(path: Path, data: Any) -> None:
    """Every JSON file the grader writes goes through here: atomically, and valid."""
    write_atomic(path, json_text(data) + "\n")


def upgraded(data: dict) -> dict:
    """A report of any older schema version as the current version: each step adds what its
    version introduced, with the value that says "not looked for"."""
    data = dict(data)
    if data["schema_version"] == 1:
        data.update(schema_version=2, flags=[])  # version 2 added flags; version 1 never read the source
    if data["schema_version"] == 2:
        # Version 3 added each part's hints; version 2 kept only the headline.
        data.update(schema_version=3, parts=[{**part, "hints": [part["hint"]] * bool(part["hint"])}
                                             for part in data["parts"]])
    if data["schema_version"] == 3:
        data.update(schema_version=4, late=None)  # version 4 added late; version 3 never read the due date
    if data["schema_version"] == 4:
        # Version 5 added the fingerprint, which nothing recorded before, and each part's override,
        # which only grade batch --overrides applies.
        data.update(schema_version=5, fingerprint={}, parts=[{**part, "override": None} for part in data["parts"]])
    if data["schema_version"] == 5:
        # Version 6 added the rubric, each part's scored_by and each test's mistake (its evidence),
        # and each test's passes_with_stock. Version 5 scored every part by its tests, kept no
        # evidence and tried no stock parts.
        data.update(schema_version=6, parts=[
            {**part, "scored_by": asdict(ScoredBy()),
             "tests": [{**test, "mistake": None, "passes_with_stock": None} for test in part["tests"]]}
            for part in data["parts"]])
    if data["schema_version"] == 6:
        # Version 7 charges a test that failed only through a failing part this part uses to that
        # part (scored_by.charged_to; version 6 charged it here too), and lets the rubric price
        # several mistakes and charge the failures none explains (version 6 applied it only where
        # one priced mistake explained every failure).
        data.update(schema_version=7, parts=[{**part, "scored_by": _scored_by_v7(part["scored_by"])}
                                             for part in data["parts"]])
    return data


def _scored_by_v7(v6: dict) -> dict:
    rubric = v6["rule"] == Rule.RUBRIC
    return {"rule": v6["rule"], "deductions": {v6["mistake"]: v6["deduction"]} if rubric else {},
            "unexplained": 0.0 if rubric else None, "tests_score": v6["tests_score"], "charged_to": []}


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load_schema() -> dict:
    return json.loads(resources.files("grader.core").joinpath(f"schema/report.v{SCHEMA_VERSION}.json").read_text(encoding="utf-8"))
