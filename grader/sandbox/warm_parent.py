"""The cyclic garbage collector in the grader's two warm parents: the grader process, which
forks every suite process, and the zygote server, which forks every submission's zygote.

Each imports torch (the server torch._dynamo too, the grader pytest and the suite): about a
million objects that live as long as the process. While they are made, the collector scans
the ones made so far again and again: 0.3 s of the grader's start and 0.47 s of the server's
on the 2-core machine, of a `grade` run's 2.7-3.2 s. So a warm parent pauses the collector
while it starts, and at each fork freezes what it holds (``gc.freeze``: the fork's
collections then skip those objects, and so leave their pages shared) and lets it run again.
"""

from __future__ import annotations

import gc

_paused = False


def pause_collector() -> None:
    """Call first in a warm parent: no collection until its first fork."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def freeze_before_fork() -> None:
    """Call just before a warm parent forks: what it holds now is left out of every later
    collection, in the fork and here, and a collector paused while it started runs again."""
    global _paused
    gc.freeze()
    if _paused:
        gc.enable()
        _paused = False
