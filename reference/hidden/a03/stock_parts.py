"""Stock parts for the 03 suite: grader-owned, written from the contract, not the reference's code.

Each is one of the contract's parts, by its name. When MultiHeadAttention fails, each failing
test runs once more with these standing in for the student's split_heads and combine_heads
(the contract's ``uses``; ``suite.toml``'s ``stand_ins``); a test that then passes shows the
used part as its cause. They are answers: the grader sends them only into a student process
that ends with that rerun. Needs only torch.
"""

import torch


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    batch, length, width = x.shape
    if width % num_heads != 0:
        raise ValueError(f"the last dimension ({width}) is not divisible by num_heads={num_heads}")
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)  # head h: features h*D/H ... (h+1)*D/H - 1


def combine_heads(x: torch.Tensor) -> torch.Tensor:
    return torch.cat(x.unbind(dim=1), dim=-1)  # (B, T, H*d_k), head after head
