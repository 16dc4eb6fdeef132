"""Benchmark: `grade similarity` on a generated class of assignment 03, and the similarities
of its honest and its copied pairs (what the default threshold rests on).

    python benchmarks/similarity_500.py [--count 500] [--seed 0] [--keep DIR]

Each honest student writes their own solution: for every part one of several ways to do it
(view or reshape, transpose or permute, chunks and stack, einsum or matmul, masked_fill or
where, ...), each with its own small choices (intermediate variables, checks, order of the
statements), names and layout (comments, blank lines, type hints, docstrings, prints), some as
notebooks. The copiers (about one in ten) take a classmate's file, or the tutorial's class
(given with --against), and disguise it: every name renamed, functions reordered, comments and
prints added, lines joined and split; some copy only the class. Prints the time of the whole
command and, for each kind of pair, the similarity's range.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from grader.similarity.report import DEFAULT_THRESHOLD

ROOT = Path(__file__).resolve().parent.parent

HEADER = ["import math", "import torch", "from torch import nn"]
F_IMPORT = "import torch.nn.functional as F"

NAMES = {
    "x": ["x", "inp", "tensor", "t_in", "hidden", "inputs", "z"],
    "b": ["b", "B", "batch", "bs", "n_batch", "batch_size"],
    "t": ["t", "T", "seq", "seq_len", "length", "n_tok", "L"],
    "d": ["d", "D", "dim", "d_model", "emb", "features", "C"],
    "h": ["h", "H", "heads", "num_heads", "n_heads", "nh"],
    "dk": ["dk", "d_k", "head_dim", "hd", "d_head", "per_head"],
    "q": ["q", "Q", "queries", "qs", "q_proj", "qh"],
    "k": ["k", "K", "keys", "ks", "k_proj", "kh"],
    "v": ["v", "V", "values", "vs", "v_proj", "vh"],
    "s": ["scores", "att", "logits", "energy", "sim", "w", "attn_logits"],
    "p": ["weights", "probs", "attn", "alpha", "p_attn", "a"],
    "o": ["out", "ctx", "context", "y", "res", "merged"],
}
COMMENTS = ["# reshape to heads", "# TODO: double check", "# project", "# (B, H, T, d_k)", "# mask out",
            "# softmax over keys", "# merge heads back", "# scale by sqrt(d_k)", "# sanity check", "# done"]


class Style:
    """One honest student's habits: names, layout, and the small choices in each part."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.names = {role: rng.choice(options) for role, options in NAMES.items()}
        self.hints = rng.random() < 0.6
        self.comments = rng.random() * 0.4
        self.functional = rng.random() < 0.5

    def __getitem__(self, role: str) -> str:
        return self.names[role]

    def pick(self, *options):
        return self.rng.choice(options)

    def maybe(self, p: float = 0.5) -> bool:
        return self.rng.random() < p


def _check(s: Style, dim: str, heads: str, indent: str) -> list[str]:
    condition = s.pick(f"{dim} % {heads} != 0", f"{dim} % {heads}", f"not {dim} % {heads} == 0")
    message = s.pick(f'f"{{{dim}}} not divisible by {{{heads}}}"', '"d_model must be divisible by num_heads"',
                     '"bad num_heads"')
    return [f"{indent}if {condition}:", f"{indent}    raise ValueError({message})"]


