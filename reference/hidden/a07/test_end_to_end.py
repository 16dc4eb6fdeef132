"""End to end: the student's GPT, trained by a stock loop, learns a tiny character corpus.

The corpus is "hello world\\n" repeated. The model (context 16, d_model 16, 2 heads, 1 layer)
is built in the student's process holding the grader's initial parameters (a stock piece in
place of each of its pieces that cannot hold them, as the GPT part grades it) and trained
there by ``helpers.train`` (AdamW, lr 1e-2, batch 16, 100 steps; about 0.3 s on one CPU
thread with the reference, whose time for it is the yardstick of the call's limit: correct
code with attention element by element takes 160 times as long). What that process says is
not the verdict, nor is what its model outputs afterwards (a model that cannot learn could answer with hand-written logits
once trained): the grader fetches the trained parameters, checks their names and shapes,
and computes everything itself, with those parameters in the contract's GPT: the loss on
fixed windows before and after, and greedy decoding from a one-character prompt. So a
mistake in the student's generate costs points only in generate, and parameters that do
not fit the contract's GPT fail here with a hint that says so.

Part isolation: a mistake the GPT's parts are graded for (post-norm, ReLU, no final
LayerNorm, an lm_head with a bias or tied to the embedding, ...) trains a model of that
architecture. The loss is therefore measured in the
contract's architecture and in each of those (``variants.ARCHITECTURE_MISTAKES``): a model
that learns in its own architecture passes here, its mistake costs points in its own part.

Measured with the reference over 5 seeds: the loss falls from ~2.2 to ~0.04, and greedy
decoding from "h" gives "hello world\\nhello world\\n"; the test asks for a loss below 0.5
and the first 12 characters.
"""

import copy
from typing import NamedTuple

import pytest
import torch
import torch.nn.functional as F

from grader.suite import (
    CheckFailed,
    expect_contract_parameters,
    expect_named_tensors,
    materialized,
    new_with_stock,
    seed_reference,
)
from reference.gpt import GPT
from reference.hidden.a07 import helpers, variants
from reference.hidden.a07.conftest import HELPERS_SOURCE, stock_pieces_of
from reference.hidden.a07.test_gpt import tied

pytestmark = pytest.mark.part("end_to_end")

CORPUS = "hello world\n" * 40
CHARS = sorted(set(CORPUS))
CONTEXT, D_MODEL, HEADS, LAYERS = 16, 16, 2, 1
STEPS, BATCH, LR, SEED = 100, 16, 1e-2, 0
MAX_LOSS, CONTINUATION = 0.5, 12
# The contract's architecture first, then each mistake's.
ARCHITECTURES = {None: {}, **variants.ARCHITECTURE_MISTAKES}


def encode(text: str, device) -> torch.Tensor:
    return torch.tensor([CHARS.index(c) for c in text], device=device)


