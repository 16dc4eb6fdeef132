"""A class of assignment 03 for the similarity tests, written by hand: four students who each
wrote their own solution, and the copies as students make them.

- ben copied ada whole: every name renamed, the class moved first and the functions swapped,
  lines broken and joined, comments, docstrings and prints added;
- dan wrote his own split_heads and combine_heads and copied cal's class, renamed;
- fay took the tutorial's attention and class (TUTORIAL, given with --against) and adapted
  them to the contract;
- gus handed in the stub module untouched, hal the stub notebook untouched;
- ivy's own solution is a notebook.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tests.conftest import ASSIGNMENT_03

ADA = '''import math

import torch
from torch import nn


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    batch, length, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    head_dim = d_model // num_heads
    x = x.view(batch, length, num_heads, head_dim)
    return x.transpose(1, 2)


def combine_heads(x: torch.Tensor) -> torch.Tensor:
    batch, heads, length, head_dim = x.shape
    x = x.transpose(1, 2).contiguous()
    return x.view(batch, length, heads * head_dim)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model must be divisible by num_heads")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.W_q(query), self.num_heads)
        k = split_heads(self.W_k(key), self.num_heads)
        v = split_heads(self.W_v(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        weights = self.dropout(weights)
        context = weights @ v
        return self.W_o(combine_heads(context))
'''

BEN = '''import math
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    """My multi-head attention."""

    def __init__(self, model_dim, n_heads, dropout=0.0, bias=True):
        super().__init__()
        # check the sizes first
        if model_dim % n_heads != 0:
            raise ValueError('model_dim has to be a multiple of n_heads')
        self.n_heads = n_heads
        self.per_head = model_dim // n_heads
        self.W_q = nn.Linear(model_dim, model_dim, bias=bias)
        self.W_k = nn.Linear(model_dim, model_dim, bias=bias)
        self.W_v = nn.Linear(model_dim, model_dim, bias=bias)
        self.W_o = nn.Linear(model_dim, model_dim, bias=bias)
        self.dropout = nn.Dropout(dropout)
        print("built attention with", n_heads, "heads")

    def forward(self, query, key, value, mask=None):
        # project and split
        queries = split_heads(self.W_q(query), self.n_heads)
        keys = split_heads(self.W_k(key), self.n_heads)
        values = split_heads(self.W_v(value), self.n_heads)
        print(queries.shape)
        att = queries @ keys.transpose(-2, -1) / math.sqrt(
            self.per_head
        )
        if mask is not None:
            att = att.masked_fill(~mask, float('-inf'))  # hide what may not be attended
        probs = torch.softmax(att, dim=-1); probs = self.dropout(probs)
        ctx = probs @ values
        return self.W_o(combine_heads(ctx))


def combine_heads(t):
    """Undo split_heads."""
    n, h, s, e = t.shape
    t = t.transpose(1, 2).contiguous()
    return t.view(n, s, h * e)


def split_heads(t, n_heads):
    n, s, dm = t.shape
    if dm % n_heads != 0:
        raise ValueError(f"can't split {dm} into {n_heads}")
    e = dm // n_heads
    t = t.view(n, s, n_heads, e)
    return t.transpose(1, 2)
'''

CAL = '''import math
import torch
import torch.nn as nn
import torch.nn.functional as F


def split_heads(x, num_heads):
    """(B, T, D) -> (B, H, T, D/H)."""
    B, T, D = x.size()
    if D % num_heads:
        raise ValueError("cannot split %d features into %d heads" % (D, num_heads))
    return x.reshape(B, T, num_heads, -1).permute(0, 2, 1, 3)


def combine_heads(x):
    B, H, T, dk = x.size()
    return x.permute(0, 2, 1, 3).reshape(B, T, H * dk)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with four projections."""

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super(MultiHeadAttention, self).__init__()
        if d_model % num_heads:
            raise ValueError("num_heads must divide d_model")
        self.h = num_heads
        self.d_k = d_model // num_heads
        self.scale = 1.0 / math.sqrt(self.d_k)
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))
        self.p = dropout

    def attend(self, q, k, v, mask):
        logits = torch.einsum("bhqd,bhkd->bhqk", q, k) * self.scale
        if mask is not None:
            logits = torch.where(mask, logits, torch.finfo(logits.dtype).min)
        probs = F.softmax(logits, dim=-1)
        probs = F.dropout(probs, p=self.p, training=self.training)
        return torch.einsum("bhqk,bhkd->bhqd", probs, v)

    def forward(self, query, key, value, mask=None):
        heads = [split_heads(proj(t), self.h) for proj, t in zip((self.W_q, self.W_k, self.W_v), (query, key, value))]
        out = self.attend(*heads, mask)
        return self.W_o(combine_heads(out))
