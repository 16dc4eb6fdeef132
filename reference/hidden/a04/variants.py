"""What common mistakes in assignment 04 produce.

``sinusoidal_encoding``, ``positional_encoding`` and ``token_embedding`` are functional
versions of the three parts whose keyword arguments switch on one mistake each; with the
defaults they equal ``reference.positions`` (tests/test_variants_0405.py checks that),
so every variant differs from the reference in exactly one way.
"""

import math

import torch
import torch.nn.functional as F

from grader.suite import DROPOUT_RATE_IGNORED, DROPOUT_SAME_UNITS, Mistake  # noqa: F401  (PositionalEncoding's dropout)

CONCATENATED = ("sin and cos concatenated ([sin..., cos...]) instead of interleaved: "
                "sin goes to the even features PE[:, 0::2], cos to the odd ones PE[:, 1::2]")
SWAPPED = "sin and cos swapped: sin goes to the even features (2i), cos to the odd ones (2i+1)"
EXPONENT_I = ("exponent i/d_model instead of 2i/d_model: i counts the sin/cos pairs, so the "
              "exponents are 0, 2, 4, ... divided by d_model (e.g. torch.arange(0, d_model, 2))")
EXPONENT_COLUMN = ("each feature uses its own index as the exponent: features 2i and 2i+1 share one "
                   "frequency, 1 / 10000^(2i/d_model)")
NO_BATCH_DIMENSION = "return the table as (max_len, d_model), without a leading batch dimension"
NOT_FLOAT32 = "return a float32 table: compute in float64 if you like, then call .float()"

PE_PARAMETER = ("pe is an nn.Parameter: register it with self.register_buffer('pe', ...) so that it "
                "is never trained but still moves with .to(device)")
PE_NOT_REGISTERED = ("pe is not a registered buffer: use self.register_buffer('pe', table) so that it "
                     "moves with .to(device) and is saved in the state dict")
PE_SHAPE = "store pe as (max_len, d_model) and add pe[:T]; add the batch dimension by broadcasting"
PE_BUFFER_UNUSED = ("forward does not add the buffer pe: return x + self.pe[:T], so the table loads and moves "
                    "with the module")
PE_DTYPE = "the output must have x's dtype (float32): add pe[:T].to(x.dtype), or keep pe in float32"
PE_TABLE_DIFFERS = ("pe does not hold sinusoidal_encoding(max_len, d_model): build the buffer with "
                    "your sinusoidal_encoding")
PE_SCALES_INPUT = ("PositionalEncoding scales x by sqrt(d_model): that belongs in TokenEmbedding; "
                   "PositionalEncoding only adds pe[:T]")
PE_NOT_ADDED = "the positional table is not added: return dropout(x + pe[:T])"
DROPOUT_ON_PE_ONLY = "dropout applied to pe only: apply it to the sum, dropout(x + pe[:T])"
DROPOUT_MISSING = "no dropout in training mode: apply nn.Dropout(dropout) to x + pe[:T]"
DROPOUT_UNSCALED = "dropout survivors are not scaled by 1/(1-p): use nn.Dropout, which does"
DROPOUT_IN_EVAL = "dropout is still active in eval mode: use nn.Dropout (it follows module.eval())"
DROPOUT_MISPLACED = "dropout does not zero values of x + pe[:T]: return dropout(x + pe[:T]) with nn.Dropout(dropout)"

EMBEDDING_NOT_SCALED = "the embeddings are not scaled: return embedding(tokens) * sqrt(d_model)"
EMBEDDING_SCALED_BY_D_MODEL = "the embeddings are scaled by d_model instead of sqrt(d_model)"
EMBEDDING_DIVIDED = "the embeddings are divided by sqrt(d_model): multiply instead"
NO_PADDING_IDX = ("padding_idx is not passed on: nn.Embedding(vocab_size, d_model, padding_idx=padding_idx) "
                  "keeps the padding row at zero and its gradient at zero")


