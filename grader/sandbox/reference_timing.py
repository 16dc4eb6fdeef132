"""How long the reference takes for a call about to be made into student code, measured here,
on the grading device: the yardstick of the shorter limit that calls near a hang get
(:mod:`grader.sandbox.hung_calls`).

The reference is trusted code, already imported in the suite's process; it runs on the
call's own arguments (a method on a fresh instance of the reference's class of the same
name, built with the student object's constructor arguments). A call it cannot make here
(an argument that lives in the student's process, a name the reference does not define)
has no yardstick, and the fixed floor applies.
"""

from __future__ import annotations

import time
from types import ModuleType

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
    Every argument is a local value (the caller checks), and the random state is left as it
    was: the hidden tests seed it to build their own modules."""
    values = (*args, *kwargs.values(), *(built[1] if built else ()), *(built[2].values() if built else ()))
    device = next((value.device for value in values if isinstance(value, torch.Tensor)), torch.device("cpu"))
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            if method is None:
                function = getattr(reference, name)
            else:
                class_name, init_args, init_kwargs = built
                instance = getattr(reference, class_name)(*init_args, **init_kwargs)
                if isinstance(instance, torch.nn.Module):
                    instance.to(device)
                function = getattr(instance, method)
            return min(_seconds(function, args, kwargs, device) for _ in range(REPEATS))
    except Exception:  # noqa: BLE001 - the reference refusing these arguments only means no yardstick
        return None


def _seconds(function, args: tuple, kwargs: dict, device: torch.device) -> float:
    """On the CPU, CPU time, as the student's calls are counted, so a busy machine changes
    neither: this thread's (the suite process computes on one), since the process's clock
    advances only at the scheduler's ticks while its RLIMIT_CPU is armed (trusted_bounds.py);
    on a GPU, the wall clock, which its kernels' time is part of."""
    clock = time.perf_counter if device.type == "cuda" else time.thread_time
    start = clock()
    function(*args, **kwargs)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return clock() - start
