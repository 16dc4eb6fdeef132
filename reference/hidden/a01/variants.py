"""What common mistakes in assignment 01 produce, computed from the same inputs.

``softmax``, ``attention`` and ``self_attention`` are functional versions of the parts
whose keyword arguments switch on one mistake each; with the defaults they equal
``reference.attention`` (the project's tests check that), so every variant differs from
the reference in exactly one way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F

from grader.suite import MASK_FILL_NOT_NEGATIVE, SCALE_BY_INPUT_WIDTH, SCALE_BY_LENGTH, Mistake

# torch's built-in softmax, and the built-ins with one inside, as the operators that run below
# every Python route to them (torch.softmax, F.softmax, nn.Softmax, a method and torch.ops all
# run aten::_softmax; log_softmax and cross_entropy aten::_log_softmax; softmin a negation and
# aten::_softmax; scaled_dot_product_attention and nn.MultiheadAttention their fused kernels or
# aten::_safe_softmax). Taken from the operator registry, so a torch that adds a softmax
# kernel under a new name is covered too.
_SOFTMAX_INSIDE = re.compile(r"softmax|softmin|attention|multi_head|_transformer_encoder")
FORBIDDEN_SOFTMAX_OPS = frozenset(name for name in torch._C._dispatch_get_all_op_names()
                                  if _SOFTMAX_INSIDE.search(name.split("::", 1)[-1]))

SCORES_SCALED = ("attention_scores must return the raw scores query @ keys^T, not scaled: "
                 "scaled_dot_product_attention does the scaling")
SCORES_TRANSPOSED = "scores transposed: rows are queries and columns keys, query @ keys^T -> (..., T_q, T_k)"

FORBIDDEN_SOFTMAX = "forbidden built-in softmax used"
SOFTMAX_WRONG_DIM = "softmax over the wrong dimension: take the max and the sum along `dim` (keepdim=True)"
SOFTMAX_NO_KEEPDIM = ("max or sum without keepdim=True: the reduced tensor broadcasts along the wrong "
                      "dimension; use x.amax(dim=dim, keepdim=True) and exp.sum(dim=dim, keepdim=True)")
NO_MAX_SUBTRACTION = ("overflow: exp of a large input is inf and inf/inf is nan; subtract the maximum "
                      "along dim before exp (softmax does not change when a row is shifted)")
GLOBAL_MAX = ("maximum taken over the whole tensor instead of along dim: rows far below it underflow "
              "to 0/0 = nan; use x.amax(dim=dim, keepdim=True)")

NO_SCALE = "scores not scaled: divide q k^T by sqrt(d_k), d_k = q.size(-1)"
SCALE_D_K = ("scores scaled by d_k instead of sqrt(d_k) (or by sqrt(d_k) twice: attention_scores "
             "must not scale)")
SOFTMAX_DIM = "softmax over the wrong dimension: normalise over the keys (the last dimension)"
MASK_INVERTED = "mask inverted: True means may attend (fill the positions where the mask is False)"
MASK_AFTER_SOFTMAX = "mask applied after the softmax: mask the scores before it, so weights still sum to 1"
MASK_IGNORED = "the mask is not applied: fill the scores with -inf where the mask is False, before the softmax"
RETURN_ORDER = "return (output, weights) in this order"
NOT_A_PAIR = "return a tuple (output, weights): the attention output and the softmax weights"

QUERY_KEY_SWAPPED = "W_query and W_key swapped: queries come from W_query, keys from W_key"
VALUE_PROJECTION = "values taken from the wrong projection: values come from W_value"
OWN_PIECES_WRONG = ("your attention_scores or softmax is wrong and scaled_dot_product_attention uses it: "
                    "fix that part first")
OWN_SDPA_WRONG = ("your scaled_dot_product_attention is wrong and SelfAttention uses it: "
                  "fix that part first")


# The contract's words (assignments/01/assignment.toml's mistakes) for the mistakes these hints
# name: a check whose value matches one of them carries those words, the rubric's evidence.
SOFTMAX_WRONG_DIM = Mistake(SOFTMAX_WRONG_DIM, 'softmax over the wrong dimension')
SOFTMAX_DIM = Mistake(SOFTMAX_DIM, 'softmax over the wrong dimension')
NO_MAX_SUBTRACTION = Mistake(NO_MAX_SUBTRACTION, 'no max subtraction (overflow to nan/inf)')
NO_SCALE = Mistake(NO_SCALE, 'scores not scaled')
SCALE_D_K = Mistake(SCALE_D_K, 'scores scaled by `d_k` instead of `sqrt(d_k)`')
MASK_INVERTED = Mistake(MASK_INVERTED, 'mask inverted (True read as "blocked")')
MASK_AFTER_SOFTMAX = Mistake(MASK_AFTER_SOFTMAX, 'mask applied after the softmax')
SCALE_BY_LENGTH = Mistake(SCALE_BY_LENGTH, 'scores scaled by `sqrt(T)`, the sequence length')
# 02's words: its CausalSelfAttention names this one through scale_mistakes, below.
SCALE_BY_INPUT_WIDTH = Mistake(SCALE_BY_INPUT_WIDTH, 'scores scaled by the input width (`C ** -0.5` with C = d_in)')
MASK_FILL_NOT_NEGATIVE = Mistake(MASK_FILL_NOT_NEGATIVE,
                                 'masked scores filled with a value that is not very negative (0, `1e-15`)')


def forbidden_softmax_hint(seen: Iterable[str]) -> str:
    # A backward kernel only follows its forward one: name the forward ones where they ran, so a
    # gradient test's hint reads as the same mistake as every other test's.
    seen = list(seen)
    named = [name for name in seen if "backward" not in name] or seen
    names = ", ".join(name.split("::", 1)[-1] for name in named)
    return (f"{FORBIDDEN_SOFTMAX} ({names} ran inside it): this part scores 0 while it calls one; "
            "write it with torch.exp, a max and a sum")


# ---- attention_scores ----------------------------------------------------------------------

def attention_scores(query: torch.Tensor, keys: torch.Tensor, *, scaled: bool = False,
                     transposed: bool = False) -> torch.Tensor:
    scores = keys @ query.transpose(-2, -1) if transposed else query @ keys.transpose(-2, -1)
    return scores / math.sqrt(query.size(-1)) if scaled else scores


def scores_mistakes(query: torch.Tensor, keys: torch.Tensor) -> dict:
    return {
        SCORES_SCALED: lambda: attention_scores(query, keys, scaled=True),
        SCORES_TRANSPOSED: lambda: attention_scores(query, keys, transposed=True),
    }


# ---- softmax -------------------------------------------------------------------------------

def softmax(x: torch.Tensor, dim: int = -1, *, subtract: str = "row_max", keepdim: bool = True,
            over: int | None = None) -> torch.Tensor:
    """``subtract``: "row_max" (stable), "none" (overflows), "global_max" (underflows);
    ``over``: reduce over this dimension instead of ``dim``; ``keepdim=False`` broadcasts the
    reduced max and sum against the wrong dimension."""
    dim = dim if over is None else over
    if subtract == "row_max":
        shift = x.amax(dim=dim, keepdim=keepdim)
        shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    elif subtract == "global_max":
        shift = x.max()
    else:
        shift = torch.zeros((), dtype=x.dtype, device=x.device)
    exp = torch.exp(x - shift)
    return exp / exp.sum(dim=dim, keepdim=keepdim)


def softmax_mistakes(x: torch.Tensor, dim: int, got: object) -> dict:
    """Hint -> output of that mistake. Any dimension but ``dim`` is the same mistake, so the
    candidate is the wrong-dimension softmax nearest to what the student returned."""
    def wrong_dim() -> torch.Tensor | None:
        others = [d for d in range(x.dim()) if d != dim % x.dim()]
        candidates = [softmax(x, dim, over=d) for d in others]
        if not candidates:
            return None
        if not (isinstance(got, torch.Tensor) and got.shape == x.shape):
            return candidates[0]
        return min(candidates, key=lambda c: _distance(got, c))

    table: dict[str, Callable[[], torch.Tensor | None]] = {
        SOFTMAX_WRONG_DIM: wrong_dim,
        NO_MAX_SUBTRACTION: lambda: softmax(x, dim, subtract="none"),
        GLOBAL_MAX: lambda: softmax(x, dim, subtract="global_max"),
    }
    if x.dim() >= 2:
        table[SOFTMAX_NO_KEEPDIM] = lambda: _or_none(lambda: softmax(x, dim, keepdim=False))
    return table


def _or_none(compute: Callable[[], torch.Tensor]) -> torch.Tensor | None:
    """The variant's value, or None where that mistake cannot even broadcast."""
    try:
        return compute()
    except RuntimeError:
        return None


