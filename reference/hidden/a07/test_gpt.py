from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F

from grader.suite import (
    CheckFailed,
    Piece,
    StudentError,
    black_box,
    diagnosing,
    expect_close,
    expect_computes_with,
    expect_contract_parameters,
    expect_follows_device,
    expect_gradients,
    expect_objects,
    expect_raises,
    expect_replaced_pieces_written,
    expect_tensor,
    expect_wiring,
    in_eval_mode,
    materialized,
    noting_stock,
    without_unexpected_biases,
)
from reference.gpt import GPT
from reference.hidden.a07 import helpers, variants
from reference.hidden.a07.conftest import (
    CONTEXT,
    GPT_ARGS,
    HELPERS_SOURCE,
    NUM_LAYERS,
    PIECE_CLASSES,
    SHAPE_HINT,
    VOCAB,
    graded_gpt,
)

pytestmark = pytest.mark.part("GPT")

# Embeddings, 2 blocks, a LayerNorm and the head in float32: the reference is within ~1e-6
# of a float64 run (logits up to ~2); the mistakes differ by more than 1e-1.
ATOL, RTOL = 1e-4, 1e-4
NAMES = ("token_embedding, position_embedding (nn.Embedding), blocks (nn.ModuleList of Block), ln_f "
         "(nn.LayerNorm), lm_head (nn.Linear(d_model, vocab_size, bias=False))")


def own_modules(model, reference: GPT) -> dict:
    """The student's blocks as black boxes (each result checked against the reference's block);
    embeddings, ln_f and lm_head hold the same weights as the reference's, so the reference's serve."""
    blocks = model.attr("blocks")
    return dict(token_embedding=reference.token_embedding, position_embedding=reference.position_embedding,
                blocks=[black_box(blocks.method("__getitem__", i), reference.blocks[i]) for i in range(NUM_LAYERS)],
                ln_f=reference.ln_f, lm_head=reference.lm_head)


def tied(model) -> bool:
    """Whether the model's lm_head.weight is its token_embedding.weight: its state dict (the
    student process's word, enough to name a failure) holds one matrix under both names."""
    try:
        state = model.method("state_dict")
    except StudentError:
        return False
    embedding, head = (state.get(name) if isinstance(state, dict) else None
                       for name in ("token_embedding.weight", "lm_head.weight"))
    return (isinstance(embedding, torch.Tensor) and isinstance(head, torch.Tensor) and embedding.shape == head.shape
            and torch.equal(embedding, head))


@contextmanager
def naming_tying(model) -> Iterator[None]:
    """A check that fails on a tied model (one matrix cannot hold the reference's two) says so."""
    try:
        yield
    except CheckFailed as failure:
        if variants.WEIGHT_TYING not in (failure.hint or "") and tied(model):
            raise CheckFailed(failure.message, variants.WEIGHT_TYING, failure.flags) from None
        raise


def logits_of(what: str, out, batch: int, length: int) -> torch.Tensor:
    """The logits of forward's (logits, loss), named when they come back flattened or cut to the last position."""
    if not (isinstance(out, tuple) and len(out) == 2):
        hint = "forward returns a pair (logits, loss), loss None without targets"
        raise CheckFailed(f"{what}: expected (logits, loss), got {type(out).__name__}", hint)
    logits = out[0]
    hint = None
    if isinstance(logits, torch.Tensor) and tuple(logits.shape) == (batch * length, VOCAB) and length > 1:
        hint = variants.LOGITS_FLATTENED
    elif isinstance(logits, torch.Tensor) and tuple(logits.shape) == (batch, 1, VOCAB) and length > 1:
        hint = variants.LAST_POSITION_ONLY
    return expect_tensor(f"{what} logits", logits, shape=(batch, length, VOCAB), hint=hint)


def expect_gpt(what: str, model, reference: GPT, idx: torch.Tensor, targets: torch.Tensor | None = None) -> None:
    """Logits against the reference, else against the contract's wiring of the student's own blocks."""
    modules = own_modules(model, reference)
    with torch.no_grad():
        inputs = [reference.token_embedding(idx) + reference.position_embedding(torch.arange(idx.size(1),
                                                                                              device=idx.device))]
        for block in reference.blocks:
            inputs.append(block(inputs[-1]))
    pieces = [Piece("Block", f"blocks[{i}]", "the Block part", lambda b=b, x=x: b(x), lambda i=i, x=x: reference.blocks[i](x))
              for i, (b, x) in enumerate(zip(modules["blocks"], inputs))]
    with noting_stock(model), diagnosing(pieces):
        out = model(idx) if targets is None else model(idx, targets)
        logits = logits_of(what, out, *idx.shape)
        mistakes = {**variants.gpt_mistakes(idx, modules),
                     **variants.tied_mistakes(idx, modules, reference.lm_head.weight.detach())}
        try:
            expect_wiring(what, logits, reference(idx)[0], lambda: variants.gpt(idx, modules), atol=ATOL, rtol=RTOL,
                          mistakes=mistakes, pieces=pieces,
                          unusable_hint=variants.PIECES_UNUSABLE, fallback_hint=variants.GPT_WIRING)
        except CheckFailed as failure:
            # A tied GPT whose logits are the contract's wiring with its one matrix: its wiring is
            # right, and the tying costs points once, in the names check.
            if not ((failure.hint or "").startswith(variants.WEIGHT_TYING) and tied(model)):
                raise
    return out


