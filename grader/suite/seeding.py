"""Seeding what a hidden suite builds: a reference module's initial weights.

``torch.manual_seed`` seeds every device's generator, and for each GPU backend that has not
started (CUDA, XPU, MTIA: in a suite process that grades on the CPU, all of them) it records a
formatted stack trace, to report should that backend fail to start later: about 5 ms a call
under pytest's deep stack, 0.13 s of a 07 suite process. A reference module is built on the
CPU and then moved to the grading device, so its weights come from the CPU's generator alone.
"""

from __future__ import annotations

import torch


def seed_reference(seed: int) -> None:
    """Seed the CPU generator that the reference module built next draws its initial weights
    from (build it on the CPU, then ``.to(device)``): what ``torch.manual_seed(seed)`` does for it."""
    torch.default_generator.manual_seed(seed)