def split_heads(s: Style) -> list[str]:
    x, b, t, d, h, dk = s["x"], s["b"], s["t"], s["d"], s["h"], s["dk"]
    sig = (f"def split_heads({x}: torch.Tensor, {h}: int) -> torch.Tensor:" if s.hints
           else f"def split_heads({x}, {h}):")
    body = []
    way = s.pick("view", "reshape", "chunk", "unflatten", "size")
    if way in ("view", "reshape"):
        body.append(s.pick(f"{b}, {t}, {d} = {x}.shape", f"{b}, {t}, {d} = {x}.size()"))
        body += _check(s, d, h, "")
        if s.maybe():
            body.append(f"{dk} = {d} // {h}")
            shape = f"{b}, {t}, {h}, {dk}"
        else:
            shape = s.pick(f"{b}, {t}, {h}, {d} // {h}", f"{b}, {t}, {h}, -1")
        swap = s.pick(".transpose(1, 2)", ".permute(0, 2, 1, 3)", ".transpose(-3, -2)")
        if s.maybe():
            body.append(f"{x} = {x}.{way}({shape})")
            body.append(f"return {x}{swap}")
        else:
            body.append(f"return {x}.{way}({shape}){swap}")
    elif way == "chunk":
        body += _check(s, f"{x}.shape[-1]", h, "")
        parts = s.pick("pieces", "chunks", "parts")
        body.append(f"{parts} = {x}.chunk({h}, dim=-1)" if s.maybe() else f"{parts} = torch.chunk({x}, {h}, dim=2)")
        body.append(f"return torch.stack({parts}, dim=1)")
    elif way == "unflatten":
        body += _check(s, f"{x}.size(-1)", h, "")
        body.append(s.pick(f"return {x}.unflatten(-1, ({h}, -1)).transpose(1, 2)",
                           f"return {x}.unflatten(2, ({h}, {x}.size(-1) // {h})).permute(0, 2, 1, 3)"))
    else:
        body.append(f"{b} = {x}.size(0)")
        body.append(f"{t} = {x}.size(1)")
        body += _check(s, f"{x}.size(2)", h, "")
        body.append(f"{dk} = {x}.size(2) // {h}")
        body.append(f"{x} = {x}.reshape({b}, {t}, {h}, {dk})")
        body.append(f"{x} = {x}.permute(0, 2, 1, 3)")
        body.append(s.pick(f"return {x}.contiguous()", f"return {x}"))
    return [sig, *("    " + line for line in body)]


def combine_heads(s: Style) -> list[str]:
    x, b, t, h, dk = s["x"], s["b"], s["t"], s["h"], s["dk"]
    sig = f"def combine_heads({x}: torch.Tensor) -> torch.Tensor:" if s.hints else f"def combine_heads({x}):"
    way = s.pick("view", "reshape", "cat", "flatten", "loop")
    if way in ("view", "reshape"):
        body = [s.pick(f"{b}, {h}, {t}, {dk} = {x}.shape", f"{b}, {h}, {t}, {dk} = {x}.size()")]
        swap = s.pick(".transpose(1, 2)", ".permute(0, 2, 1, 3)")
        tail = s.pick(f"{b}, {t}, {h} * {dk}", f"{b}, {t}, -1")
        cont = ".contiguous()" if way == "view" else s.pick("", ".contiguous()")
        if s.maybe():
            body += [f"{x} = {x}{swap}{cont}", f"return {x}.{way}({tail})"]
        else:
            body += [f"return {x}{swap}{cont}.{way}({tail})"]
    elif way == "cat":
        body = [s.pick(f"return torch.cat({x}.unbind(dim=1), dim=-1)",
                       f"return torch.cat(torch.unbind({x}, 1), dim=2)")]
    elif way == "flatten":
        body = [s.pick(f"return {x}.transpose(1, 2).flatten(2)",
                       f"return {x}.permute(0, 2, 1, 3).flatten(start_dim=-2)",
                       f"return torch.flatten({x}.transpose(1, 2), 2)")]
    else:
        i = s.pick("i", "j", "head")
        body = ["outs = []", f"for {i} in range({x}.shape[1]):", f"    outs.append({x}[:, {i}])",
                s.pick("return torch.cat(outs, dim=-1)", "return torch.cat(outs, -1)")]
    return [sig, *("    " + line for line in body)]


def _projections(s: Style, d: str) -> list[str]:
    names = ["W_q", "W_k", "W_v", "W_o"]
    if s.maybe(0.3):
        s.rng.shuffle(names)
    bias = s.pick("bias=bias", "bias")
    return [f"self.{name} = nn.Linear({d}, {d}, {bias})" for name in names]


