"""The report's ``flags``: what looks evasive in a submission's source, for the instructor.

Computed in the trusted process from the :class:`~grader.ingest.Program` the grader read,
never taken from the student's process: every construct :mod:`grader.evasion` knows,
anywhere in the source, and what the hidden suites' source checks found in the code a
part reaches (a forbidden built-in, a name defined out of sight), which the suites attach
to the checks that failed (:class:`grader.checks.CheckFailed`). No points follow from a
flag by itself.
"""

from __future__ import annotations

from collections.abc import Iterable

from grader.evasion import constructs, unreadable
from grader.ingest import Program
from grader.parsed_source import ParsedSource
from grader.report import Flag
from grader.sanitize import clean

MAX_FLAGS = 20  # then one flag of kind "more" counts the rest (the schema allows 21)
MAX_WHERE, MAX_DETAIL = 120, 200  # characters; a file name or an identifier can be long


def program_flags(program: Program) -> list[Flag]:
    """Every evasive-looking construct in the source, in program order."""
    source = ParsedSource(program)
    return [construct.flag for construct in unreadable(source)] + [
        construct.flag for statement in source.statements for construct in constructs(source, statement)]


def bounded(flags: Iterable[Flag]) -> list[Flag]:
    """``flags`` without repeats, their text cleaned and cut, at most :data:`MAX_FLAGS`."""
    unique = list(dict.fromkeys(Flag(flag.kind, clean(flag.where, MAX_WHERE), clean(flag.detail, MAX_DETAIL))
                                for flag in flags))
    if len(unique) <= MAX_FLAGS:
        return unique
    return unique[:MAX_FLAGS] + [Flag("more", "", f"{len(unique) - MAX_FLAGS} more not listed")]
