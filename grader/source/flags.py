"""The report's ``flags``: what looks evasive in a submission's source, for the instructor.

Computed in the trusted process from the :class:`~grader.core.ingest.Program` the grader read,
never taken from the student's process: every construct :mod:`grader.source.evasion` knows,
anywhere in the source, and what the hidden suites' source checks found in the code a
part reaches (a forbidden built-in, a name defined out of sight), which the suites attach
to the checks that failed (:class:`grader.suite.checks.CheckFailed`). No points follow from a
flag by itself. How many a report holds, and how long, is the report's to say
(:func:`grader.core.report.bounded`): this module is the trusted side's detection, never shipped
to students (grader/course/release.py).
"""

from __future__ import annotations

from grader.core.ingest import Program
from grader.core.report import Flag
from grader.source.evasion import constructs, unreadable
from grader.source.parsed import ParsedSource


def program_flags(program: Program) -> list[Flag]:
    """Every evasive-looking construct in the source, in program order."""
    source = ParsedSource(program)
    return [construct.flag for construct in unreadable(source)] + [
        construct.flag for statement in source.statements for construct in constructs(source, statement)]

