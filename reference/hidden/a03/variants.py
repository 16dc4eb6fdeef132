"""What common mistakes in assignment 03 produce, computed from the same weights.

``multi_head_attention`` is a functional MHA whose keyword arguments switch on one
mistake each; with the defaults it equals ``reference.multihead.MultiHeadAttention``
(the project's tests check that), so every variant differs from the reference in
exactly one way.
"""

import math

import torch
import torch.nn.functional as F

from grader.suite import (DROPOUT_RATE_IGNORED, DROPOUT_SAME_UNITS, DROPOUT_UNSCALED,  # noqa: F401
                          MASK_FILL_NOT_NEGATIVE, Mistake)
from reference.multihead import combine_heads, split_heads

NO_TRANSPOSE_SPLIT = "heads split with view and no transpose: features of different heads are mixed"
NO_TRANSPOSE_COMBINE = "heads combined with view and no transpose: features of different heads are mixed"
HEADS_NOT_FIRST = "heads must be dimension 1: (B, H, T, D/H), not (B, T, H, D/H); transpose after the view"
NO_SCALE = "scores not scaled: divide by sqrt(d_k), d_k = d_model / num_heads"
SCALE_D_MODEL = "scores scaled by sqrt(d_model) instead of sqrt(d_k), the head dimension"
SCALE_D_K = "scores scaled by d_k instead of sqrt(d_k)"
SOFTMAX_DIM = "softmax over the wrong dimension: normalise over the keys (the last dimension)"
MASK_INVERTED = "mask inverted: True means may attend (fill the positions where the mask is False)"
MASK_AFTER_SOFTMAX = "mask applied after the softmax: mask the scores before it, so weights still sum to 1"
MASK_NOT_AS_GIVEN = ("the mask is not applied as given: fill the scores where mask is False with float('-inf') "
                     "before the softmax; it broadcasts to (B, H, T_q, T_k) as it is")
NO_OUTPUT_PROJECTION = "the output projection W_o is not applied after combining the heads"
DROPOUT_MISSING = ("dropout=0.5 changes nothing in training mode: apply nn.Dropout(dropout) to the attention "
                   "weights, after the softmax")
DROPOUT_MISPLACED = ("dropout does not zero attention weights: apply it to the weights after the softmax, "
                     "dropout(weights) @ v")
DROPOUT_ON_OUTPUT = "dropout applied to the output: it belongs on the attention weights, dropout(weights) @ v"
INPUT_DETACHED = ("an input gets no gradient: forward must not cut the graph from the query, key or value "
                  "(.detach(), torch.no_grad(), .data)")


# The contract's words (assignments/03/assignment.toml's mistakes) for the mistakes these hints
# name: a check whose value matches one of them carries those words, the rubric's evidence.
NO_TRANSPOSE_SPLIT = Mistake(NO_TRANSPOSE_SPLIT,
                             "heads split with `view` and no `transpose` (features of different heads mixed)")
SCALE_D_MODEL = Mistake(SCALE_D_MODEL, 'scores scaled by `sqrt(d_model)` instead of the head dimension')
NO_SCALE = Mistake(NO_SCALE, 'scores not scaled')
SCALE_D_K = Mistake(SCALE_D_K, 'scores scaled by `d_k` instead of `sqrt(d_k)`')
SOFTMAX_DIM = Mistake(SOFTMAX_DIM, 'softmax over the wrong dimension')
MASK_INVERTED = Mistake(MASK_INVERTED, 'mask inverted (True read as "blocked")')
MASK_FILL_NOT_NEGATIVE = Mistake(MASK_FILL_NOT_NEGATIVE,
                                 'masked scores filled with a value that is not very negative (0, `1e-15`)')


def split_without_transpose(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    batch, length, d_model = x.shape
    return x.reshape(batch, num_heads, length, d_model // num_heads)


def combine_without_transpose(x: torch.Tensor) -> torch.Tensor:
    batch, num_heads, length, d_k = x.shape
    return x.reshape(batch, length, num_heads * d_k)


def multi_head_attention(
    params: dict[str, torch.Tensor],
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    num_heads: int,
    mask: torch.Tensor | None = None,
    *,
    split=split_heads,
    combine=combine_heads,
    scale: str = "sqrt_d_k",
    softmax_dim: int = -1,
    mask_mode: str = "before_softmax",
    output_projection: bool = True,
) -> torch.Tensor:
    def linear(name: str, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, params[f"{name}.weight"], params.get(f"{name}.bias"))

    q = split(linear("W_q", query), num_heads)  # (B, H, T_q, d_k)
    k = split(linear("W_k", key), num_heads)  # (B, H, T_k, d_k)
    v = split(linear("W_v", value), num_heads)  # (B, H, T_k, d_k)
    d_k = query.size(-1) // num_heads
    divisor = {"sqrt_d_k": math.sqrt(d_k), "none": 1.0, "sqrt_d_model": math.sqrt(query.size(-1)), "d_k": d_k}[scale]
    scores = q @ k.transpose(-2, -1) / divisor  # (B, H, T_q, T_k)
    if mask is not None and mask_mode == "before_softmax":
        scores = scores.masked_fill(~mask, float("-inf"))
    elif mask is not None and mask_mode == "inverted":
        scores = scores.masked_fill(mask, float("-inf"))
    elif mask is not None and mask_mode == "fill_zero":
        scores = scores.masked_fill(~mask, 0.0)
    weights = torch.softmax(scores, dim=softmax_dim)
    if mask is not None and mask_mode == "after_softmax":
        weights = weights.masked_fill(~mask, 0.0)
    heads = combine(weights @ v)  # (B, T_q, D)
    return linear("W_o", heads) if output_projection else heads


def head_values(params: dict[str, torch.Tensor], value: torch.Tensor, num_heads: int) -> torch.Tensor:
    """split_heads(W_v(value)), (B, H, T_k, d_k): the rows each head's output is a weighted sum of."""
    return split_heads(F.linear(value, params["W_v.weight"], params.get("W_v.bias")), num_heads)


def heads_behind(params: dict[str, torch.Tensor], output: torch.Tensor, num_heads: int) -> torch.Tensor:
    """The heads (B, H, T_q, d_k) that W_o projected to ``output`` (a checked tensor): W_o undone."""
    weight, bias = params["W_o.weight"].double(), params.get("W_o.bias")
    shifted = output.detach().double() - (0 if bias is None else bias.double())
    combined = torch.linalg.solve(weight, shifted.transpose(-2, -1)).transpose(-2, -1)  # (B, T_q, D)
    return split_heads(combined, num_heads)


def mistakes(params, query, key, value, num_heads, mask=None) -> dict:
    """Hint -> lazily computed output of that mistake, for ``grader.suite.checks.expect_close``."""
    def variant(**change):
        return lambda: multi_head_attention(params, query, key, value, num_heads, mask, **change)

    table = {
        NO_TRANSPOSE_SPLIT: variant(split=split_without_transpose),
        NO_TRANSPOSE_COMBINE: variant(combine=combine_without_transpose),
        SCALE_D_MODEL: variant(scale="sqrt_d_model"),
        NO_SCALE: variant(scale="none"),
        SCALE_D_K: variant(scale="d_k"),
        SOFTMAX_DIM: variant(softmax_dim=-2),
        NO_OUTPUT_PROJECTION: variant(output_projection=False),
    }
    if mask is not None:
        table[MASK_INVERTED] = variant(mask_mode="inverted")
        table[MASK_AFTER_SOFTMAX] = variant(mask_mode="after_softmax")
        table[MASK_FILL_NOT_NEGATIVE] = variant(mask_mode="fill_zero")
    return table
