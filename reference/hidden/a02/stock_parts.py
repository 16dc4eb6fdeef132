"""Stock parts for the 02 suite: grader-owned, written from the contract, not the reference's code.

Each is one of the contract's parts, by its name. When CausalSelfAttention fails, each failing
test runs once more with these standing in for the student's causal_mask and dropout (the
contract's ``uses``; ``suite.toml``'s ``stand_ins``); a test that then passes shows the used
part as its cause. They are answers: the grader sends them only into a student process that
ends with that rerun. Needs only torch.
"""

import torch


def causal_mask(T: int, device=None) -> torch.Tensor:
    if T < 0:
        raise ValueError(f"T must be 0 or more, got {T}")
    rows = torch.arange(T, device=device)
    return rows[:, None] >= rows[None, :]  # query i sees keys 0..i


def dropout(x: torch.Tensor, p: float, training: bool = True, generator=None) -> torch.Tensor:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return torch.zeros_like(x)
    # One uniform draw per element, from the caller's generator: the contract's random numbers.
    draw = torch.rand(x.shape, generator=generator, device=x.device,
                      dtype=x.dtype if x.is_floating_point() else torch.float32)
    return torch.where(draw >= p, x / (1.0 - p), torch.zeros_like(x))
