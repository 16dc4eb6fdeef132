"""Dimensions and inputs for the 04 suite.

d_model=16 gives 8 sin/cos pairs, enough that every layout and exponent mistake changes
most of the table; sqrt(16)=4 keeps the embedding scale mistakes (x1, x4, x16, /4) apart.
Tables of 64 positions stay accurate in float32 (errors ~1e-6), so the value checks can
be tight; the long-table check allows for float32 rounding of large angles.
"""


import pytest
import torch

from grader.suite import seed_reference
from reference.positions import TokenEmbedding

D_MODEL, MAX_LEN, VOCAB, PAD = 16, 64, 23, 0
# The definitions of the stub module; its stubs' messages start with their name.
# Sent into the student's process (student.define): what one training step does to a module.
TRAINING_HELPER = """
import torch


def step(module, x):
    \"\"\"Move each trainable parameter against its gradient of module(x).sum(), as SGD would.\"\"\"
    parameters = [p for p in module.parameters() if p.requires_grad]
    if parameters:
        module(x).sum().backward()
        with torch.no_grad():
            for p in parameters:
                if p.grad is not None:
                    p -= p.grad
"""


@pytest.fixture
def make_tokens(device):
    """Token ids in 1..VOCAB-1, with PAD at the end of some rows when ``pad`` is given."""
    def make(batch: int, length: int, *, seed: int, pad: tuple[int, ...] = ()) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        tokens = torch.randint(1, VOCAB, (batch, length), generator=generator)
        for row, count in enumerate(pad):
            if count:
                tokens[row, length - count:] = PAD
        return tokens.to(device)
    return make


@pytest.fixture
def reference_embedding(device):
    seed_reference(0)
    return TokenEmbedding(VOCAB, D_MODEL, padding_idx=PAD).to(device)


def as_float32(value):
    """Values are checked apart from the dtype (its own test): compare a float64 answer too."""
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float32:
        return value.float()
    return value