'''

DAN = '''import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def split_heads(inp, heads):
    size = inp.shape
    if size[2] % heads != 0:
        raise ValueError("heads must divide the model size")
    out = inp.reshape(size[0], size[1], heads, size[2] // heads)
    return out.transpose(1, 2).contiguous()


def combine_heads(inp):
    return inp.transpose(1, 2).flatten(start_dim=2)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super(MultiHeadAttention, self).__init__()
        if d_model % num_heads:
            raise ValueError("num_heads must divide d_model")
        self.heads = num_heads
        self.dk = d_model // num_heads
        self.factor = 1.0 / math.sqrt(self.dk)
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))
        self.rate = dropout

    def attend(self, qs, ks, vs, m):
        energy = torch.einsum("bhqd,bhkd->bhqk", qs, ks) * self.factor
        if m is not None:
            energy = torch.where(m, energy, torch.finfo(energy.dtype).min)
        attn = F.softmax(energy, dim=-1)
        attn = F.dropout(attn, p=self.rate, training=self.training)
        return torch.einsum("bhqk,bhkd->bhqd", attn, vs)

    def forward(self, query, key, value, mask=None):
        projected = [split_heads(layer(inp), self.heads)
                     for layer, inp in zip((self.W_q, self.W_k, self.W_v), (query, key, value))]
        result = self.attend(*projected, mask)
        return self.W_o(combine_heads(result))
'''

EVE = '''import math

import torch
from torch import nn


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    d = x.shape[-1]
    if d % num_heads != 0:
        raise ValueError(f"{d} features do not split into {num_heads} heads")
    # one chunk of features per head, stacked on a new head axis
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)


def combine_heads(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x[:, h] for h in range(x.shape[1])], dim=-1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model}, num_heads={num_heads}")
        self.n_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.drop = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        Q = split_heads(self.W_q(query), self.n_heads)
        K = split_heads(self.W_k(key), self.n_heads)
        V = split_heads(self.W_v(value), self.n_heads)
        d_k = Q.size(-1)
        att = torch.matmul(Q, K.transpose(2, 3)) / d_k ** 0.5
        if mask is not None:
            att = att.masked_fill(mask == 0, -1e9)
        att = self.drop(att.softmax(dim=-1))
        return self.W_o(combine_heads(torch.matmul(att, V)))
