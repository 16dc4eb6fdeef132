"""What goes wrong on the student's side of a call, as hidden suites catch it.

Every message here is built from bounded, cleaned text: whatever the student's process
sends, a report never carries more than these bounds.
"""

from __future__ import annotations

import re
from typing import Any

from grader.core.ingest import Program
from grader.core.sanitize import clean

# Bounds on what is copied from the child into a report.
TYPE_NAME_CHARS, MESSAGE_CHARS, TRACEBACK_CHARS = 100, 2000, 4000
SOURCE_LINE_CHARS = 160

# A frame of the student's code as traceback.format_list writes it.
_FRAME = re.compile(r'^  File "(?P<label>[^"]*)", line (?P<number>\d+), in .*$', re.MULTILINE)


class StudentError(Exception):
    """Base of everything that goes wrong on the student's side of a call."""


class StudentException(StudentError):
    """The student's code raised an exception. ``stub``: a NotImplementedError that a ``raise``
    of the submission's own code raised (an unfinished part), not torch (an operator with no
    kernel for a dtype); ``stub_owner``: the class or function of the submission whose code
    raised it (``Head`` for ``Head.forward``), None where unknown. As the student's process says,
    so they word a verdict and say whose stub failed it, never more."""

    def __init__(self, target: str, type_name: str, message: str, traceback: str, memory: bool = False,
                 stub: bool = False, stub_owner: str | None = None):
        self.target, self.type_name, self.message, self.traceback = target, type_name, message, traceback
        self.memory = memory
        self.stub = stub and type_name == "NotImplementedError"
        self.stub_owner = stub_owner if self.stub else None
        super().__init__(f"{target} raised {type_name}: {message}" if message else f"{target} raised {type_name}")


class StudentNotFound(StudentError):
    """``defined_at``: where the submission's source defines the name (its definition never
    ran), else None."""

    def __init__(self, name: str, defined_at: str | None = None):
        self.name, self.defined_at = name, defined_at
        super().__init__(f"not found: your submission does not define `{name}`" if defined_at is None else
                         f"`{name}` was not defined once your code had loaded, though {defined_at} defines it: "
                         "that definition did not run, or did not finish (see the notes)")


class StudentTimeout(StudentError):
    pass


class StudentCrashed(StudentError):
    """The child ended during a call, or sent something that is not a valid reply."""


def with_source_lines(traceback: str, program: Program) -> str:
    """The child's traceback with each frame's line of code, as Python prints it. The child
    compiles the student's cells from strings, so it has no lines to show; the grader reads
    them from its own copy of the submission, never from the child."""
    def add_line(frame: re.Match[str]) -> str:
        line = program.line(frame["label"], int(frame["number"]))
        return f"{frame[0]}\n    {clean(line, SOURCE_LINE_CHARS)}" if line else frame[0]
    return clean(_FRAME.sub(add_line, traceback), TRACEBACK_CHARS)


def reported_type_name(value: Any) -> str:
    """An exception's type name as the child reports it: a bounded string, nothing else."""
    return clean(value, TYPE_NAME_CHARS) if isinstance(value, str) and value else "Exception"


def function_owner(qualname: Any) -> str | None:
    """Whose stub it is, from the qualified name of the function the child says raised it
    (``Head.forward`` -> ``Head``): an identifier of at most TYPE_NAME_CHARS, else None."""
    if not isinstance(qualname, str):
        return None
    owner = qualname.partition(".")[0]
    return owner if owner.isidentifier() and owner.isascii() and len(owner) <= TYPE_NAME_CHARS else None
