"""Public tests for assignment 07: shapes and sanity checks you can run yourself.

    pytest assignments/07

They are a subset in spirit of what the grader checks; passing them does not mean full
marks. Run `grade assignments/07` for the graded result and hints.
"""

import pytest
import torch

from gpt import GPT, MLP, Block, Head, MultiHead, generate

D_MODEL, HEADS, CONTEXT, VOCAB = 16, 2, 8, 11


def test_head_shape():
    head = Head(D_MODEL, 8, CONTEXT)
    assert head(torch.randn(2, 5, D_MODEL)).shape == (2, 5, 8)


def test_head_is_causal():
    head = Head(D_MODEL, 8, CONTEXT)
    x = torch.randn(1, 5, D_MODEL)
    changed = x.clone()
    changed[:, 3:] += 1.0  # the future of positions 0..2
    assert torch.allclose(head(x)[:, :3], head(changed)[:, :3], atol=1e-6)


def test_multi_head_shape_and_error():
    assert MultiHead(D_MODEL, HEADS, CONTEXT)(torch.randn(2, 5, D_MODEL)).shape == (2, 5, D_MODEL)
    with pytest.raises(ValueError):
        MultiHead(D_MODEL, 3, CONTEXT)


def test_mlp_shape():
    assert MLP(D_MODEL)(torch.randn(2, 5, D_MODEL)).shape == (2, 5, D_MODEL)


def test_block_shape():
    assert Block(D_MODEL, HEADS, CONTEXT)(torch.randn(2, 5, D_MODEL)).shape == (2, 5, D_MODEL)


def test_gpt_logits_and_loss():
    model = GPT(VOCAB, D_MODEL, HEADS, 2, CONTEXT)
    idx = torch.randint(0, VOCAB, (2, 5))
    logits, loss = model(idx)
    assert logits.shape == (2, 5, VOCAB) and loss is None
    _, loss = model(idx, idx)
    assert loss.dim() == 0


def test_generate_shape_and_prefix():
    model = GPT(VOCAB, D_MODEL, HEADS, 1, CONTEXT)
    idx = torch.randint(0, VOCAB, (2, 3))
    out = generate(model, idx, 10, generator=torch.Generator().manual_seed(0))  # longer than the context
    assert out.shape == (2, 13) and torch.equal(out[:, :3], idx)
