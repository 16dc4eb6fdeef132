"""How long the reference takes for a call about to be made into student code, measured here,
on the grading device: the yardstick of the limit a call that runs long gets
(:mod:`grader.sandbox.hung_calls`).

The reference is trusted code, already imported in the suite's process; it runs on the
call's own arguments (a method on a fresh instance of the reference's class of the same
name, built with the student object's constructor arguments). A call it cannot make here
(an argument that lives in the student's process, a name the reference does not define)
has no yardstick of its own; the suite may give one (``student.timed_like``: the same work
done here with the reference, such as 07's training loop on the reference's GPT), timed by
:func:`seconds_of`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

import torch

# The fastest of a few runs: the first call in a process pays for lazy initialisation, which
# would inflate the limit several times over.
REPEATS = 3

# (class name, args, kwargs) an object in the student's process was constructed with.
Construction = tuple[str, tuple, dict]


def reference_seconds(reference: ModuleType, name: str, method: str | None, built: Construction | None,
                      args: tuple, kwargs: dict) -> float | None:
    """Seconds the reference takes for ``name(*args, **kwargs)`` (a function) or, with
    ``method``, for that method of the reference's ``built`` class; None when it cannot say.
    Every argument is a local value (the caller checks)."""
    def prepare() -> Callable[[], Any]:
        if method is None:
            function = getattr(reference, name)
        else:
            class_name, init_args, init_kwargs = built
            instance = getattr(reference, class_name)(*init_args, **init_kwargs)
            if isinstance(instance, torch.nn.Module):
                instance.to(device)
            function = getattr(instance, method)
        return lambda: function(*args, **kwargs)

    device = device_of((*args, *kwargs.values(), *(built[1] if built else ()), *(built[2].values() if built else ())))
    return seconds_of(prepare, device, REPEATS)


def seconds_of(prepare: Callable[[], Callable[[], Any]], device: torch.device, repeats: int = 1) -> float | None:
    """The fastest of ``repeats`` runs of the work ``prepare()`` returns (preparing is not
    timed); None when it raises. The random state is left as it was: the hidden tests seed it
    to build their own modules."""
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            work = prepare()
            return min(_seconds(work, device) for _ in range(repeats))
    except Exception:  # noqa: BLE001 - the reference refusing these arguments only means no yardstick
        return None


def device_of(values: Iterable[Any]) -> torch.device:
    """The device of the first tensor among a call's values: where its reference runs."""
    return next((value.device for value in values if isinstance(value, torch.Tensor)), torch.device("cpu"))


def _seconds(work: Callable[[], Any], device: torch.device) -> float:
    """On the CPU, CPU time, as the student's calls are counted, so a busy machine changes
    neither: this thread's (the suite process computes on one), since the process's clock
    advances only at the scheduler's ticks while its RLIMIT_CPU is armed (trusted_bounds.py);
    on a GPU, the wall clock, which its kernels' time is part of."""
    clock = time.perf_counter if device.type == "cuda" else time.thread_time
    start = clock()
    work()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return clock() - start
