"""What assignment 07's suite computes on the trusted side, and the models it hands to generate.

- ``variants.gpt_from_parameters`` is the reference GPT, computed from its parameters; with
  each architecture mistake it is the GPT of the mutant that makes that mistake, so end_to_end
  measures a model in the architecture it was trained in (a mistake costs points once);
- the parameters generate's tests choose make the contract's GPT give the chosen table, and
  the stock GPT that stands in for a student's broken GPT computes what the reference does;
- the gradients test's model shows whether autograd recorded, and nothing else.
"""

from __future__ import annotations

import pytest
import torch

from grader.suite import randomize_norms
from reference import as_submission
from reference.gpt import GPT
from reference.hidden.a07 import helpers, mutants, stock, variants
from reference.hidden.a07 import test_generate as generate_tests
from tests.conftest import mutant

ARGS = (11, 16, 2, 2, 8)  # vocabulary, d_model, heads, layers, context
# The mutant that makes each architecture mistake; the two without one are checked by hand below.
MUTANT_OF = {
    variants.SCALE_BY_INPUT_WIDTH: "scaled by d_model", variants.NO_SCALE: "not scaled",
    variants.FUTURE_VISIBLE: "no causal mask", variants.MASK_FILL_NOT_NEGATIVE: "mask filled with zero",
    variants.NO_PROJECTION: "no output projection", variants.RELU: "ReLU", variants.TANH_GELU: "tanh GELU",
    variants.POST_NORM: "post-norm", variants.MISSING_RESIDUAL: "no residual around the attention",
    variants.NO_FINAL_NORM: "no final LayerNorm", variants.NO_POSITIONS: "positions not added",
    variants.MISSING_RESIDUAL_MLP: "no residual around the MLP",
    f"{variants.PROJECTION_REUSED} (queries with the value projection)": "queries from the value projection",
}


def _model(gpt_class) -> torch.nn.Module:
    torch.manual_seed(0)
    return randomize_norms(gpt_class(*ARGS), seed=1).eval()


def _gpt_class(source: str):
    namespace: dict = {}
    exec(compile(source, "submission", "exec"), namespace)
    return namespace["GPT"]


def _parameters(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach() for name, p in model.named_parameters()}


IDX = torch.randint(0, ARGS[0], (3, ARGS[4]), generator=torch.Generator().manual_seed(2))


def test_gpt_from_parameters_is_the_reference_gpt():
    model = _model(GPT)
    with torch.no_grad():
        assert torch.allclose(variants.gpt_from_parameters(IDX, _parameters(model)), model(IDX)[0], atol=1e-6)


@pytest.mark.parametrize("hint", MUTANT_OF, ids=lambda hint: MUTANT_OF[hint])
def test_each_architecture_mistake_is_its_mutants_gpt(hint):
    (old, new), _ = mutants.MUTANTS[MUTANT_OF[hint]]
    model = _model(_gpt_class(mutant(as_submission("gpt"), old, new)))
    reference = _model(GPT)
    architecture = variants.ARCHITECTURE_MISTAKES[hint]
    with torch.no_grad():
        got = variants.gpt_from_parameters(IDX, _parameters(model), **architecture)
        assert torch.allclose(got, model(IDX)[0], atol=1e-6)
        assert not torch.allclose(got, reference(IDX)[0], atol=1e-5)  # a different model (tanh GELU: by ~1e-4)


def test_the_architecture_mistakes_without_a_mutant_differ_from_the_contract():
    parameters = _parameters(_model(GPT))
    with torch.no_grad():
        reference = variants.gpt_from_parameters(IDX, parameters)
        for hint in variants.ARCHITECTURE_MISTAKES.keys() - MUTANT_OF.keys():
            other = variants.gpt_from_parameters(IDX, parameters, **variants.ARCHITECTURE_MISTAKES[hint])
            assert not torch.allclose(other, reference, atol=1e-5), hint


@pytest.mark.parametrize("sharpness", [1.0, generate_tests.SHARP])
def test_generates_parameters_make_the_contracts_gpt_give_the_table_after_each_token(sharpness):
    model = generate_tests.reference_gpt(sharpness, torch.device("cpu"))
    idx = torch.randint(0, generate_tests.VOCAB, (20, generate_tests.CONTEXT),
                        generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        logits = model(idx)[0]
    assert torch.allclose(logits, generate_tests.table(sharpness)[idx], atol=1e-4 * sharpness)


def test_the_stock_gpt_computes_what_the_reference_does():
    reference, twin = _model(GPT), stock.GPT(*ARGS).eval()
    twin.load_state_dict(_parameters(reference), strict=False)  # its own causal masks
    with torch.no_grad():
        assert torch.allclose(twin(IDX)[0], reference(IDX)[0], atol=1e-5)
    with pytest.raises(ValueError):
        twin(torch.zeros(1, ARGS[4] + 1, dtype=torch.long))


def test_the_gradients_test_model_shows_only_whether_autograd_records():
    plain = _model(GPT)
    model = helpers.showing_gradients(_model(GPT))
    # The model generate is given: of its own class, its parameters as they were.
    assert type(model) is GPT
    assert [name for name, _ in model.named_parameters()] == [name for name, _ in plain.named_parameters()]
    with torch.no_grad():
        assert torch.equal(model(IDX)[0], plain(IDX)[0])
    assert bool((model(IDX)[0].argmax(-1) == ARGS[0] - 1).all())
    model.requires_grad_(False)  # autograd records nothing for it, as under no_grad
    assert torch.equal(model(IDX)[0], plain(IDX)[0].detach())
