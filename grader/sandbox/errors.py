"""What goes wrong on the student's side of a call, as hidden suites catch it.

Every message here is built from bounded, cleaned text: whatever the student's process
sends, a report never carries more than these bounds.
"""

from __future__ import annotations

from typing import Any

from grader.sanitize import clean

# Bounds on what is copied from the child into a report.
TYPE_NAME_CHARS, MESSAGE_CHARS, TRACEBACK_CHARS = 100, 2000, 4000


class StudentError(Exception):
    """Base of everything that goes wrong on the student's side of a call."""


class StudentException(StudentError):
    """The student's code raised an exception."""

    def __init__(self, target: str, type_name: str, message: str, traceback: str, memory: bool = False):
        self.target, self.type_name, self.message, self.traceback = target, type_name, message, traceback
        self.memory = memory
        super().__init__(f"{target} raised {type_name}: {message}" if message else f"{target} raised {type_name}")


class StudentNotFound(StudentError):
    def __init__(self, name: str):
        self.name = name
        super().__init__(f"not found: your submission does not define `{name}`")


class StudentTimeout(StudentError):
    pass


class StudentCrashed(StudentError):
    """The child ended during a call, or sent something that is not a valid reply."""


def reported_type_name(value: Any) -> str:
    """An exception's type name as the child reports it: a bounded string, nothing else."""
    return clean(value, TYPE_NAME_CHARS) if isinstance(value, str) and value else "Exception"
