"""Public tests for assignment 07: shapes and sanity checks you can run yourself.

    pytest assignments/07

They are a subset in spirit of what the grader checks; passing them does not mean full
marks. Run `grade assignments/07` for the graded result and hints.

Tests that check values compare your output on stored inputs with the stored right output, and
with what common mistakes output on them (test_gpt.safetensors, beside this file).
"""

import pytest
import torch
from gpt import GPT, MLP, Block, Head, MultiHead, generate

from grader.core.public_cases import Cases

D_MODEL, HEADS, CONTEXT, VOCAB = 16, 2, 8, 11
CASES = Cases(__file__)


def test_head_shape():
    head = Head(D_MODEL, 8, CONTEXT)
    assert head(torch.randn(2, CONTEXT, D_MODEL)).shape == (2, CONTEXT, 8)
    try:
        out = head(torch.randn(2, 5, D_MODEL))  # shorter than the context
    except RuntimeError:
        pytest.fail("mistake: the mask not cropped to `T` (a crash for `T < context_length`: the hint says to crop)")
    assert out.shape == (2, 5, 8)


def test_head_is_causal():
    head = Head(D_MODEL, 8, CONTEXT)
    x = torch.randn(1, 5, D_MODEL)
    changed = x.clone()
    changed[:, 3:] += 1.0  # the future of positions 0..2
    assert torch.allclose(head(x)[:, :3], head(changed)[:, :3], atol=1e-6), \
        "mistake: future positions visible (no causal mask)"


def test_head_scales_by_the_head_size():
    case = CASES["head"]
    head = case.load(Head(D_MODEL, 8, CONTEXT)).eval()  # head size 8, model width 16
    case.expect(head(case.tensor("x", 2, 5, D_MODEL)),
                mistakes=("scores scaled by `d_model` instead of the head size",))


def test_multi_head_shape_and_error():
    assert MultiHead(D_MODEL, HEADS, CONTEXT)(torch.randn(2, 5, D_MODEL)).shape == (2, 5, D_MODEL)
    with pytest.raises(ValueError):
        MultiHead(D_MODEL, 3, CONTEXT)


def test_mlp_shape():
    assert MLP(D_MODEL)(torch.randn(2, 5, D_MODEL)).shape == (2, 5, D_MODEL)


def test_mlp_uses_exact_gelu():
    case = CASES["mlp"]
    mlp = case.load(MLP(D_MODEL)).eval()
    case.expect(mlp(case.tensor("x", 2, 5, D_MODEL)), atol=1e-6,
                mistakes=("ReLU (or tanh-approximate GELU) instead of exact GELU",))


def test_block_shape():
    assert Block(D_MODEL, HEADS, CONTEXT)(torch.randn(2, 5, D_MODEL)).shape == (2, 5, D_MODEL)


def test_block_is_pre_norm():
    # Pre-norm adds to x: an input far from 0 stays far. Post-norm ends in a LayerNorm: mean ~0.
    torch.manual_seed(0)
    out = Block(D_MODEL, HEADS, CONTEXT).eval()(3 * torch.randn(2, 5, D_MODEL) + 5)
    assert not torch.allclose(out.mean(-1), torch.zeros(2, 5), atol=1e-4), "mistake: post-norm instead of pre-norm"


def test_gpt_logits_and_loss():
    model = GPT(VOCAB, D_MODEL, HEADS, 2, CONTEXT)
    idx = torch.randint(0, VOCAB, (2, 5))
    logits, loss = model(idx)
    assert logits.shape == (2, 5, VOCAB) and loss is None
    logits, loss = model(idx, idx)  # with targets too
    assert logits.shape != (10, VOCAB), "mistake: logits returned flattened to `(B*T, V)`"
    assert logits.shape == (2, 5, VOCAB) and loss.dim() == 0


def test_gpt_applies_the_final_layer_norm():
    torch.manual_seed(0)
    model = GPT(VOCAB, D_MODEL, HEADS, 2, CONTEXT).eval()
    normed = []
    model.ln_f.register_forward_hook(lambda module, inputs, output: normed.append(output))
    logits, _ = model(torch.randint(0, VOCAB, (2, 5)))
    assert normed, "mistake: no final LayerNorm"
    assert torch.allclose(logits, model.lm_head(normed[-1]), atol=1e-5)


def test_gpt_adds_positions():
    torch.manual_seed(0)
    model = GPT(VOCAB, D_MODEL, HEADS, 1, CONTEXT).eval()
    logits, _ = model(torch.full((1, 5), 3))  # one token, five times: only its position tells them apart
    assert not torch.allclose(logits[0, 0], logits[0, 4], atol=1e-5), "mistake: positions not added"


def test_generate_shape_and_prefix():
    model = GPT(VOCAB, D_MODEL, HEADS, 1, CONTEXT)
    idx = torch.randint(0, VOCAB, (2, 3))
    assert generate(model, idx, 4, generator=torch.Generator().manual_seed(0)).shape == (2, 7)
    try:
        out = generate(model, idx, 10, generator=torch.Generator().manual_seed(0))  # longer than the context
    except (ValueError, IndexError, RuntimeError):
        pytest.fail("mistake: the context not cropped to `context_length` when generating")
    assert out.shape == (2, 13) and torch.equal(out[:, :3], idx)


class TableModel(torch.nn.Module):
    """A stand-in for your GPT: the next token's logits are the row of a fixed table for the last token."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = torch.nn.Parameter(table, requires_grad=False)
        self.context_length = CONTEXT

    def forward(self, idx, targets=None):
        assert idx.shape[1] <= self.context_length, "the context not cropped to `context_length`"
        return self.table[idx], None


def test_generate_with_a_tiny_temperature_or_top_k_1_is_greedy():
    case = CASES["generate"]
    # Logits from -4 to 4: at temperature 1 a draw often is not the largest, at 0.001 it always is.
    model = TableModel(4 * case.tensor("table", VOCAB, VOCAB))
    idx = case.tokens("idx", VOCAB, 2, 3)
    cold = generate(model, idx, 6, temperature=1e-3, generator=torch.Generator().manual_seed(0))
    # Dividing the probabilities instead of the logits changes nothing: the same draws as at 1.0.
    case.expect(cold, mistakes=("temperature applied after the softmax",))
    # Sampling is right now: a top_k of 1 that is not greedy keeps the wrong tokens.
    try:
        top_1 = generate(model, idx, 6, top_k=1, generator=torch.Generator().manual_seed(0))
    except RuntimeError:  # every token filtered out: nothing left to sample
        top_1 = None
    assert top_1 is not None and torch.equal(top_1, cold), "mistake: `top_k` keeping the wrong set"


def test_generate_samples_with_the_generator_it_is_given():
    torch.manual_seed(0)
    model = GPT(VOCAB, D_MODEL, HEADS, 1, CONTEXT).eval()
    idx = torch.randint(0, VOCAB, (2, 3))
    first = generate(model, idx, 20, generator=torch.Generator().manual_seed(7))
    torch.rand(100)  # the global generator moves on; the one given does not
    again = generate(model, idx, 20, generator=torch.Generator().manual_seed(7))
    assert torch.equal(first, again), "mistake: sampling ignoring `generator`"
