"""Stock parts for the 01 suite: grader-owned, written from the contract, not the reference's code.

Each is one of the contract's parts, by its name. When a part that uses others fails
(scaled_dot_product_attention uses attention_scores and softmax, SelfAttention uses
scaled_dot_product_attention: the contract's ``uses``), each failing test runs once more with
these standing in for the student's (``suite.toml``'s ``stand_ins``); a test that then passes
shows the used part as its cause. They are answers: the grader sends them only into a student
process that ends with that rerun. Needs only torch.
"""

import math

import torch


def attention_scores(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    return torch.matmul(query, keys.transpose(-2, -1))


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    peak = x.amax(dim=dim, keepdim=True)
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))  # a row of -inf stays 0/0
    exp = torch.exp(x - peak)
    return exp / exp.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask=None):
    scores = attention_scores(q, k) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights
