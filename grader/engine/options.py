"""How to grade: the options the library takes and the CLI offers, with their one set of defaults.

The library's functions default to :data:`DEFAULT` and :data:`DEFAULT_BATCH`; the CLI
builds its flags' defaults from them. Limits default in :class:`grader.sandbox.limits.Limits`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from grader.sandbox.isolation import MODES as SANDBOXES
from grader.sandbox.limits import Limits

DEVICES = ("auto", "cpu", "cuda")  # auto: CUDA when available
EXECUTORS = ("local", "ray")
# What the LMS gradebooks give a student who handed in nothing: a blank cell, which leaves the
# LMS's own "missing", excused or extension as it is, or 0.
MISSING_SCORES = ("blank", "zero")


class OptionError(ValueError):
    """An option's value cannot be used here; ``option`` names it (the CLI shows its flag)."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


@dataclass(frozen=True)
class GradeOptions:
    """How one submission is graded."""

    device: str = "auto"  # one of DEVICES
    sandbox: str = "basic"  # isolation beyond the child process: one of SANDBOXES (grader.sandbox.isolation)
    limits: Limits = field(default_factory=Limits)
    total_timeout_s: float = 900.0  # for the whole suite run, however the student's code spends it

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise OptionError("device", f"unknown device {self.device!r}: use {', '.join(DEVICES)}")
        if self.sandbox not in SANDBOXES:
            raise OptionError("sandbox", f"unknown sandbox mode {self.sandbox!r}: use {', '.join(SANDBOXES)}")


@dataclass(frozen=True)
class BatchOptions:
    """How a folder of submissions is graded, beyond how each one is."""

    jobs: int = os.cpu_count() or 1  # submissions graded at once
    executor: str = "local"  # one of EXECUTORS
    all_files: bool = False  # grade every file a student handed in, not only the one their grade comes from
    missing: str = "blank"  # one of MISSING_SCORES

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise OptionError("executor", f"unknown executor {self.executor!r}: use {', '.join(EXECUTORS)}")
        if self.missing not in MISSING_SCORES:
            raise OptionError("missing", f"unknown missing score {self.missing!r}: use {', '.join(MISSING_SCORES)}")


DEFAULT = GradeOptions()
DEFAULT_BATCH = BatchOptions()