def test_gpt_has_the_contract_parameters(student, new_for_names, new_graded, reference_gpt, make_tokens):
    idx = make_tokens(2, CONTEXT, seed=600)
    expect_replaced_pieces_written(f"GPT{GPT_ARGS}", student, student.new("GPT", *GPT_ARGS), reference_gpt,
                                   PIECE_CLASSES, names_hint=f"use the contract's submodules: {NAMES}")
    model = new_for_names(reference_gpt, "GPT", *GPT_ARGS)
    with naming_tying(model):
        expect_contract_parameters(f"GPT{GPT_ARGS}", materialized(model, lambda: model(idx)), reference_gpt,
                                   names_hint=f"use the contract's submodules: {NAMES}", shape_hint=SHAPE_HINT,
                                   unexpected_hints={"lm_head.bias": variants.LM_HEAD_BIAS})
    model = in_eval_mode(without_unexpected_biases(new_graded(reference_gpt, "GPT", *GPT_ARGS), reference_gpt))
    expect_computes_with("GPT(idx)", model, reference_gpt, lambda: model(idx)[0], pieces=("blocks",),
                         unused={"ln_f": variants.NO_FINAL_NORM, "position_embedding": variants.NO_POSITIONS})


def test_gpt_forward_shape_and_no_loss_without_targets(student_gpt, make_tokens):
    out = student_gpt(make_tokens(2, CONTEXT, seed=601))
    logits_of(f"GPT(idx: (2, {CONTEXT}))", out, 2, CONTEXT)
    if out[1] is not None:
        raise CheckFailed(f"GPT(idx: (2, {CONTEXT})) without targets: the loss is not None",
                          "forward returns (logits, None) when targets is None")


@pytest.mark.part("GPT", points=4)
def test_gpt_logits(student_gpt, reference_gpt, make_tokens):
    expect_gpt("GPT(idx)", student_gpt, reference_gpt, make_tokens(2, CONTEXT, seed=602))


@pytest.mark.part("GPT", points=2)
def test_gpt_shorter_than_the_context(new_graded, reference_gpt, own_else_stock_pieces, make_tokens):
    # Else with stock blocks: a Head that cannot take T < context_length costs points in Head;
    # the GPT's own part is the positions it adds, position_embedding(arange(T)).
    def check(model, args, stock):
        expect_gpt(f"GPT(idx: (2, {args[0].size(1)})){' with stock blocks' if stock else ''}", model, reference_gpt,
                   *args)

    own_else_stock_pieces(check, lambda: graded_gpt(new_graded, reference_gpt), reference_gpt,
                          [f"blocks.{i}" for i in range(NUM_LAYERS)],
                          [(make_tokens(2, length, seed=seed),) for length, seed in ((5, 603), (1, 604))])


@pytest.mark.part("GPT", points=2)
def test_gpt_loss_is_the_mean_cross_entropy(student_gpt, reference_gpt, make_tokens):
    idx, targets = make_tokens(2, CONTEXT, seed=605), make_tokens(2, CONTEXT, seed=606)
    out = expect_gpt("GPT(idx, targets)", student_gpt, reference_gpt, idx, targets)
    loss = out[1]
    if not (isinstance(loss, torch.Tensor) and loss.numel() == 1):
        raise CheckFailed(f"GPT(idx, targets): the loss is {type(loss).__name__}, expected a 0-dim tensor",
                          variants.LOSS_WRONG)
    # Computed here from the logits the student's model returned: its own loss must be that.
    want = F.cross_entropy(out[0].reshape(-1, VOCAB).float(), targets.reshape(-1))
    expect_close("GPT(idx, targets) loss", loss.reshape(()).float(), want, atol=1e-5, rtol=1e-5,
                 mistakes={**variants.loss_mistakes(out[0], targets), variants.LOSS_WRONG: loss.reshape(()).float()})


def test_gpt_rejects_a_sequence_longer_than_the_context(student_gpt, make_tokens):
    idx = make_tokens(1, CONTEXT + 1, seed=607)
    expect_raises(ValueError, f"GPT(idx) with T = {CONTEXT + 1} > context_length = {CONTEXT}",
                  lambda: student_gpt(idx))


def test_gpt_knows_its_context_length(student_gpt):
    got = student_gpt.attr("context_length")
    if not (type(got) is int and got == CONTEXT):  # a tensor or a float of the student's choosing: not compared
        raise CheckFailed(f"GPT.context_length is {got!r}, expected {CONTEXT}",
                          "store the constructor's context_length as self.context_length (generate reads it)")


def test_gpt_dropout_is_off_in_eval_mode(new_graded, reference_gpt, make_tokens):
    model = in_eval_mode(without_unexpected_biases(new_graded(reference_gpt, "GPT", *GPT_ARGS, dropout=0.5),
                                                   reference_gpt))
    expect_gpt("GPT(dropout=0.5) in eval mode", model, reference_gpt, make_tokens(2, CONTEXT, seed=608))


def test_gpt_gradients_reach_every_submodule(student, student_gpt, reference_gpt, make_tokens, make_input):
    # Seen through its logits: the check's loss is an inner product with one output tensor.
    (logits_only,) = expect_objects("the grader's LogitsOnly(your GPT) in your process",
                                    student.define("helpers", HELPERS_SOURCE).method("LogitsOnly", student_gpt), 1)
    with naming_tying(student_gpt):
        expect_gradients("GPT", logits_only, helpers.LogitsOnly(reference_gpt), (make_tokens(2, CONTEXT, seed=609),),
                         make_input(2, CONTEXT, VOCAB, seed=610), inputs={})


def test_gpt_follows_the_input_device(student, make_tokens, device):
    idx = make_tokens(1, CONTEXT, seed=611)

    def output_on(where):
        model = student.new("GPT", *GPT_ARGS)
        model.method("to", where)
        out = model(idx.to(where))
        return out[0] if isinstance(out, tuple) and out else out

    expect_follows_device("GPT(idx) logits", output_on, device, shape=(1, CONTEXT, VOCAB))