def attention_class(s: Style) -> list[str]:
    d, h, dk = s["d"], s["h"], s["dk"]
    q, k, v, sc, p, o = s["q"], s["k"], s["v"], s["s"], s["p"], s["o"]
    functional = s.functional
    init = [f"def __init__(self, {d}, {h}, dropout=0.0, bias=True):" if not s.hints else
            f"def __init__(self, {d}: int, {h}: int, dropout: float = 0.0, bias: bool = True):",
            s.pick("    super().__init__()", "    super(MultiHeadAttention, self).__init__()")]
    init_body = _check(s, d, h, "")
    stored = [f"self.{h} = {h}"]
    scale_in_init = s.maybe(0.4)
    if s.maybe():
        stored.append(f"self.{dk} = {d} // {h}")
    if scale_in_init:
        stored.append(s.pick(f"self.scale = 1.0 / math.sqrt({d} // {h})", f"self.scale = ({d} // {h}) ** -0.5"))
    if s.maybe(0.3):
        s.rng.shuffle(stored)
    use_dropout = s.maybe(0.8)
    init_body += stored if s.maybe() else []
    init_body += _projections(s, d)
    init_body += [] if stored[0] in init_body else stored
    if use_dropout:
        init_body.append(s.pick("self.dropout = nn.Dropout(dropout)", "self.drop = nn.Dropout(p=dropout)"))
    init += ["    " + line for line in init_body]

    mask = s.pick("mask", "attn_mask", "m")
    sig = (f"def forward(self, query, key, value, {mask}=None):" if not s.hints else
           f"def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, {mask}=None) "
           "-> torch.Tensor:")
    heads = f"self.{h}"
    body = []
    project = s.pick("inline", "helper", "separate")
    if project == "inline":
        body += [f"{q} = split_heads(self.W_q(query), {heads})", f"{k} = split_heads(self.W_k(key), {heads})",
                 f"{v} = split_heads(self.W_v(value), {heads})"]
    elif project == "separate":
        body += [f"{q} = self.W_q(query)", f"{k} = self.W_k(key)", f"{v} = self.W_v(value)",
                 f"{q}, {k}, {v} = (split_heads(z, {heads}) for z in ({q}, {k}, {v}))" if s.maybe() else
                 f"{q} = split_heads({q}, {heads})\n{k} = split_heads({k}, {heads})\n{v} = split_heads({v}, {heads})"]
    else:
        body += [f"{q}, {k}, {v} = [split_heads(layer(z), {heads}) for layer, z in "
                 f"((self.W_q, query), (self.W_k, key), (self.W_v, value))]"]
    scale = "self.scale" if scale_in_init else s.pick(f"math.sqrt({q}.size(-1))", f"{q}.shape[-1] ** 0.5",
                                                      f"math.sqrt({q}.shape[-1])")
    op = "*" if scale_in_init else "/"
    product = s.pick(f"{q} @ {k}.transpose(-2, -1)", f"torch.matmul({q}, {k}.transpose(-2, -1))",
                     f"torch.einsum('bhqd,bhkd->bhqk', {q}, {k})", f"{q} @ {k}.mT")
    if s.maybe(0.3) and op == "/":
        body.append(f"{q} = {q} / {scale}")
        body.append(f"{sc} = {product}")
    else:
        body.append(f"{sc} = {product} {op} {scale}")
    masked = s.pick(f"{sc} = {sc}.masked_fill(~{mask}, float('-inf'))",
                    f"{sc} = {sc}.masked_fill({mask} == 0, -1e9)",
                    f"{sc} = torch.where({mask}, {sc}, torch.full_like({sc}, float('-inf')))",
                    f"{sc} = {sc}.masked_fill({mask}.logical_not(), float('-inf'))",
                    f"{sc}.masked_fill_(~{mask}.bool(), -float('inf'))")
    body += [f"if {mask} is not None:", f"    {masked}"]
    softmax = s.pick(f"F.softmax({sc}, dim=-1)", f"torch.softmax({sc}, dim=-1)", f"{sc}.softmax(dim=-1)",
                     f"nn.functional.softmax({sc}, -1)") if functional else s.pick(
        f"torch.softmax({sc}, dim=-1)", f"{sc}.softmax(-1)")
    body.append(f"{p} = {softmax}")
    if use_dropout:
        drop = "self.dropout" if "self.dropout = " in "\n".join(init_body) else "self.drop"
        body.append(f"{p} = {drop}({p})")
    out_expr = s.pick(f"{p} @ {v}", f"torch.matmul({p}, {v})", f"torch.einsum('bhqk,bhkd->bhqd', {p}, {v})")
    if s.maybe():
        body.append(f"{o} = combine_heads({out_expr})")
        body.append(f"return self.W_o({o})")
    else:
        body.append(f"{o} = {out_expr}")
        body.append(f"return self.W_o(combine_heads({o}))")
    forward = [sig] + ["    " + line for chunk in body for line in chunk.split("\n")]
    methods = [init, forward] if s.maybe(0.9) else [forward, init]
    lines = ["class MultiHeadAttention(nn.Module):"]
    if s.maybe(0.5):
        lines.append('    """Multi-head attention."""')
    for method in methods:
        lines += [""] + ["    " + line for line in method]
    return lines


