"""What common mistakes in assignment 05 produce, computed from the same pieces.

Functional versions of the four parts whose keyword arguments switch on one mistake
each; with the defaults they equal ``reference.layers`` (tests/test_variants_0405.py
checks that), so every variant differs from the reference in exactly one way.

The layers take their sub-modules as callables: the hidden suite passes the student's
own attention and feed-forward modules (remote objects, called like functions) and
reference LayerNorms holding the same parameters. So a layer is graded on its wiring
alone, whatever its MultiHeadAttention or FeedForward does (part isolation), and the
Transformer likewise on how it combines its own embeddings and layers.
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F

from grader.suite import DROPOUT_RATE_IGNORED, DROPOUT_SAME_UNITS, DROPOUT_UNSCALED  # noqa: F401  (grader.suite.dropout)
from grader.suite import FUTURE_VISIBLE as _future_visible

# The notes that part isolation adds to these hints (tests/test_grade_05.py names them).
from grader.suite import PIECE_RAISES, Mistake  # noqa: F401
from grader.suite import describe_piece as piece  # noqa: F401
from reference.masks import causal_mask, padding_mask

# ---- FeedForward ---------------------------------------------------------------------
NO_RELU = "no ReLU between the two linear layers: linear2(dropout(relu(linear1(x))))"
RELU_ON_OUTPUT = "ReLU also applied to the output: the network ends with linear2, no activation after it"
GELU = "GELU instead of ReLU: the paper's feed-forward network uses ReLU (torch.relu)"
DROPOUT_ON_OUTPUT = "dropout applied to the output: it belongs between relu and linear2"
DROPOUT_ON_INPUT = "dropout applied to the input: it belongs between relu and linear2"
DROPOUT_MISSING = "no dropout in training mode: linear2(dropout(relu(linear1(x)))) with nn.Dropout(dropout)"
DROPOUT_MISPLACED = ("dropout does not zero the hidden values relu(linear1(x)): it belongs between relu and "
                     "linear2, linear2(dropout(relu(linear1(x))))")

# ---- EncoderLayer and DecoderLayer ---------------------------------------------------------
PRE_NORM = ("pre-norm (x + sublayer(norm(x))) instead of post-norm: as in the paper, each sublayer is "
            "x = norm(x + dropout(sublayer(x)))")
MISSING_RESIDUAL = "a residual connection is missing: each sublayer is x = norm(x + dropout(sublayer(x)))"
NORM_INSIDE_RESIDUAL = ("the norm is applied to the sublayer's output only (x + norm(sublayer(x))): "
                        "normalise the sum, x = norm(x + dropout(sublayer(x)))")
CROSS_OVER_OWN_STATES = ("cross-attention over the decoder's own states: queries come from the decoder, keys "
                         "and values from memory, cross_attn(x, memory, memory, memory_mask)")
CROSS_USES_SELF_ATTN = "cross-attention uses self_attn: call the second attention module, cross_attn"
NO_CROSS_ATTENTION = "the decoder never attends to memory: add the cross-attention sublayer after self-attention"

DROPOUT_MISSING_IN_LAYER = ("no dropout on the sublayers in training mode: each sublayer is "
                            "x = norm(x + dropout(sublayer(x))), with nn.Dropout(dropout)")
DROPOUT_MISPLACED_IN_LAYER = ("dropout does not zero each sublayer's output before the residual: "
                              "x = norm(x + dropout(sublayer(x)))")

PIECES_UNUSABLE = ("your modules cannot be combined as the contract says ({error}): each MultiHeadAttention, "
                   "FeedForward and layer must return one tensor of the contract's shape")

# ---- Transformer ---------------------------------------------------------------------------
NO_CAUSAL_MASK = ("no causal mask: tgt_mask = padding_mask(tgt_in, pad_idx) & causal_mask(T), so position t "
                  "cannot attend to later target tokens")
NO_SRC_MASK = ("the source padding mask is not used: src_mask = padding_mask(src, pad_idx) goes to the encoder "
               "layers and, as memory_mask, to the decoder layers")
NO_MEMORY_MASK = ("the decoder's memory_mask is missing: pass the source padding mask as memory_mask, so that "
                  "cross-attention ignores source padding")
NO_ENCODER_MASK = "the encoder layers get no src_mask: pass the source padding mask to each encoder layer"
NO_POSITIONS_SRC = "no positional encoding on the source: encode is encoder_layers(pos_encoding(src_embed(src)))"
NO_POSITIONS_TGT = "no positional encoding on the target: decode starts with pos_encoding(tgt_embed(tgt_in))"
NO_GENERATOR = "forward must return logits (B, T, tgt_vocab_size): apply generator to the decoder states"
DECODE_RETURNS_LOGITS = "decode must return the decoder states (B, T, d_model); forward applies the generator"
WIRING = ("forward combines your modules differently from the contract: src_embed -> pos_encoding -> "
          "encoder_layers (src padding mask) gives memory; tgt_embed -> pos_encoding -> decoder_layers "
          "(tgt padding & causal mask, memory_mask = src padding mask) -> generator")


Attention = Callable[..., torch.Tensor]  # (query, key, value, mask) -> (B, T_q, d_model)
Module = Callable[[torch.Tensor], torch.Tensor]


# The contract's words (assignments/05/assignment.toml's mistakes) for the mistakes these hints
# name: a check whose value matches one of them carries those words, the rubric's evidence.
PRE_NORM = Mistake(PRE_NORM, 'pre-norm instead of post-norm')
MISSING_RESIDUAL = Mistake(MISSING_RESIDUAL, 'a missing residual')
CROSS_OVER_OWN_STATES = Mistake(CROSS_OVER_OWN_STATES, "cross-attention over the decoder's own states")


def feed_forward(
    x: torch.Tensor,
    params: dict[str, torch.Tensor],
    *,
    activation: str = "relu",
    relu_on_output: bool = False,
) -> torch.Tensor:
    """linear2(relu(linear1(x))) from ``params`` (names as in FeedForward), no dropout."""
    hidden = F.linear(x, params["linear1.weight"], params["linear1.bias"])  # (B, T, d_ff)
    hidden = {"relu": torch.relu, "gelu": F.gelu, "none": lambda h: h}[activation](hidden)
    out = F.linear(hidden, params["linear2.weight"], params["linear2.bias"])  # (B, T, d_model)
    return torch.relu(out) if relu_on_output else out


def feed_forward_mistakes(x: torch.Tensor, params: dict[str, torch.Tensor]) -> dict:
    return {
        NO_RELU: lambda: feed_forward(x, params, activation="none"),
        GELU: lambda: feed_forward(x, params, activation="gelu"),
        RELU_ON_OUTPUT: lambda: feed_forward(x, params, relu_on_output=True),
    }


def sublayer(x: torch.Tensor, function: Module, norm: Module, mode: str = "post") -> torch.Tensor:
    """One residual sublayer: "post" norm(x + f(x)) (the paper), "pre" x + f(norm(x)),
    "no_residual" norm(f(x)), "norm_inside" x + norm(f(x))."""
    if mode == "post":
        return norm(x + function(x))
    if mode == "pre":
        return x + function(norm(x))
    if mode == "no_residual":
        return norm(function(x))
    if mode == "norm_inside":
        return x + norm(function(x))
    raise ValueError(f"unknown sublayer mode {mode!r}")


def encoder_layer(
    x: torch.Tensor,
    src_mask: torch.Tensor | None,
    *,
    self_attn: Attention,
    ffn: Module,
    norm1: Module,
    norm2: Module,
    modes: tuple[str, str] = ("post", "post"),
) -> torch.Tensor:
    x = sublayer(x, lambda h: self_attn(h, h, h, src_mask), norm1, modes[0])  # (B, S, d_model)
    return sublayer(x, ffn, norm2, modes[1])  # (B, S, d_model)


def decoder_layer(
    x: torch.Tensor,
    memory: torch.Tensor,
    tgt_mask: torch.Tensor | None,
    memory_mask: torch.Tensor | None,
    *,
    self_attn: Attention,
    cross_attn: Attention,
    ffn: Module,
    norm1: Module,
    norm2: Module,
    norm3: Module,
    modes: tuple[str, str, str] = ("post", "post", "post"),
    cross_source: str = "memory",
    cross_module: str = "cross_attn",
) -> torch.Tensor:
    """``cross_source``: "memory" (the paper), "self" (keys and values from the decoder's own
    states) or "none" (no cross-attention sublayer); ``cross_module``: which attention module
    the cross-attention sublayer calls."""
    attend = cross_attn if cross_module == "cross_attn" else self_attn
    x = sublayer(x, lambda h: self_attn(h, h, h, tgt_mask), norm1, modes[0])  # (B, T, d_model)
    if cross_source == "memory":
        x = sublayer(x, lambda h: attend(h, memory, memory, memory_mask), norm2, modes[1])
    elif cross_source == "self":
        x = sublayer(x, lambda h: attend(h, h, h, memory_mask), norm2, modes[1])
    return sublayer(x, ffn, norm3, modes[2])  # (B, T, d_model)


def encoder_mistakes(x: torch.Tensor, src_mask: torch.Tensor | None, modules: dict) -> dict:
    """Hint -> lazily computed output of that mistake, for ``grader.suite.checks.expect_close``."""
    def variant(*modes):
        return lambda: encoder_layer(x, src_mask, **modules, modes=modes)

    return {
        PRE_NORM: variant("pre", "pre"),
        f"{MISSING_RESIDUAL} (around the self-attention)": variant("no_residual", "post"),
        f"{MISSING_RESIDUAL} (around the feed-forward network)": variant("post", "no_residual"),
        f"{MISSING_RESIDUAL} (around both sublayers)": variant("no_residual", "no_residual"),
        NORM_INSIDE_RESIDUAL: variant("norm_inside", "norm_inside"),
    }


def decoder_mistakes(x, memory, tgt_mask, memory_mask, modules: dict) -> dict:
    def variant(**change):
        return lambda: decoder_layer(x, memory, tgt_mask, memory_mask, **modules, **change)

    table = {
        PRE_NORM: variant(modes=("pre", "pre", "pre")),
        f"{MISSING_RESIDUAL} (around the self-attention)": variant(modes=("no_residual", "post", "post")),
        f"{MISSING_RESIDUAL} (around the cross-attention)": variant(modes=("post", "no_residual", "post")),
        f"{MISSING_RESIDUAL} (around the feed-forward network)": variant(modes=("post", "post", "no_residual")),
        NORM_INSIDE_RESIDUAL: variant(modes=("norm_inside",) * 3),
        CROSS_USES_SELF_ATTN: variant(cross_module="self_attn"),
        NO_CROSS_ATTENTION: variant(cross_source="none"),
    }
    if memory_mask is None or x.size(1) == memory.size(1):  # else that mistake raises in the student's code
        table[CROSS_OVER_OWN_STATES] = variant(cross_source="self")
    return table


def transformer(
    src: torch.Tensor,
    tgt_in: torch.Tensor,
    pad_idx: int,
    modules: dict,
    *,
    causal: bool = True,
    encoder_mask: bool = True,
    memory_mask: bool = True,
    positions_src: bool = True,
    positions_tgt: bool = True,
) -> torch.Tensor:
    """Transformer.forward from ``modules``: src_embed, tgt_embed, pos_encoding (callables),
    encoder_layers, decoder_layers (lists of callables) and generator."""
    src_mask = padding_mask(src, pad_idx)  # (B, 1, 1, S)
    tgt_mask = padding_mask(tgt_in, pad_idx)  # (B, 1, 1, T)
    if causal:
        tgt_mask = tgt_mask & causal_mask(tgt_in.size(1), device=tgt_in.device)  # (B, 1, T, T)
    memory = encode(src, src_mask if encoder_mask else None, modules, positions=positions_src)
    states = decode(tgt_in, memory, tgt_mask, src_mask if memory_mask else None, modules, positions=positions_tgt)
    return modules["generator"](states)  # (B, T, tgt_vocab_size)


def encode(src, src_mask, modules: dict, *, positions: bool = True) -> torch.Tensor:
    x = modules["src_embed"](src)  # (B, S, d_model)
    if positions:
        x = modules["pos_encoding"](x)
    for layer in modules["encoder_layers"]:
        x = layer(x, src_mask)
    return x


def decode(tgt_in, memory, tgt_mask, memory_mask, modules: dict, *, positions: bool = True) -> torch.Tensor:
    x = modules["tgt_embed"](tgt_in)  # (B, T, d_model)
    if positions:
        x = modules["pos_encoding"](x)
    for layer in modules["decoder_layers"]:
        x = layer(x, memory, tgt_mask, memory_mask)
    return x


def transformer_mistakes(src, tgt_in, pad_idx: int, modules: dict) -> dict:
    def variant(**change):
        return lambda: transformer(src, tgt_in, pad_idx, modules, **change)

    return {
        NO_CAUSAL_MASK: variant(causal=False),
        NO_SRC_MASK: variant(encoder_mask=False, memory_mask=False),
        NO_MEMORY_MASK: variant(memory_mask=False),
        NO_ENCODER_MASK: variant(encoder_mask=False),
        NO_POSITIONS_SRC: variant(positions_src=False),
        NO_POSITIONS_TGT: variant(positions_tgt=False),
        f"{NO_CAUSAL_MASK}; also {NO_SRC_MASK}": variant(causal=False, encoder_mask=False, memory_mask=False),
    }

# The causal probe's hint for the Transformer: the decoder's causal mask is forward's to build.
FUTURE_VISIBLE_IN_DECODER = f"{_future_visible}; Transformer.forward builds it and passes it to decode as tgt_mask"