# The contract's words (assignments/04/assignment.toml's mistakes) for the mistakes these hints
# name: a check whose value matches one of them carries those words, the rubric's evidence.
CONCATENATED = Mistake(CONCATENATED, 'sin and cos concatenated instead of interleaved')
SWAPPED = Mistake(SWAPPED, 'sin and cos swapped')
EXPONENT_I = Mistake(EXPONENT_I, 'exponent `i/d_model` instead of `2i/d_model`')


def sinusoidal_encoding(
    max_len: int,
    d_model: int,
    *,
    layout: str = "interleaved",
    swap: bool = False,
    exponent: str = "2i",
) -> torch.Tensor:
    """The table in float64, returned as float32 like the reference.

    layout: "interleaved" (sin at 2i, cos at 2i+1) or "concatenated" ([sin | cos]);
    swap: cos where sin belongs and sin where cos belongs;
    exponent: "2i" (the paper), "i" (pair index instead of 2i), or "column" (each feature
    its own index j, so odd features use 2i+1).
    """
    position = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    pair = torch.arange(d_model // 2, dtype=torch.float64)  # i = 0 .. d_model/2 - 1
    even = {"2i": 2 * pair, "i": pair, "column": 2 * pair}[exponent]
    odd = {"2i": 2 * pair, "i": pair, "column": 2 * pair + 1}[exponent]
    sin_part = torch.sin(position / 10000.0 ** (even / d_model))  # (max_len, d_model/2)
    cos_part = torch.cos(position / 10000.0 ** (odd / d_model))  # (max_len, d_model/2)
    first, second = (cos_part, sin_part) if swap else (sin_part, cos_part)
    if layout == "concatenated":
        table = torch.cat([first, second], dim=1)
    else:
        table = torch.stack([first, second], dim=2).reshape(max_len, d_model)
    return table.float()  # (max_len, d_model)


def encoding_mistakes(max_len: int, d_model: int) -> dict:
    """Hint -> lazily computed table of that mistake, for ``grader.suite.checks.expect_close``."""
    def variant(**change):
        return lambda: sinusoidal_encoding(max_len, d_model, **change)

    return {
        CONCATENATED: variant(layout="concatenated"),
        SWAPPED: variant(swap=True),
        EXPONENT_I: variant(exponent="i"),
        EXPONENT_COLUMN: variant(exponent="column"),
        f"{CONCATENATED}; also {SWAPPED}": variant(layout="concatenated", swap=True),
    }


def positional_encoding(
    x: torch.Tensor,
    pe: torch.Tensor,
    *,
    scale_input: bool = False,
    add: bool = True,
) -> torch.Tensor:
    """``x + pe[:T]`` without dropout; ``pe`` is the (max_len, d_model) table."""
    T, d_model = x.size(1), x.size(2)
    if scale_input:
        x = x * math.sqrt(d_model)
    return x + pe[:T].to(x.dtype) if add else x  # (B, T, d_model)


def positional_encoding_mistakes(x: torch.Tensor, pe: torch.Tensor) -> dict:
    return {
        PE_SCALES_INPUT: lambda: positional_encoding(x, pe, scale_input=True),
        PE_NOT_ADDED: lambda: positional_encoding(x, pe, add=False),
    }


def token_embedding(tokens: torch.Tensor, weight: torch.Tensor, *, scale: str = "sqrt_d_model") -> torch.Tensor:
    d_model = weight.size(1)
    factor = {"sqrt_d_model": math.sqrt(d_model), "none": 1.0, "d_model": float(d_model),
              "inverse_sqrt_d_model": 1 / math.sqrt(d_model)}[scale]
    return F.embedding(tokens, weight) * factor  # (B, T, d_model)


def embedding_mistakes(tokens: torch.Tensor, weight: torch.Tensor) -> dict:
    def variant(scale):
        return lambda: token_embedding(tokens, weight, scale=scale)

    return {
        EMBEDDING_NOT_SCALED: variant("none"),
        EMBEDDING_SCALED_BY_D_MODEL: variant("d_model"),
        EMBEDDING_DIVIDED: variant("inverse_sqrt_d_model"),
    }