def honest(rng: random.Random) -> str:
    """An honest student's module: each part written their own way."""
    s = Style(rng)
    parts = [split_heads(s), combine_heads(s), attention_class(s)]
    if s.maybe(0.15):
        rng.shuffle(parts)
    header = HEADER + ([F_IMPORT] if s.functional else [])
    return _layout(s, header, parts)


def _layout(s: Style, header: list[str], parts: list[list[str]]) -> str:
    lines = list(header)
    for part in parts:
        lines += ["", ""]
        for line in part:
            if line.strip() and s.maybe(s.comments) and not line.rstrip().endswith(":"):
                indent = line[:len(line) - len(line.lstrip())]
                lines.append(indent + s.pick(*COMMENTS))
            lines.append(line)
    return "\n".join(lines) + "\n"


def disguise(source: str, rng: random.Random) -> str:
    """What a copier does to a file: every name they can rename renamed, the top-level
    definitions reordered, comments, blank lines and prints added, short statements joined."""
    import io
    import keyword
    import tokenize

    keep = {"torch", "nn", "F", "math", "self", "super", "float", "range", "ValueError", "int", "bool", "len",
            "MultiHeadAttention", "split_heads", "combine_heads", "forward", "__init__", "W_q", "W_k", "W_v",
            "W_o", "dropout", "bias", "dim", "p", "start_dim", "None", "True", "False"}
    renames: dict[str, str] = {}
    out = []
    previous = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        text = token.string
        if (token.type == tokenize.NAME and not keyword.iskeyword(text) and text not in keep
                and not (previous is not None and previous.string == ".")):
            text = renames.setdefault(text, f"{rng.choice(['my', 'the', 'tmp', 'val'])}_{len(renames)}")
        out.append((token.type, text))
        previous = token
    renamed = tokenize.untokenize(out)
    blocks = renamed.split("\n\n\n")
    head, defs = blocks[0], blocks[1:]
    rng.shuffle(defs)
    lines = []
    for line in "\n\n\n".join([head, *defs]).split("\n"):
        indent = line[:len(line) - len(line.lstrip())]
        if line.strip() and rng.random() < 0.25:
            lines.append(indent + rng.choice(COMMENTS))
        lines.append(line)
        if line.strip().startswith(("return", "raise")) or not line.strip() or line.rstrip().endswith((":", ",", "(")):
            continue
        if rng.random() < 0.15:
            lines.append(f"{indent}print('debug', {rng.randint(0, 99)})")
    return "\n".join(lines) + "\n"


TUTORIAL_FILE = "annotated_transformer.py"
TUTORIAL = '''"""The Annotated Transformer, abridged: multi-head attention and what it uses."""
import copy
import math

import torch
import torch.nn as nn


def clones(module, N):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


def attention(query, key, value, mask=None, dropout=None):
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
        super(MultiHeadedAttention, self).__init__()
        assert d_model % h == 0
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)
        nbatches = query.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        del query
        del key
        del value
        return self.linears[-1](x)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.1):
        super(PositionwiseFeedForward, self).__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.w_2(self.dropout(self.w_1(x).relu()))
'''

# The tutorial's class adapted to the contract: what a student who copied it hands in.
FROM_TUTORIAL = '''

def split_heads(x, num_heads):
    b, t, d = x.shape
    if d % num_heads:
        raise ValueError("not divisible")
    return x.view(b, t, num_heads, d // num_heads).transpose(1, 2)


def combine_heads(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).contiguous().view(b, t, h * d)


def attention(query, key, value, mask=None, dropout=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super(MultiHeadAttention, self).__init__()
        if d_model % num_heads:
            raise ValueError("not divisible")
        self.d_k = d_model // num_heads
        self.h = num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        nbatches = query.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip((self.W_q, self.W_k, self.W_v), (query, key, value))
        ]
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.W_o(x)
'''


def _class_of(text: str) -> str:
    """The class ``MultiHeadAttention`` of a module, up to the next top-level definition."""
    tail = text[text.index("class MultiHeadAttention"):]
    return tail.split("\n\n\n")[0]


