"""What common mistakes in assignment 02 produce, computed from the same inputs.

``causal_mask``, ``padding_mask``, ``dropout`` and ``causal_self_attention`` are
functional versions of the parts whose keyword arguments switch on one mistake each; with
the defaults they equal ``reference.masks`` (the project's tests check that; ``dropout``
given the same generator). Dropout's mistakes are random, so the suite names them with
:func:`diagnose_dropout`, which judges an output by its statistics, not element by element.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# CausalSelfAttention can make 01's attention mistakes too; their hints are re-exported here.
from grader.suite import (  # noqa: F401
    FUTURE_VISIBLE,
    MASK_FILL_NOT_NEGATIVE,
    SCALE_BY_INPUT_WIDTH,
    SCALE_BY_LENGTH,
    Mistake,
)
# CausalSelfAttention's dropout, judged as every part that owns one is (grader.suite.dropout).
from grader.suite import DROPOUT_RATE_IGNORED, DROPOUT_SAME_UNITS, DROPOUT_UNSCALED, zero_fraction_bounds  # noqa: F401
from reference.hidden.a01.variants import (  # noqa: F401
    MASK_AFTER_SOFTMAX,
    NO_SCALE,
    SCALE_D_K,
    SOFTMAX_DIM,
    attention,
    scale_mistakes,
)

CAUSAL_TRIU = ("mask is upper triangular (triu): True must be on and below the diagonal (tril), "
               "where query i may attend to keys 0..i")
CAUSAL_BLOCKED = ("mask inverted: True marks the future positions to block, but True means may attend "
                  "(on and below the diagonal)")
CAUSAL_NO_DIAGONAL = "diagonal left out: a position may attend to itself (tril keeps the diagonal)"
NOT_BOOL = "return a bool mask (dtype=torch.bool): compare, or build it with torch.ones(..., dtype=torch.bool)"

PADDING_INVERTED = "mask inverted: True must mark the real tokens (tokens != pad_idx), not the padding"
PADDING_SHAPE = ("shape must be (B, 1, 1, T), so the mask broadcasts over heads and queries: "
                 "(tokens != pad_idx)[:, None, None, :]")
PADDING_OVER_QUERIES = ("mask over the queries, (B, 1, T, 1): padding hides keys, so the mask is "
                        "(B, 1, 1, T), one entry per key")
PAD_IDX_IGNORED = "pad_idx ignored: compare the tokens with pad_idx, not with 0"

DROPOUT_NO_SCALING = ("survivors not scaled: divide the kept elements by (1 - p), so that every "
                      "element keeps its expected value")
DROPOUT_SCALED_BY_KEEP = "survivors multiplied by (1 - p) instead of divided by it: scale them by 1/(1-p)"
DROPOUT_IN_EVAL = "dropout active with training=False: at evaluation dropout returns x unchanged"
DROPOUT_P_AS_KEEP = ("p used as the probability of keeping an element: p is the probability of "
                     "zeroing it (keep where torch.rand(...) >= p)")
DROPOUT_NOTHING_DROPPED = "nothing was zeroed: with training=True each element is zeroed with probability p"
DROPOUT_P_ONE = "p == 1 divides by zero (0 / 0 = nan): return zeros when p == 1"
DROPOUT_GENERATOR_IGNORED = ("generator ignored: draw the random numbers from it, "
                             "torch.rand(x.shape, generator=generator, device=x.device)")
DROPOUT_SAME_ELEMENTS = ("the same elements are dropped on every call: draw new random numbers each time (from "
                         "torch's global generator when no generator is given), never from a fixed seed")

NO_CAUSAL_MASK = "the causal mask is not applied: position i sees later positions; mask the scores with mask[:T, :T]"
MASK_NOT_A_BUFFER = ("register the mask with self.register_buffer(\"mask\", causal_mask(context_length)): "
                     "a buffer is not trained and moves with .to(device)")
MASK_BUFFER_UNUSED = ("forward does not use the buffer mask: mask the scores with self.mask[:T, :T], so the mask "
                      "loads and moves with the module")
CSA_DROPOUT_IN_EVAL = ("dropout is active in eval mode (two calls give different outputs): "
                       "pass self.training to dropout, or use nn.Dropout")
CSA_NO_DROPOUT = "dropout=0.5 changes nothing in training mode: apply dropout to the attention weights"
CSA_DROPOUT_ON_OUTPUT = ("dropout applied to the output: it belongs on the attention weights, "
                         "dropout(weights, p, self.training) @ v")
CSA_DROPOUT_MISPLACED = ("dropout does not zero attention weights: apply it to the weights after the softmax, "
                         "dropout(weights, p, self.training) @ v")


# The contract's words (assignments/02/assignment.toml's mistakes) for the mistakes these hints
# name: a check whose value matches one of them carries those words, the rubric's evidence.
CAUSAL_TRIU = Mistake(CAUSAL_TRIU, 'a causal mask built with `triu` instead of `tril`')
CAUSAL_BLOCKED = Mistake(CAUSAL_BLOCKED, 'a causal mask inverted (True read as "blocked")')
CAUSAL_NO_DIAGONAL = Mistake(CAUSAL_NO_DIAGONAL, 'the diagonal left out of the causal mask')
DROPOUT_NO_SCALING = Mistake(DROPOUT_NO_SCALING, 'dropout without the `1/(1-p)` scaling')
DROPOUT_SCALED_BY_KEEP = Mistake(DROPOUT_SCALED_BY_KEEP, 'dropout scaled by `(1-p)`')
DROPOUT_IN_EVAL = Mistake(DROPOUT_IN_EVAL, 'dropout active at evaluation')
DROPOUT_P_AS_KEEP = Mistake(DROPOUT_P_AS_KEEP, '`p` used as the keep probability')
SCALE_BY_LENGTH = Mistake(SCALE_BY_LENGTH, 'scores scaled by `sqrt(T)`, the sequence length')
SCALE_BY_INPUT_WIDTH = Mistake(SCALE_BY_INPUT_WIDTH, 'scores scaled by the input width (`C ** -0.5` with C = d_in)')
MASK_FILL_NOT_NEGATIVE = Mistake(MASK_FILL_NOT_NEGATIVE,
                                 'masked scores filled with a value that is not very negative (0, `1e-15`)')


# ---- masks ---------------------------------------------------------------------------------

def causal_mask(T: int, device=None, *, kind: str = "tril") -> torch.Tensor:
    """``kind``: "tril" (right), "triu", "blocked" (True = future), "no_diagonal"."""
    ones = torch.ones(T, T, dtype=torch.bool, device=device)
    return {"tril": ones.tril, "triu": ones.triu, "blocked": lambda: ones.triu(1),
            "no_diagonal": lambda: ones.tril(-1)}[kind]()


def causal_mask_mistakes(T: int, device=None) -> dict:
    return {hint: causal_mask(T, device, kind=kind)
            for hint, kind in ((CAUSAL_TRIU, "triu"), (CAUSAL_BLOCKED, "blocked"), (CAUSAL_NO_DIAGONAL, "no_diagonal"))}


def padding_mask(tokens: torch.Tensor, pad_idx: int, *, inverted: bool = False, pad: int | None = None,
                 layout: str = "keys") -> torch.Tensor:
    """``pad``: compare with this instead of ``pad_idx``; ``layout``: "keys" (B, 1, 1, T),
    "queries" (B, 1, T, 1)."""
    pad = pad_idx if pad is None else pad
    real = tokens == pad if inverted else tokens != pad
    return real[:, None, None, :] if layout == "keys" else real[:, None, :, None]


def padding_mask_mistakes(tokens: torch.Tensor, pad_idx: int) -> dict:
    table = {
        PADDING_INVERTED: padding_mask(tokens, pad_idx, inverted=True),
        PADDING_OVER_QUERIES: padding_mask(tokens, pad_idx, layout="queries"),
    }
    if pad_idx != 0:
        table[PAD_IDX_IGNORED] = padding_mask(tokens, pad_idx, pad=0)
    return table


def padding_shape_hint(got: object, tokens: torch.Tensor) -> str | None:
    """A hint for a padding mask of the wrong shape that holds the right entries."""
    if not isinstance(got, torch.Tensor) or got.numel() != tokens.numel():
        return None
    batch, length = tokens.shape
    if tuple(got.shape) == (batch, 1, length, 1):
        return PADDING_OVER_QUERIES
    return PADDING_SHAPE


# ---- dropout -------------------------------------------------------------------------------

def dropout(x: torch.Tensor, p: float, training: bool = True, generator: torch.Generator | None = None, *,
            mistake: str | None = None) -> torch.Tensor:
    """``mistake``: None, "no_scaling", "scaled_by_keep", "in_eval", "p_as_keep"."""
    if not training and mistake != "in_eval" or p == 0.0:
        return x
    if p == 1.0:
        return torch.zeros_like(x)
    dtype = x.dtype if x.is_floating_point() else torch.float32
    uniform = torch.rand(x.shape, generator=generator, device=x.device, dtype=dtype)
    keep = uniform < p if mistake == "p_as_keep" else uniform >= p
    if mistake == "no_scaling":
        return x * keep
    if mistake == "scaled_by_keep":
        return x * keep * (1.0 - p)
    return x * keep / (1.0 - p)


def diagnose_dropout(x: torch.Tensor, got: torch.Tensor, p: float) -> str | None:
    """The named mistake that explains ``got = dropout(x, p)`` in training mode, judged by its
    statistics (``x`` must have no zeros), or None."""
    x64, got64 = x.detach().double().cpu().flatten(), got.detach().double().cpu().flatten()
    if got64.shape != x64.shape or not torch.isfinite(got64).all():
        return None
    zero = got64 == 0
    fraction = float(zero.float().mean())
    low, high = zero_fraction_bounds(p, x64.numel())
    keep_low, keep_high = zero_fraction_bounds(1 - p, x64.numel())
    if keep_low <= fraction <= keep_high and not low <= fraction <= high:
        return DROPOUT_P_AS_KEEP
    if fraction == 0.0 and torch.allclose(got64, x64, rtol=1e-5, atol=0):
        return DROPOUT_NOTHING_DROPPED
    if not zero.all():
        ratio = got64[~zero] / x64[~zero]
        for scale, hint in ((1.0, DROPOUT_NO_SCALING), (1.0 - p, DROPOUT_SCALED_BY_KEEP),
                            (1.0 / p, DROPOUT_P_AS_KEEP)):
            if torch.allclose(ratio, torch.full_like(ratio, scale), rtol=1e-5, atol=0):
                return hint
    return None


# ---- CausalSelfAttention -------------------------------------------------------------------

def causal_self_attention(
    params: dict[str, torch.Tensor],
    x: torch.Tensor,
    *,
    mask_kind: str = "tril",
    mask: torch.Tensor | None = None,
    mask_mode: str = "before_softmax",
    **attention_change,
) -> torch.Tensor:
    """Dropout off (p = 0 or eval mode); ``mask_mode`` as in ``a01.variants.attention``;
    ``mask``: this (T, T) mask (True = may attend) instead of a causal one of ``mask_kind``."""
    def linear(name: str) -> torch.Tensor:
        return F.linear(x, params[f"{name}.weight"], params.get(f"{name}.bias"))

    q, k, v = linear("W_query"), linear("W_key"), linear("W_value")  # (B, T, d_out) each
    mask = causal_mask(x.size(1), x.device, kind=mask_kind) if mask is None else mask
    return attention(q, k, v, mask, mask_mode=mask_mode, **attention_change)[0]


def value_vectors(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """W_value(x), (B, T, d_out): the rows an attention output is a weighted sum of."""
    return F.linear(x, params["W_value.weight"], params.get("W_value.bias"))


def causal_self_attention_mistakes(params, x) -> dict:
    def variant(**change):
        return lambda: causal_self_attention(params, x, **change)

    return {
        NO_CAUSAL_MASK: variant(mask_mode="ignored"),
        CAUSAL_TRIU: variant(mask_kind="triu"),
        CAUSAL_BLOCKED: variant(mask_kind="blocked"),
        CAUSAL_NO_DIAGONAL: variant(mask_kind="no_diagonal"),
        MASK_AFTER_SOFTMAX: variant(mask_mode="after_softmax"),
        MASK_FILL_NOT_NEGATIVE: variant(mask_mode="fill_zero"),
        NO_SCALE: variant(scale="none"),
        SCALE_D_K: variant(scale="d_k"),
        **scale_mistakes(variant, length=x.size(-2), input_width=x.size(-1)),
        SOFTMAX_DIM: variant(softmax_dim=-2),
    }
