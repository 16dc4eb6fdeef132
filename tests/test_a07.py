"""Assignment 07 graded on GPT code as public tutorials write it (Karpathy's "let's build GPT"):
a float tril read with ``== 0``, ``nn.ModuleList`` heads, ``logits.view(B*T, C)`` inside the loss.
Written to the contract's names, it scores full marks; each habit that breaks the contract
costs points in its own part, with its hint, and nowhere else.
"""

from __future__ import annotations

import pytest

from grader.core.assignment import Assignment
from grader.student.grade import grade_public
from reference import as_submission
from reference.hidden.a07 import variants
from tests.conftest import ROOT, mutant

pytestmark = pytest.mark.slow
ASSIGNMENT_07 = Assignment.load(ROOT / "assignments" / "07").directory

TUTORIAL = """import torch
import torch.nn as nn
from torch.nn import functional as F


class Head(nn.Module):
    # one head of self-attention

    def __init__(self, d_model, head_size, context_length, dropout=0.0):
        super().__init__()
        self.key = nn.Linear(d_model, head_size, bias=False)
        self.query = nn.Linear(d_model, head_size, bias=False)
        self.value = nn.Linear(d_model, head_size, bias=False)
        self.register_buffer('tril', torch.tril(torch.ones(context_length, context_length)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        if T > self.tril.shape[0]:
            raise ValueError("too long")
        k = self.key(x)
        q = self.query(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1]**-0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))
        wei = F.softmax(wei, dim=-1)
        wei = self.dropout(wei)
        v = self.value(x)
        out = wei @ v
        return out


class MultiHead(nn.Module):
    def __init__(self, d_model, num_heads, context_length, dropout=0.0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("bad heads")
        head_size = d_model // num_heads
        self.heads = nn.ModuleList([Head(d_model, head_size, context_length, dropout) for _ in range(num_heads)])
        self.proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)
        out = self.dropout(self.proj(out))
        return out


class MLP(nn.Module):
    def __init__(self, d_model, dropout=0.0):
        super().__init__()
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.proj = nn.Linear(4 * d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.proj(F.gelu(self.fc(x))))


class Block(nn.Module):
    def __init__(self, d_model, num_heads, context_length, dropout=0.0):
        super().__init__()
        self.attn = MultiHead(d_model, num_heads, context_length, dropout)
        self.mlp = MLP(d_model, dropout)
        self.ln1 = nn.LayerNorm(d_model)
        self.ln2 = nn.LayerNorm(d_model)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, context_length, dropout=0.0):
        super().__init__()
        self.context_length = context_length
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(context_length, d_model)
        self.blocks = nn.ModuleList([Block(d_model, num_heads, context_length, dropout) for _ in range(num_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        if T > self.context_length:
            raise ValueError("too long")
        tok_emb = self.token_embedding(idx)
        pos_emb = self.position_embedding(torch.arange(T, device=idx.device))
        x = tok_emb + pos_emb
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        logits = self.lm_head(x)
        if targets is None:
            loss = None
        else:
            B, T, C = logits.shape
            loss = F.cross_entropy(logits.view(B*T, C), targets.view(B*T))
        return logits, loss


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    if temperature <= 0 or (top_k is not None and top_k < 1):
        raise ValueError("temperature must be positive and top_k at least 1")
    model.eval()
    for _ in range(max_new_tokens):
        idx_cond = idx[:, -model.context_length:]
        logits, loss = model(idx_cond)
        logits = logits[:, -1, :] / temperature
        if top_k is not None:
            v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
            logits[logits < v[:, [-1]]] = -float('Inf')
        probs = F.softmax(logits, dim=-1)
        idx_next = torch.multinomial(probs, num_samples=1, generator=generator)
        idx = torch.cat((idx, idx_next), dim=1)
    return idx
"""


def graded(grade_source, source: str):
    report = grade_source(source, assignment=ASSIGNMENT_07)
    return report, {p.id: p for p in report.parts}


def only_part_loses(parts, lost: str) -> None:
    assert parts[lost].score < parts[lost].max_score, parts[lost]
    assert all(p.score == p.max_score for name, p in parts.items() if name != lost), \
        [(name, p.score, p.max_score, p.hint) for name, p in parts.items() if p.score < p.max_score]


def test_tutorial_gpt_written_to_the_contract_scores_full_marks(grade_source):
    report, _ = graded(grade_source, TUTORIAL)
    assert report.score == report.max_score > 0


def test_a_correct_gpt_is_graded_in_one_student_process(grade_source, student_processes):
    report, _ = graded(grade_source, as_submission("gpt"))
    assert report.score == report.max_score > 0
    # Where its own pieces and GPT serve, no test hands it the grader's stock parts (answers,
    # after which its process ends): one student process serves the whole suite.
    assert student_processes() == 1


def test_tutorial_gpt_passes_the_public_tests_with_no_mistake_named(tmp_path):
    submission = tmp_path / "gpt.py"
    submission.write_text(TUTORIAL, encoding="utf-8")
    report = grade_public(ASSIGNMENT_07, submission)
    assert report.score == report.max_score > 0, [(part.id, part.hint) for part in report.parts]


def test_scaling_by_the_embedding_width_costs_points_in_head_only(grade_source):
    # The video's line: C is x's last dimension, d_model, not the head size.
    source = mutant(TUTORIAL, "wei = q @ k.transpose(-2, -1) * k.shape[-1]**-0.5",
                    "wei = q @ k.transpose(-2, -1) * C**-0.5")
    _, parts = graded(grade_source, source)
    only_part_loses(parts, "Head")
    assert parts["Head"].hint == variants.SCALE_BY_INPUT_WIDTH


def test_inverting_a_float_causal_buffer_costs_heads_forward_tests_and_the_training(grade_source):
    # torch.tril(torch.ones(T, T)) is a float buffer: ~ on it raises in every forward of Head.
    source = mutant(TUTORIAL, "wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))",
                    "wei = wei.masked_fill(~self.tril[:T, :T], float('-inf'))")
    _, parts = graded(grade_source, source)
    assert (parts["Head"].score, parts["Head"].max_score) == (2, 15)  # its buffer and its length check stand
    assert parts["Head"].hint == "masks must be bool tensors (True = may attend); ~ works on bool, not on floats"
    assert parts["end_to_end"].score == 0  # a GPT whose heads raise cannot train
    assert all(p.score == p.max_score for name, p in parts.items() if name not in ("Head", "end_to_end"))


def test_a_sequential_relu_mlp_costs_points_in_mlp_only(grade_source):
    # Block and GPT are graded with a stock MLP in its place: its names cannot hold the weights.
    source = mutant(TUTORIAL, """        self.fc = nn.Linear(d_model, 4 * d_model)
        self.proj = nn.Linear(4 * d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.proj(F.gelu(self.fc(x))))""", """        self.net = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.ReLU(),
                                 nn.Linear(4 * d_model, d_model), nn.Dropout(dropout))

    def forward(self, x):
        return self.net(x)""")
    _, parts = graded(grade_source, source)
    only_part_loses(parts, "MLP")
    assert "fc, proj" in parts["MLP"].hint


def test_the_videos_generate_costs_points_in_generate_only(grade_source):
    # No generator, no eval mode, no torch.no_grad, temperature and top_k ignored.
    source = mutant(TUTORIAL, TUTORIAL[TUTORIAL.index("@torch.no_grad()"):], """def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    for _ in range(max_new_tokens):
        idx_cond = idx[:, -model.context_length:]
        logits, loss = model(idx_cond)
        probs = F.softmax(logits[:, -1, :], dim=-1)
        idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
    return idx
""")
    _, parts = graded(grade_source, source)
    only_part_loses(parts, "generate")
    failed = {test.hint for test in parts["generate"].tests if test.outcome != "passed"}
    assert {variants.GENERATOR_IGNORED, variants.NOT_EVAL_MODE, variants.GRADIENTS_ON,
            variants.TEMPERATURE_AFTER_SOFTMAX, variants.TOP_K_IGNORED} <= failed


def test_categorical_sampling_passes_the_distribution_checks(grade_source):
    source = mutant(TUTORIAL, "idx_next = torch.multinomial(probs, num_samples=1, generator=generator)",
                    "idx_next = torch.distributions.Categorical(probs=probs).sample().unsqueeze(-1)")
    _, parts = graded(grade_source, source)
    only_part_loses(parts, "generate")
    failed = [test.name for test in parts["generate"].tests if test.outcome != "passed"]
    assert failed == ["test_generate_same_generator_seed_same_tokens"]


GENERATE_WITHOUT_NO_GRAD = ("@torch.no_grad()\ndef generate(", "def generate(")
HEAD_OUT = "        return weights @ v  # (B, T, hs)"
MULTIHEAD_CAT = "out = torch.cat([head(x) for head in self.heads], dim=-1)  # (B, T, d_model)"


@pytest.mark.parametrize("edits, lost", [
    # generate turns autograd off for good, a call where a `with` belongs: it still runs without
    # gradients, and the training after it is the grader's, with autograd on.
    pytest.param([GENERATE_WITHOUT_NO_GRAD, ("    if temperature <= 0:\n",
                                             "    torch.set_grad_enabled(False)\n    if temperature <= 0:\n")],
                 {}, id="autograd off for good"),
    # A GPT over a base class of its own, reached through super(self.__class__, self): the model
    # generate's no-gradients test gets keeps its class, so the call still finds the base.
    pytest.param([("class GPT(nn.Module):\n", "class LanguageModel(nn.Module):\n"),
                  ("        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())\n",
                   "        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())\n\n\n"
                   "class GPT(LanguageModel):\n    def forward(self, idx, targets=None):\n"
                   "        return super(self.__class__, self).forward(idx, targets)\n")],
                 {}, id="super(self.__class__)"),
    # A GPT whose forward is an attribute its constructor sets (as torch.compile is applied), and
    # a generate that forgets no_grad: the point for running without gradients is lost.
    pytest.param([("        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)\n",
                   "        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)\n        self.forward = self._forward\n"),
                  ("    def forward(self, idx: torch.Tensor, targets", "    def _forward(self, idx: torch.Tensor, targets"),
                  GENERATE_WITHOUT_NO_GRAD],
                 {"generate": 1}, id="forward set in __init__, no no_grad"),
    # A Head that doubles its output and a MultiHead that halves it back: the Head pays for its
    # values, and the MultiHead the 2 points of its test on shorter inputs, where the stock heads
    # show what it does to a correct Head's output (its own heads' output was right there).
    pytest.param([(HEAD_OUT, "        return 2 * (weights @ v)"),
                  (MULTIHEAD_CAT, "out = torch.cat([head(x) / 2 for head in self.heads], dim=-1)")],
                 {"Head": 8, "MultiHead": 2}, id="a MultiHead that makes up for its Head"),
])
def test_what_one_part_does_costs_points_only_where_the_contract_says(grade_source, edits, lost):
    source = as_submission("gpt")
    for old, new in edits:
        source = mutant(source, old, new)
    report, _ = graded(grade_source, source)
    assert {p.id: p.max_score - p.score for p in report.parts if p.score < p.max_score} == lost