'''

IVY_CELLS = [
    "import math\nimport torch\nfrom torch import nn",
    "from grader import check",
    '''def split_heads(x, num_heads):
    if x.size(-1) % num_heads:
        raise ValueError("bad number of heads")
    return x.unflatten(-1, (num_heads, x.size(-1) // num_heads)).transpose(-3, -2)''',
    'check("split_heads")',
    '''def combine_heads(x):
    return x.transpose(-3, -2).flatten(-2)''',
    '''class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError("d_model % num_heads != 0")
        self.num_heads = num_heads
        for name in ("W_q", "W_k", "W_v", "W_o"):
            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        projected = [split_heads(layer(x), self.num_heads) for layer, x in
                     ((self.W_q, query), (self.W_k, key), (self.W_v, value))]
        q, k, v = projected
        scores = (q / math.sqrt(q.shape[-1])) @ k.mT
        if mask is not None:
            scores = scores.masked_fill(mask.logical_not(), -math.inf)
        return self.W_o(combine_heads(self.dropout(scores.softmax(-1)) @ v))''',
    'check("MultiHeadAttention")',
]

# A tutorial as instructors find them online (after the Annotated Transformer): more than the
# assignment asks, written for its own interface.
TUTORIAL = '''"""Multi-head attention, step by step."""
import copy
import math

import torch
import torch.nn as nn


def clones(module, N):
    "Produce N identical layers."
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


def attention(query, key, value, mask=None, dropout=None):
    "Compute 'Scaled Dot Product Attention'"
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout=0.1):
        "Take in model size and number of heads."
        super(MultiHeadedAttention, self).__init__()
        assert d_model % h == 0
        # We assume d_v always equals d_k
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            # Same mask applied to all h heads.
            mask = mask.unsqueeze(1)
        nbatches = query.size(0)

        # 1) Do all the linear projections in batch from d_model => h x d_k
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]

        # 2) Apply attention on all the projected vectors in batch.
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)

        # 3) "Concat" using a view and apply a final linear.
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        del query
        del key
        del value
        return self.linears[-1](x)


class PositionwiseFeedForward(nn.Module):
    "Implements FFN equation."

    def __init__(self, d_model, d_ff, dropout=0.1):
        super(PositionwiseFeedForward, self).__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(self.w_1(x).relu()))
'''

FAY = '''import math

import torch
from torch import nn


def split_heads(x, num_heads):
    n, t, d = x.shape
    if d % num_heads:
        raise ValueError("d_model is not divisible by num_heads")
    return x.view(n, t, num_heads, d // num_heads).transpose(1, 2)


def combine_heads(x):
    n, h, t, dk = x.shape
    return x.transpose(1, 2).contiguous().view(n, t, h * dk)


def scaled_attention(q, k, v, mask=None, drop=None):
    dk = q.size(-1)
    s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(dk)
    if mask is not None:
        s = s.masked_fill(mask == 0, -1e9)
    p = s.softmax(dim=-1)
    if drop is not None:
        p = drop(p)
    return torch.matmul(p, v), p


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super(MultiHeadAttention, self).__init__()
        if d_model % num_heads:
            raise ValueError("d_model is not divisible by num_heads")
        self.dk = d_model // num_heads
        self.heads = num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.weights = None
        self.drop = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        batches = query.size(0)
        query, key, value = [
            layer(inp).view(batches, -1, self.heads, self.dk).transpose(1, 2)
            for layer, inp in zip((self.W_q, self.W_k, self.W_v), (query, key, value))
        ]
        out, self.weights = scaled_attention(query, key, value, mask=mask, drop=self.drop)
        out = out.transpose(1, 2).contiguous().view(batches, -1, self.heads * self.dk)
        return self.W_o(out)
'''

HONEST = ("ada", "cal", "eve", "ivy")  # each wrote their own
COPIES = {frozenset(("ada", "ben")), frozenset(("cal", "dan"))}
TUTORIAL_NAME = "annotated/attention.py"


def notebook(cells: list[str]) -> str:
    return nbformat.writes(new_notebook(cells=[new_markdown_cell("# Assignment 03")]
                                         + [new_code_cell(cell) for cell in cells]))


def write_class(folder: Path) -> tuple[Path, Path]:
    """The class in ``folder/submissions`` (a folder per student) and the tutorial in
    ``folder/known``; returns the two folders."""
    submissions, known = folder / "submissions", folder / "known"
    files = {"ada/mha.py": ADA, "ben/mha.py": BEN, "cal/mha.py": CAL, "dan/mha.py": DAN, "eve/mha.py": EVE,
             "fay/mha.py": FAY, "gus/mha.py": (ASSIGNMENT_03 / "mha.py").read_text(encoding="utf-8"),
             "hal/mha.ipynb": (ASSIGNMENT_03 / "mha.ipynb").read_text(encoding="utf-8"),
             "ivy/mha.ipynb": notebook(IVY_CELLS)}
    for name, text in files.items():
        (submissions / name).parent.mkdir(parents=True, exist_ok=True)
        (submissions / name).write_text(text, encoding="utf-8")
    (known / TUTORIAL_NAME).parent.mkdir(parents=True)
    (known / TUTORIAL_NAME).write_text(TUTORIAL, encoding="utf-8")
    return submissions, known
