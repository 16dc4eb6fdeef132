"""The time limit of each call into student code, and which of a submission's functions hung.

Every call is first given ``Limits.call_floor_s`` of CPU time. Almost every call ends long
before (the suites' calls take milliseconds on the reference). One still running then is
measured against the reference: the reference's own time for the same call on the grading
device (:mod:`grader.sandbox.reference_timing`), ``Limits.call_slowdown`` times, and at
least ``Limits.call_per_element_s`` per element of its tensor arguments, so correct code that
loops in Python where the reference is vectorised (over heads, over positions, element by
element) finishes; never more than ``Limits.measured_call_timeout_s`` (07's training of a
GPT whose attention loops over positions). A call the reference cannot time (an argument that
lives in the student's process, a name the reference does not define, and no yardstick the
suite gives with ``student.timed_like``) gets the full ``call_timeout_s``. So a ``while True: pass`` in ``split_heads`` costs
``call_floor_s``, not the full limit, and the reference is timed only for a call that ran
that long.

A function that ran past its limit once would cost it again in every test that calls it. So
after one of its calls timed out, calls that may run its code or hold the hang (a
``MultiHeadAttention`` whose forward calls a hung ``split_heads``, and ``split_heads`` once that
forward hung) get ``Limits.hung_call_slowdown`` times the reference's time, at least
``Limits.hung_call_timeout_s`` (which covers the round trip of a call the reference does in
microseconds), and no full limit to fall back on: any function or class whose code reads its
name, or whose name its code reads, directly or not. Which names a definition reads is parsed
here (:mod:`grader.source.parsed`), never asked of the student's process.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

from grader.core.ingest import Program
from grader.sandbox.limits import CallLimit, Limits
from grader.source.parsed import ParsedSource


class HungCalls:
    """The limits of one submission's calls, and its functions that timed out, by module-level
    name."""

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

    def limit(self, label: str, reference_s: Callable[[], float | None] = lambda: None,
              elements: int = 0) -> CallLimit:
        """The limit of a call (``split_heads``, ``MultiHeadAttention.forward``). ``reference_s``
        says how long the reference takes for it (None: it cannot say); it is asked only for a
        call that runs past its first limit. ``elements``: how many its tensor arguments hold."""
        limits = self._limits
        culprit = self._culprit(label)
        floor, slowdown = ((limits.hung_call_timeout_s, limits.hung_call_slowdown) if culprit
                           else (limits.call_floor_s, limits.call_slowdown))
        if floor >= limits.call_timeout_s:
            return CallLimit(limits.call_timeout_s)

        def final() -> tuple[float, str | None]:
            seconds = reference_s()
            if seconds is None:
                budget, most = (floor if culprit else limits.call_timeout_s), limits.call_timeout_s
            else:
                budget = max(floor, slowdown * seconds, 0 if culprit else limits.call_per_element_s * elements)
                most = max(limits.call_timeout_s, limits.measured_call_timeout_s)
            final_s = min(budget, most)
            if culprit:
                return final_s, (f"{culprit} ran past its time limit in an earlier test, so calls that may run its "
                                 f"code get {final_s:.2g} s")
            if final_s < most:
                return final_s, (f"a call may take {slowdown:g} times the reference's time for it, at least {floor:g} s "
                                 f"and {limits.call_per_element_s * 1e6:g} us per element of its tensor arguments")
            return final_s, None

        return CallLimit(floor, final)

    def _culprit(self, label: str) -> str | None:
        """The hung function nearest this call's code, if any."""
        if not self._hung:
            return None
        name = _name_of(label)
        hung = {h for h in self._hung if h in self._reached_from(name) or name in self._reached_from(h)}
        return min(hung) if hung else None

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