def windows(data: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """8 fixed windows of the corpus and their next tokens."""
    starts = range(0, 8 * 5, 5)
    return (torch.stack([data[s:s + CONTEXT] for s in starts]),
            torch.stack([data[s + 1:s + CONTEXT + 1] for s in starts]))


class Trained(NamedTuple):
    parameters: dict[str, torch.Tensor]  # the student's trained parameters, checked
    architecture: dict  # gpt_from_parameters' keywords of the architecture they learned in
    before: float  # the loss in that architecture before training
    after: float  # and after


def losses(parameters: dict[str, torch.Tensor], data: torch.Tensor) -> dict:
    """Architecture -> next-token cross-entropy on the fixed windows, computed here."""
    x, y = windows(data)
    with torch.no_grad():
        return {name: float(F.cross_entropy(variants.gpt_from_parameters(x, parameters, **arch).flatten(0, 1),
                                            y.flatten()))
                for name, arch in ARCHITECTURES.items()}


@pytest.fixture(scope="module")
def trained(student, device) -> Trained:
    """The student's GPT trained in the student's process, its parameters fetched once and
    checked, and what the grader measures with them; for both tests."""
    seed_reference(SEED)
    reference = GPT(len(CHARS), D_MODEL, HEADS, LAYERS, CONTEXT).to(device)
    initial = {name: p.detach().clone() for name, p in reference.named_parameters()}
    data = encode(CORPUS, device)
    model = new_with_stock(student, reference, "GPT", len(CHARS), D_MODEL, HEADS, LAYERS, CONTEXT,
                           stock=stock_pieces_of(student))
    head_bias = head_of_its_own(model, reference, data)
    model.load_parameters(initial)
    remote = student.define("helpers", HELPERS_SOURCE)
    remote.method("seed", SEED)
    # Its time limit: as many times the same training of the reference's GPT as any call gets.
    with student.timed_like(lambda: helpers.train(copy.deepcopy(reference), data, STEPS, BATCH, CONTEXT, LR, SEED)):
        remote.method("train", model, data, STEPS, BATCH, CONTEXT, LR, SEED)
    like = {**initial, **({"lm_head.bias": torch.zeros(len(CHARS), device=device)} if head_bias else {})}
    parameters = expect_named_tensors(f"your GPT after {STEPS} training steps: its state_dict()",
                                      model.method("state_dict"), like, others_allowed=True,
                                      hint=variants.PARAMETERS_DO_NOT_FIT)
    if head_bias:
        initial = {**initial, "lm_head.bias": torch.zeros(len(CHARS), device=device)}
    before, after = losses(initial, data), losses(parameters, data)
    # The architecture whose loss fell furthest below what the test asks.
    name = min(ARCHITECTURES, key=lambda name: (after[name] - min(MAX_LOSS, before[name] / 2), after[name]))
    return Trained(parameters, ARCHITECTURES[name], before[name], after[name])


def head_of_its_own(model, reference: GPT, data: torch.Tensor) -> bool:
    """The model's parameters fit the contract's GPT, but for what its lm_head does otherwise, a
    mistake the GPT part names and charges: a bias (True: it is measured with it, from the state
    dict), or a weight tied to the embedding (its state dict holds the one matrix under both
    names, so the measured model is the tied one). Else its names fail here."""
    try:
        expect_contract_parameters("your GPT", materialized(model, lambda: model(windows(data)[0])), reference,
                                   names_hint=variants.PARAMETERS_DO_NOT_FIT, shape_hint=variants.PARAMETERS_DO_NOT_FIT,
                                   ignore=("lm_head.bias",))
    except CheckFailed:
        got = model.inspect()["parameters"]
        if not (set(dict(reference.named_parameters())) - set(got) == {"lm_head.weight"} and tied(model)):
            raise
    return "lm_head.bias" in model.inspect()["parameters"]


@pytest.mark.part("end_to_end", points=3)
def test_training_your_gpt_lowers_the_loss(trained):
    if not trained.after < min(MAX_LOSS, trained.before / 2):
        raise CheckFailed(f"after {STEPS} AdamW steps on the corpus, the loss the grader measured with your trained "
                          f"parameters went from {trained.before:.3f} to {trained.after:.3f}; expected below "
                          f"{min(MAX_LOSS, trained.before / 2):.3f}", variants.LOSS_DOES_NOT_FALL)


@pytest.mark.part("end_to_end", points=2)
def test_the_trained_gpt_continues_the_pattern(trained, device):
    idx = encode("h", device).view(1, 1)
    with torch.no_grad():
        for _ in range(CONTINUATION):
            logits = variants.gpt_from_parameters(idx[:, -CONTEXT:], trained.parameters, **trained.architecture)
            idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    text = "".join(CHARS[i] for i in idx[0].tolist())
    want = CORPUS[:CONTINUATION + 1]
    if text != want:
        raise CheckFailed(f"greedy decoding from 'h' with your trained parameters gave {text!r}, expected {want!r}",
                          variants.DOES_NOT_CONTINUE)
