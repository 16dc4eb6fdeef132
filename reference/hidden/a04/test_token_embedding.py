import math

import pytest
import torch
import torch.nn.functional as F

from grader.suite import (
    expect_close,
    expect_computes_with,
    expect_contract_parameters,
    expect_follows_device,
    expect_tensor,
)
from reference.hidden.a04 import variants
from reference.hidden.a04.conftest import D_MODEL, PAD, VOCAB
from reference.positions import TokenEmbedding

pytestmark = pytest.mark.part("TokenEmbedding")

# A lookup and one multiplication: exact up to float32 rounding of the product.
ATOL, RTOL = 1e-6, 1e-6


def _weights(module) -> dict[str, torch.Tensor]:
    return {name: p.detach() for name, p in module.named_parameters()}


@pytest.fixture
def student_embedding(student, reference_embedding):
    """The student's TokenEmbedding holding the reference's weights."""
    return student.new_like(reference_embedding, "TokenEmbedding", VOCAB, D_MODEL, padding_idx=PAD)


def test_token_embedding_has_the_contract_parameters(student, reference_embedding, make_tokens):
    names = "use one submodule embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)"
    expect_contract_parameters(f"TokenEmbedding({VOCAB}, {D_MODEL})", student.new("TokenEmbedding", VOCAB, D_MODEL),
                      TokenEmbedding(VOCAB, D_MODEL), names_hint=names, shape_hint=names)
    # The names are the student process's word: the module must compute with them.
    tokens = make_tokens(2, 4, seed=56)
    module = student.new_like(reference_embedding, "TokenEmbedding", VOCAB, D_MODEL, padding_idx=PAD)
    expect_computes_with("TokenEmbedding(tokens)", module, reference_embedding, lambda: module(tokens))


@pytest.mark.part("TokenEmbedding", points=3)
def test_token_embedding_values(student_embedding, reference_embedding, make_tokens):
    tokens = make_tokens(2, 6, seed=50, pad=(0, 2))
    weight = _weights(reference_embedding)["embedding.weight"]
    expect_close("TokenEmbedding(tokens: (2, 6))", student_embedding(tokens), reference_embedding(tokens),
                 atol=ATOL, rtol=RTOL, mistakes=variants.embedding_mistakes(tokens, weight))


def test_token_embedding_batch_and_length_of_one(student_embedding, reference_embedding, make_tokens):
    tokens = make_tokens(1, 1, seed=51)
    expect_close("TokenEmbedding(tokens: (1, 1))", student_embedding(tokens), reference_embedding(tokens),
                 atol=ATOL, rtol=RTOL)


def test_token_embedding_padding_row_is_zero(student, make_tokens, device):
    module = student.new("TokenEmbedding", VOCAB, D_MODEL, padding_idx=PAD)  # freshly initialised
    module.method("to", device)
    tokens = make_tokens(2, 5, seed=52, pad=(3, 0))
    got = expect_tensor("TokenEmbedding(tokens: (2, 5))", module(tokens), shape=(2, 5, D_MODEL))
    at_padding = got[tokens == PAD]
    # Any non-zero row here means the padding row was initialised like the others.
    expect_close(f"TokenEmbedding(padding_idx={PAD}) output at the padding tokens", at_padding,
                 torch.zeros(3, D_MODEL, device=device), atol=0.0, mistakes={variants.NO_PADDING_IDX: at_padding})


def test_token_embedding_gradients(student_embedding, reference_embedding, make_tokens, make_input):
    tokens = make_tokens(2, 6, seed=53, pad=(2, 0))
    grad_output = make_input(2, 6, D_MODEL, seed=54)
    reference_embedding(tokens).backward(grad_output)
    want = reference_embedding.embedding.weight.grad
    got = student_embedding.backward(tokens, grad_output=grad_output).param_grads.get("embedding.weight")
    weight = _weights(reference_embedding)["embedding.weight"].clone().requires_grad_(True)
    (F.embedding(tokens, weight) * math.sqrt(D_MODEL)).backward(grad_output)  # as if padding_idx were ignored
    expect_close("gradient of embedding.weight", got, want, atol=1e-5, rtol=1e-5,
                 mistakes={variants.NO_PADDING_IDX: weight.grad})


def test_token_embedding_follows_the_input_device(student, make_tokens, device):
    tokens = make_tokens(1, 3, seed=55)

    def output_on(where):
        module = student.new("TokenEmbedding", VOCAB, D_MODEL, padding_idx=PAD)
        module.method("to", where)
        return module(tokens.to(where))

    expect_follows_device("TokenEmbedding(tokens)", output_on, device, shape=(1, 3, D_MODEL))
