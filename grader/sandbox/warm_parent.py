"""The cyclic garbage collector while the grader's two warm parents start: the grader process,
which forks every suite process, and the zygote server, which forks every submission's zygote.

Each imports torch (the server torch._dynamo too, the grader pytest and the engine): about a
million objects that live as long as the process. While they are made, the collector scans
the ones made so far again and again: 0.3 s of the grader's start and 0.47 s of the server's
on the 2-core machine, of a `grade` run's 2.7-3.2 s. So a warm parent imports them with the
collector paused, then freezes them (``gc.freeze``: later collections, its own and its forks',
skip those objects, and so leave their pages shared) and lets it run again.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def starting() -> Iterator[None]:
    """No collection inside; what the process holds after it is frozen. A collector that was
    off before stays off."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