def _distance(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().double().cpu() - b.double().cpu()).nan_to_num(nan=1e9, posinf=1e9, neginf=1e9).abs().max())


# ---- scaled_dot_product_attention ----------------------------------------------------------

def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    scale: str | float = "sqrt_d_k",
    softmax_dim: int = -1,
    mask_mode: str = "before_softmax",
) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, weights). ``scale``: "sqrt_d_k", "none", "d_k", "sqrt_T" (the query length),
    or the divisor itself; ``mask_mode``: "before_softmax", "inverted", "after_softmax",
    "ignored", "fill_zero" (masked scores set to 0, not -inf)."""
    d_k = q.size(-1)
    divisor = scale if isinstance(scale, float) else \
        {"sqrt_d_k": math.sqrt(d_k), "none": 1.0, "d_k": float(d_k), "sqrt_T": math.sqrt(q.size(-2))}[scale]
    scores = q @ k.transpose(-2, -1) / divisor  # (..., T_q, T_k)
    if mask is not None and mask_mode == "before_softmax":
        scores = scores.masked_fill(~mask, float("-inf"))
    elif mask is not None and mask_mode == "fill_zero":
        scores = scores.masked_fill(~mask, 0.0)
    elif mask is not None and mask_mode == "inverted":
        scores = scores.masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=softmax_dim)
    if mask is not None and mask_mode == "after_softmax":
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v, weights


def attention_mistakes(q, k, v, mask=None, *, index: int) -> dict:
    """Hint -> lazily computed ``attention(...)[index]`` (0: output, 1: weights) of that mistake."""
    def variant(**change):
        return lambda: attention(q, k, v, mask, **change)[index]

    table = {
        NO_SCALE: variant(scale="none"),
        SCALE_D_K: variant(scale="d_k"),
        **scale_mistakes(variant, length=q.size(-2)),
        SOFTMAX_DIM: variant(softmax_dim=-2),
    }
    if mask is not None:
        table[MASK_INVERTED] = variant(mask_mode="inverted")
        table[MASK_AFTER_SOFTMAX] = variant(mask_mode="after_softmax")
        table[MASK_IGNORED] = variant(mask_mode="ignored")
        table[MASK_FILL_NOT_NEGATIVE] = variant(mask_mode="fill_zero")
    return table


def scale_mistakes(variant: Callable[..., Callable], *, length: int, input_width: int | None = None) -> dict:
    """Hint -> ``variant(scale=...)`` for scores scaled by sqrt(T) and, where the part has an
    input width, by sqrt(d_in); where T equals d_in the two give one value, and one hint
    names both. ``variant`` takes ``attention``'s keyword arguments."""
    if input_width is None:
        return {SCALE_BY_LENGTH: variant(scale="sqrt_T")}
    if input_width == length:
        return {f"{SCALE_BY_INPUT_WIDTH}; or {SCALE_BY_LENGTH}": variant(scale="sqrt_T")}
    return {SCALE_BY_INPUT_WIDTH: variant(scale=math.sqrt(input_width)), SCALE_BY_LENGTH: variant(scale="sqrt_T")}


# ---- SelfAttention -------------------------------------------------------------------------

def self_attention(
    params: dict[str, torch.Tensor],
    x: torch.Tensor,
    *,
    projections: tuple[str, str, str] = ("W_query", "W_key", "W_value"),
    **attention_change,
) -> torch.Tensor:
    def linear(name: str) -> torch.Tensor:
        return F.linear(x, params[f"{name}.weight"], params.get(f"{name}.bias"))

    q, k, v = (linear(name) for name in projections)  # (B, T, d_out) each
    return attention(q, k, v, **attention_change)[0]


def self_attention_mistakes(params, x) -> dict:
    def variant(**change):
        return lambda: self_attention(params, x, **change)

    return {
        NO_SCALE: variant(scale="none"),
        SCALE_D_K: variant(scale="d_k"),
        **scale_mistakes(variant, length=x.size(-2), input_width=x.size(-1)),
        SOFTMAX_DIM: variant(softmax_dim=-2),
        QUERY_KEY_SWAPPED: variant(projections=("W_key", "W_query", "W_value")),
        VALUE_PROJECTION: variant(projections=("W_query", "W_key", "W_key")),
    }