def make_class(folder: Path, count: int, seed: int) -> dict[str, tuple[str, str]]:
    """Write ``count`` students into ``folder/submissions`` and the tutorial into
    ``folder/known``; returns where each student's code comes from: (their functions, their
    class), each a student's name or "tutorial"."""
    rng = random.Random(seed)
    submissions, known = folder / "submissions", folder / "known"
    known.mkdir(parents=True)
    (known / TUTORIAL_FILE).write_text(TUTORIAL)
    texts: dict[str, str] = {}
    origins: dict[str, tuple[str, str]] = {}
    for index in range(count):
        name = f"s{index:03d}"
        roll = rng.random()
        source = rng.choice(sorted(texts)) if texts else None
        if roll < 0.06 and source:
            texts[name], origins[name] = disguise(texts[source], rng), origins[source]
        elif roll < 0.09 and source:
            s = Style(rng)
            own = _layout(s, HEADER + [F_IMPORT], [split_heads(s), combine_heads(s)])
            texts[name] = disguise(own + "\n\n" + _class_of(texts[source]), rng)
            origins[name] = (name, origins[source][1])
        elif roll < 0.11:
            texts[name], origins[name] = disguise("\n".join(HEADER) + FROM_TUTORIAL, rng), ("tutorial", "tutorial")
        else:
            texts[name], origins[name] = honest(rng), (name, name)
    for name, text in texts.items():
        student = submissions / name
        student.mkdir(parents=True)
        if rng.random() < 0.2:
            (student / "mha.ipynb").write_text(nbformat.writes(new_notebook(cells=[
                new_code_cell(block) for block in text.split("\n\n\n")])))
        else:
            (student / "mha.py").write_text(text)
    return origins


def kind_of(a: str, b: str, origins: dict[str, tuple[str, str]]) -> str:
    """What a pair is: which code of theirs has one origin."""
    if b == TUTORIAL_FILE:
        return "from the tutorial" if origins[a][1] == "tutorial" else "honest, tutorial"
    functions, classes = (origins[a][0] == origins[b][0]), (origins[a][1] == origins[b][1])
    return "copied whole" if functions and classes else "copied the class" if classes else \
        "copied functions" if functions else "honest"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="write the class and the report here, and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch)
        origins = make_class(folder, args.count, args.seed)
        command = [sys.executable, "-m", "grader.cli", "similarity", str(ROOT / "assignments/03"),
                   str(folder / "submissions"), "--against", str(folder / "known"), "--out", str(folder / "out")]
        started = time.monotonic()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        elapsed = time.monotonic() - started
        listed = json.loads((folder / "out" / "similarity.json").read_text())["pairs"]
        pairs = _every_pair(folder)
    names = sorted(origins)
    planted = Counter(kind_of(a, b, origins) for i, a in enumerate(names) for b in names[i + 1:])
    planted.update(kind_of(a, TUTORIAL_FILE, origins) for a in names)
    print(f"{args.count} students: {elapsed:.2f} s for `grade similarity` (Python's start included), "
          f"{len(listed)} pairs listed at the default threshold {DEFAULT_THRESHOLD:g}")
    found: dict[str, list[float]] = {kind: [] for kind in planted}
    for pair in pairs:
        found[kind_of(pair.a.name, pair.b.name, origins)].append(pair.similarity)
    for kind, values in sorted(found.items()):
        values = sorted(values + [0.0] * (planted[kind] - len(values)))  # the pairs that share nothing
        quantiles = ", ".join(f"{q:.2%} {values[min(int(len(values) * q), len(values) - 1)]:.3f}"
                              for q in (0.5, 0.99, 0.999))
        print(f"  {kind:18} {planted[kind]:7} pairs: max {values[-1]:.3f}, quantiles {quantiles}")
    for cut in (0.15, 0.2, 0.25, 0.3, 0.4):
        counts = ", ".join(f"{kind} {sum(value >= cut for value in values)}" for kind, values in sorted(found.items()))
        print(f"  listed at {cut:.2f}: {counts}")
    copies = [kind_of(pair.a.name, pair.b.name, origins) not in ("honest", "honest, tutorial") for pair in pairs]
    print("  copies among the first pairs: " + ", ".join(f"{sum(copies[:n])} of {n}" for n in (50, 100, 200)))


def _every_pair(folder: Path) -> list:
    """Every pair that shares a fingerprint (threshold 0), most similar first."""
    from grader.core.assignment import Assignment
    from grader.results.students import handins
    from grader.results.submissions import discover
    from grader.similarity.report import find_similar

    assignment, submissions = Assignment.load(ROOT / "assignments/03"), folder / "submissions"
    students = handins(discover(submissions), submissions, assignment)
    return find_similar(assignment, submissions, students, against=folder / "known", threshold=0.0).pairs


if __name__ == "__main__":
    main()
