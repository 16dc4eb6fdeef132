"""The time limit of each call into student code, and which of a submission's functions hung.

Every call is first given ``Limits.call_floor_s`` of CPU time. Almost every call ends long
before (the suites' calls take milliseconds on the reference). One still running then is
measured against the reference: the reference's own time for the same call on the grading
device (:mod:`grader.sandbox.reference_timing`), ``Limits.call_slowdown`` times, and at
least ``Limits.call_per_element_s`` per element of its tensor arguments, so correct code that
loops in Python where the reference is vectorised (over heads, over positions, element by
element) finishes; never more than ``Limits.call_timeout_s``, which a call the reference
cannot time (an argument that lives in the student's process, a name the reference does not
define) gets. So a ``while True: pass`` in ``split_heads`` costs ``call_floor_s``, not the full
limit, and the reference is timed only for a call that ran that long. A whole job (07's 100
training steps) is measured against the same job done with the reference, which the suite
gives (``student.timed_like``), and may take ``call_slowdown`` times as long, as much of the
submission's time (``student_time_s``) as that is: a GPT that computes attention one scalar at
a time trains for minutes. The suite runs such a part last, so it takes no other part's time.

A function that ran past its limit once would cost it again in every test that calls it. So
after one of its calls timed out, calls that may run its code or hold the hang (a
``MultiHeadAttention`` whose forward calls a hung ``split_heads``, and ``split_heads`` once that
forward hung) get ``Limits.hung_call_slowdown`` times the reference's time, at least
``Limits.hung_call_timeout_s`` (which covers the round trip of a call the reference does in
microseconds) and at most ``call_timeout_s``, and no full limit to fall back on: any function
or class whose code reads its name, or whose name its code reads, directly or not, and any
call handed an object of such a class (07's training loop, given a GPT whose forward hung).
Which names a definition reads is parsed here (:mod:`grader.source.parsed`), never asked of
the student's process; an object's class is the one the grader built it as.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
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
              elements: int = 0, objects: Iterable[str] = (), job: bool = False) -> CallLimit:
        """The limit of a call (``split_heads``, ``MultiHeadAttention.forward``). ``reference_s``
        says how long the reference takes for it (None: it cannot say); it is asked only for a
        call that runs past its first limit. ``elements``: how many its tensor arguments hold;
        ``objects``: the classes of the student's objects it is handed; ``job``: a whole job,
        measured against the same job done with the reference, and not held to ``call_timeout_s``."""
        limits = self._limits
        culprit = self._culprit({_name_of(label), *objects})
        floor, slowdown = ((limits.hung_call_timeout_s, limits.hung_call_slowdown) if culprit
                           else (limits.call_floor_s, limits.call_slowdown))
        if floor >= limits.call_timeout_s:
            return CallLimit(limits.call_timeout_s)

        def final() -> tuple[float, str | None]:
            seconds = reference_s()
            if culprit:
                final_s = min(floor if seconds is None else max(floor, slowdown * seconds), limits.call_timeout_s)
                return final_s, (f"{culprit} ran past its time limit in an earlier call, so calls that may run its "
                                 f"code get {final_s:.2g} s")
            if seconds is None:
                return limits.call_timeout_s, None
            budget = max(floor, slowdown * seconds, limits.call_per_element_s * elements)
            if job:  # bounded only by what is left of the submission's time (child_process.py)
                return budget, f"a job may take {slowdown:g} times the reference's time for the same job"
            if budget < limits.call_timeout_s:
                return budget, (f"a call may take {slowdown:g} times the reference's time for it, at least {floor:g} s "
                                f"and {limits.call_per_element_s * 1e6:g} us per element of its tensor arguments")
            return limits.call_timeout_s, None

        return CallLimit(floor, final)

    def _culprit(self, names: set[str]) -> str | None:
        """The hung function nearest the code of a call that names these (its target, its
        objects' classes), if any."""
        if not self._hung:
            return None
        hung = {h for h in self._hung for name in names
                if h in self._reached_from(name) or name in self._reached_from(h)}
        return min(hung) if hung else None

    def timed_out(self, label: str, objects: Iterable[str] = ()) -> None:
        """A call timed out. What hung: its target, where the submission defines it (a
        ``generate`` handed a GPT may be slow in its own loop, not in the GPT); else, for a grader
        helper's call (its training loop spends its time in the student's model), the classes
        of the student's objects it was handed; else the target still (a class made in a function)."""
        target = _name_of(label)
        if target in self._reads:
            self._hung.add(target)
        else:
            self._hung.update(set(objects) & self._reads.keys() or {target})

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
