"""Which of a submission's functions hung, and the shorter time limit their later calls get.

A function that ran past the per-call limit once (``while True: pass`` in ``split_heads``)
would cost that whole limit again in every test that calls it. So after one of its calls
timed out, later calls of it get a shorter limit; so do calls of what may run its code or
hold the hang (a ``MultiHeadAttention`` whose forward calls a hung ``split_heads``, and
``split_heads`` once that forward hung): any function or class whose code reads its name,
or whose name its code reads, directly or not. Which names a definition reads is parsed
here (:mod:`grader.source.parsed`), never asked of the student's process.

The shorter limit is derived from the reference's own time for the same call on the grading
device (:mod:`grader.sandbox.reference_timing`): ``Limits.hung_call_slowdown`` times it, so
a correct function 100 times slower than the reference still finishes; never less than
``Limits.hung_call_timeout_s``, which covers the round trip of a call the reference does in
microseconds (or one it cannot time); never more than the per-call limit. A function that
never timed out keeps the full per-call limit, however slow.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

from grader.core.ingest import Program
from grader.sandbox.limits import Limits
from grader.source.parsed import ParsedSource


class HungCalls:
    """One submission's functions that timed out, by module-level name."""

    def __init__(self, program: Program, limits: Limits):
        self._program = program
        self._limits = limits
        self._hung: set[str] = set()

    @cached_property
    def _reads(self) -> dict[str, set[str]]:
        """Module-level name -> the names its definitions read. Parsed at the first timeout
        only: most submissions never hang, and each call asks for its limit."""
        reads: dict[str, set[str]] = {}
        for statement in ParsedSource(self._program).statements:
            for name in statement.binds:
                reads.setdefault(name, set()).update(statement.loads)
        return reads

    def timeout_s(self, label: str, reference_s: Callable[[], float | None] = lambda: None
                  ) -> tuple[float, str | None]:
        """The time limit for a call (``split_heads``, ``MultiHeadAttention.forward``) and,
        when it is the shorter one, why. ``reference_s`` says how long the reference takes
        for it (None: it cannot say); it is asked only for a shortened call."""
        if not self._hung:
            return self._limits.call_timeout_s, None
        name = _name_of(label)
        hung = {h for h in self._hung if h in self._reached_from(name) or name in self._reached_from(h)}
        if not hung:
            return self._limits.call_timeout_s, None
        culprit = min(hung)
        seconds = reference_s()
        budget = self._limits.hung_call_timeout_s
        if seconds is not None:
            budget = max(budget, self._limits.hung_call_slowdown * seconds)
        timeout_s = min(budget, self._limits.call_timeout_s)
        return timeout_s, (
            f"{culprit} ran past the time limit of {self._limits.call_timeout_s:g} s in an earlier test, so "
            f"calls that may run its code get {timeout_s:.2g} s")

    def timed_out(self, label: str) -> None:
        self._hung.add(_name_of(label))

    def _reached_from(self, name: str) -> set[str]:
        reached, pending = {name}, [name]
        while pending:
            for read in self._reads.get(pending.pop(), ()):
                if read not in reached:
                    reached.add(read)
                    pending.append(read)
        return reached


def _name_of(label: str) -> str:
    """The module-level name a call's label starts with: ``MultiHeadAttention.forward`` ->
    ``MultiHeadAttention``."""
    return label.split(".", 1)[0]
