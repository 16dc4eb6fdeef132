"""generate, checked with a model whose logits the test chooses through its parameters.

The model generate receives is what a real caller passes: an instance of the student's own
GPT class, built as a caller builds it, holding parameters chosen here (through the
contract's names). Nothing steers it but those values and its real modes: no helper class,
no extra attribute, nothing a generate could recognise as a test and switch off. A GPT of
no blocks (a bigram model) whose token embeddings are orthonormal and mean-free and whose
positions are zero makes the logits after token b any chosen row b of a table, whatever the
student's blocks, final LayerNorm or positions do; the expected next-token distributions
are computed here by the reference GPT holding the same parameters.

A mistake in the student's GPT must cost points in GPT only: when the student's GPT does not
compute what the contract's GPT computes with these parameters (it raises, its names do not
take them, its values or its ``context_length`` differ, or it does not refuse a sequence
longer than its context), generate is graded with the stock GPT (``stock.py``), the
contract's GPT written for the grader, instead. Whether generate puts the model in eval mode
shows through dropout, as with any real model: the test uses the student's GPT when its
dropout changes its output, else the stock GPT, whose dropout acts on the embeddings.
Whether generate runs without gradients shows in no real model's values: that test alone
uses a model no caller has: the same GPT (the student's, else the stock one), its instance's
forward wrapped so that its logits put all the probability on the last token while autograd
records (``helpers.showing_gradients``); where the student's GPT breaks so wrapped, the stock
one decides.

Nothing here depends on the order in which random numbers are drawn: a distribution is
checked on many samples at once (N rows of one call, one new token each), greedy decoding
(top_k=1) must equal the arg-max decoding computed here exactly, and the same generator seed
must give the same tokens twice.

The distribution bound: each token's frequency f over N samples must be within
Z * sqrt(p (1 - p) / N) + 1/N of its probability p. With Z = 5.5 a correct sampler fails
one token's bound with probability below 4e-8 (normal approximation; N p >= 40 here), so a
check of V = 6 tokens fails a correct generate with probability below 3e-7. A token outside
the kept set fails at once. The mistakes' distributions differ from the contract's by more
than 0.15 on some token, 3.5 times the widest bound (0.043 at N = 4000).
"""

import math
from functools import cache

import pytest
import torch

from grader.suite import (
    CheckFailed,
    StudentError,
    StudentException,
    expect_equal,
    expect_raises,
    expect_token_ids,
    is_close,
    source_defining,
)
from reference.gpt import GPT
from reference.hidden.a07 import variants
from reference.hidden.a07.conftest import HELPERS_SOURCE, STOCK_SOURCE

pytestmark = pytest.mark.part("generate")

VOCAB, CONTEXT, D_MODEL, HEADS = 6, 4, 16, 2
N, Z = 4000, 5.5
BASE = torch.tensor([2.0, 1.2, 0.5, 0.0, -0.7, -1.5])
# With the sharp table the arg-max has all but 1e-10 of the probability: sampling is greedy
# decoding whatever the sampler, so the tests of cropping, eval mode and gradients depend on
# neither top_k nor the random numbers.
SHARP = 30.0
# Dropout 0.5 on the stock GPT's embeddings changes the arg-max of the sharp table in about
# 27% of the rows (measured for every token): 256 rows all agree with eval mode by chance
# with probability below 1e-30.
DROPOUT, EVAL_ROWS = 0.5, 256


def table(sharpness: float = 1.0) -> torch.Tensor:
    """Row b: the logits after token b; its arg-max is b + 1 (mod V), so greedy decoding counts up."""
    return sharpness * torch.stack([BASE.roll(b + 1) for b in range(VOCAB)])


@cache
def _directions() -> torch.Tensor:
    """(V, d_model): orthonormal rows, each orthogonal to the all-ones vector (mean 0)."""
    columns = torch.cat([torch.ones(D_MODEL, 1), torch.randn(D_MODEL, VOCAB, generator=torch.Generator().manual_seed(0))],
                        dim=1)
    return torch.linalg.qr(columns.double())[0][:, 1:].T.float()


def parameters(sharpness: float, device) -> dict[str, torch.Tensor]:
    """A GPT of no blocks whose logits after token b are ``table(sharpness)[b]``: token b's
    embedding has mean 0 and variance 1 (LayerNorm leaves it as it is) and lm_head maps it to
    row b; positions are zero (their absence changes nothing)."""
    directions = _directions()
    tensors = {"token_embedding.weight": math.sqrt(D_MODEL) * directions,
               "position_embedding.weight": torch.zeros(CONTEXT, D_MODEL),
               "ln_f.weight": torch.ones(D_MODEL), "ln_f.bias": torch.zeros(D_MODEL),
               "lm_head.weight": table(sharpness).T @ directions / math.sqrt(D_MODEL)}
    return {name: tensor.to(device) for name, tensor in tensors.items()}


@cache
def reference_gpt(sharpness: float, device: torch.device) -> GPT:
    """The contract's GPT holding the same parameters: what generate's model computes."""
    model = GPT(VOCAB, D_MODEL, HEADS, 0, CONTEXT).to(device)
    model.load_state_dict(parameters(sharpness, device))
    return model.eval()


def logits_after(idx: torch.Tensor, sharpness: float = 1.0) -> torch.Tensor:
    with torch.no_grad():
        return reference_gpt(sharpness, idx.device)(idx)[0]


def build(student, device, sharpness: float, *, kind: str = "own", dropout: float = 0.0):
    """The model handed to generate: the student's GPT (``kind`` "own") or the stock one
    ("GPT"), built as a caller builds it, holding the chosen parameters."""
    args = (VOCAB, D_MODEL, HEADS, 0, CONTEXT)
    if kind == "own":
        model = student.new("GPT", *args, dropout=dropout)
    else:
        model = student.define("stock", source_defining(STOCK_SOURCE, [kind]), answers=True).method(kind, *args,
                                                                                                    dropout=dropout)
    model.method("to", device)
    model.load_parameters(parameters(sharpness, device))
    return model


def _probe_windows(length: int, device) -> torch.Tensor:
    """Every token at the last position, after seeded prefixes of ``length - 1`` tokens."""
    idx = torch.randint(0, VOCAB, (2 * VOCAB, length), generator=torch.Generator().manual_seed(length))
    idx[:, -1] = torch.arange(VOCAB).repeat(2)
    return idx.to(device)


def _computes_as_the_contract(model, sharpness: float, device) -> bool:
    """The student's GPT, in eval mode, gives the contract's GPT's logits on windows of every
    length up to its context, says so in its context_length, and refuses a longer window."""
    model.method("eval")
    context_length = model.attr("context_length")
    if not (type(context_length) is int and context_length == CONTEXT):
        return False
    for length in range(1, CONTEXT + 1):
        idx = _probe_windows(length, device)
        out = model(idx)
        if not (isinstance(out, tuple) and len(out) == 2
                and is_close(out[0], logits_after(idx, sharpness), atol=1e-4, rtol=1e-4)):
            return False
    try:
        model(_probe_windows(CONTEXT + 1, device))
    except StudentException:
        return True
    return False


@pytest.fixture(scope="module")
def own_gpt_serves(student, device) -> bool:
    """Whether generate is graded with the student's own GPT (else the stock GPT)."""
    try:
        return all(_computes_as_the_contract(build(student, device, sharpness), sharpness, device)
                   for sharpness in (1.0, SHARP))
    except StudentError:
        return False


@pytest.fixture(scope="module")
def own_dropout_shows(student, device, own_gpt_serves) -> bool:
    """Whether the student's GPT with dropout, in training mode, changes the sharp arg-max in
    at least 5% of the rows (its dropout acts where it shows), so that the eval-mode test can
    use it."""
    if not own_gpt_serves:
        return False
    idx = torch.arange(VOCAB, device=device).repeat(EVAL_ROWS // VOCAB).view(-1, 1)
    try:
        model = build(student, device, SHARP, dropout=DROPOUT)
        model.method("train")
        student.define("helpers", HELPERS_SOURCE).method("seed", 0)
        out = model(idx)
    except StudentError:
        return False
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], torch.Tensor)
            and tuple(out[0].shape) == (idx.size(0), 1, VOCAB) and out[0].is_floating_point()):
        return False
    flipped = out[0][:, -1].argmax(-1) != logits_after(idx, SHARP)[:, -1].argmax(-1)
    return float(flipped.float().mean()) >= 0.05


@pytest.fixture
def make_model(student, device, own_gpt_serves):
    """make_model(sharpness=1.0, dropout=0.0): the model for one test, fresh."""
    def make(sharpness: float = 1.0, *, dropout: float = 0.0, kind: str | None = None):
        return build(student, device, sharpness, kind=kind or ("own" if own_gpt_serves else "GPT"), dropout=dropout)
    return make


@pytest.fixture
def generator(student, device):
    remote = student.define("helpers", HELPERS_SOURCE)
    return lambda seed: remote.method("make_generator", seed, str(device))


def generated(what: str, tokens, idx: torch.Tensor, new: int) -> torch.Tensor:
    """The new tokens of generate's output, once it is a LongTensor (B, T + new) of token ids
    of the vocabulary starting with idx: checked before anything is counted by them."""
    batch, length = idx.shape
    only_new = isinstance(tokens, torch.Tensor) and tuple(tokens.shape) == (batch, new)
    expect_token_ids(what, tokens, VOCAB, shape=(batch, length + new), device=idx.device,
                     hint=variants.PROMPT_NOT_KEPT if only_new else None)
    if not torch.equal(tokens[:, :length], idx):
        raise CheckFailed(f"{what}: the first {length} tokens of each row are not the input", variants.PROMPT_NOT_KEPT)
    return tokens[:, length:]


def greedy(idx: torch.Tensor, new: int, sharpness: float = 1.0,
           window=lambda idx: idx[:, -CONTEXT:]) -> torch.Tensor:
    """Arg-max decoding with the contract's GPT, here; ``window`` chooses what it is fed."""
    for _ in range(new):
        idx = torch.cat([idx, logits_after(window(idx), sharpness)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx


def expect_distribution(what: str, samples: torch.Tensor, probs: torch.Tensor,
                        mistakes: list[tuple[str, torch.Tensor]]) -> None:
    """The samples (N,), token ids of the vocabulary, follow ``probs`` (V,) within the bound
    above; else name the first mistake whose distribution they follow."""
    def follows(p: torch.Tensor) -> bool:
        p = p.double().cpu()
        freq = torch.bincount(samples.cpu(), minlength=p.numel()).double() / samples.numel()
        bound = Z * (p * (1 - p) / samples.numel()).sqrt() + 1.0 / samples.numel()
        return freq.numel() == p.numel() and bool(((freq - p).abs() <= bound).all()) and bool((freq[p == 0] == 0).all())

    if follows(probs):
        return
    freq = torch.bincount(samples.cpu(), minlength=probs.numel()).double() / samples.numel()
    shown = ", ".join(f"{token}: {f:.3f} (expected {p:.3f})" for token, (f, p) in enumerate(zip(freq, probs.cpu())))
    hint = next((hint for hint, p in mistakes if follows(p)), None)
    raise CheckFailed(f"{what}: the tokens' frequencies over {samples.numel()} samples are not the expected "
                      f"probabilities: {shown}", hint)


def expect_samples(student, model, generator, device, *, temperature: float, top_k: int | None, seed: int) -> None:
    # Two prompt tokens, so the other position's logits differ from the last one's.
    first, last = 2, 4
    idx = torch.tensor([[first, last]], device=device).repeat(N, 1)
    what = f"generate(model, idx: ({N}, 2), 1, temperature={temperature}, top_k={top_k})"
    try:
        tokens = student.call("generate", model, idx, 1, temperature=temperature, top_k=top_k,
                              generator=generator(seed))
    except StudentException as exc:
        if top_k is not None and top_k > VOCAB and "out of range" in exc.message:
            raise CheckFailed(f"{what}: {exc}", variants.TOP_K_LARGER_THAN_VOCAB) from None
        raise
    logits = logits_after(idx[:1])[0]  # (2, V): after the first token, after the last
    expect_distribution(what, generated(what, tokens, idx, 1)[:, 0],
                        variants.sampling_probabilities(logits[-1], temperature, top_k),
                        variants.sampling_mistakes(logits[-1], logits[0], temperature, top_k))


def test_generate_shape_and_input_first(student, make_model, generator, device):
    idx = torch.tensor([[0, 1, 2], [3, 4, 5]], device=device)
    generated("generate(model, idx: (2, 3), 5)",
              student.call("generate", make_model(), idx, 5, generator=generator(1)), idx, 5)


@pytest.mark.part("generate", points=3)
def test_generate_samples_the_softmax_of_the_last_logits(student, make_model, generator, device):
    expect_samples(student, make_model(), generator, device, temperature=1.0, top_k=None, seed=2)


@pytest.mark.part("generate", points=2)
def test_generate_divides_the_logits_by_temperature(student, make_model, generator, device):
    expect_samples(student, make_model(), generator, device, temperature=0.5, top_k=None, seed=3)


@pytest.mark.part("generate", points=2)
def test_generate_keeps_the_top_k(student, make_model, generator, device):
    expect_samples(student, make_model(), generator, device, temperature=1.0, top_k=3, seed=4)


def test_generate_top_k_with_temperature(student, make_model, generator, device):
    expect_samples(student, make_model(), generator, device, temperature=2.0, top_k=2, seed=5)


def test_generate_top_k_larger_than_the_vocabulary_means_all(student, make_model, generator, device):
    expect_samples(student, make_model(), generator, device, temperature=1.0, top_k=VOCAB + 10, seed=6)


@pytest.mark.part("generate", points=2)
def test_generate_greedy_is_argmax_decoding(student, make_model, generator, device):
    idx = torch.tensor([[0], [3]], device=device)
    what = "generate(model, idx: (2, 1), 8, top_k=1)"
    tokens = student.call("generate", make_model(), idx, 8, top_k=1, generator=generator(7))
    generated(what, tokens, idx, 8)
    if not torch.equal(tokens, greedy(idx, 8)):
        raise CheckFailed(f"{what}: {tokens.tolist()}, expected the arg-max decoding {greedy(idx, 8).tolist()}",
                          variants.TOP_K_WRONG_SET)


@pytest.mark.part("generate", points=2)
def test_generate_crops_the_context(student, make_model, generator, device):
    idx = torch.tensor([[0, 1, 2], [5, 0, 1]], device=device)  # grows past CONTEXT = 4 on its second step
    what = f"generate(model with context_length={CONTEXT}, idx: (2, 3), 6)"
    try:
        tokens = student.call("generate", make_model(SHARP), idx, 6, generator=generator(8))
    except StudentException as exc:
        try:  # one new token never outgrows the context: if that runs, the longer sequence was the trouble
            student.call("generate", make_model(SHARP), idx, 1, generator=generator(8))
        except StudentError:
            raise exc from None
        raise CheckFailed(f"{what}: it raised once the sequence outgrew the model's context, {exc.type_name}: "
                          f"{exc.message}", variants.CONTEXT_NOT_CROPPED) from None
    generated(what, tokens, idx, 6)
    wrong_window = greedy(idx, 6, SHARP, window=lambda idx: idx[:, :CONTEXT])
    if not torch.equal(tokens, greedy(idx, 6, SHARP)) and torch.equal(tokens, wrong_window):
        raise CheckFailed(f"{what}: each step fed the first {CONTEXT} tokens", variants.CONTEXT_NOT_CROPPED)
    expect_equal(what, tokens, greedy(idx, 6, SHARP))


def test_generate_same_generator_seed_same_tokens(student, make_model, generator, device):
    idx = torch.zeros(64, 1, dtype=torch.long, device=device)
    runs = [student.call("generate", make_model(), idx, 4, generator=generator(seed)) for seed in (9, 9, 10)]
    for run in runs:
        generated("generate(model, idx: (64, 1), 4)", run, idx, 4)
    if not torch.equal(runs[0], runs[1]):
        raise CheckFailed("generate with two generators seeded 9 gave different tokens", variants.GENERATOR_IGNORED)
    if torch.equal(runs[0], runs[2]):  # 256 draws alike: about 0.33 ** 256 for a sampler that uses the seed
        raise CheckFailed("generate gave the same tokens with generators seeded 9 and 10",
                          variants.GENERATOR_IGNORED)


def test_generate_puts_the_model_in_eval_mode(student, make_model, own_dropout_shows, generator, device):
    model = make_model(SHARP, dropout=DROPOUT, kind=None if own_dropout_shows else "GPT")
    model.method("train")
    idx = torch.tensor([[1]], device=device).repeat(EVAL_ROWS, 1)
    what = f"generate(a model with dropout={DROPOUT} in training mode, idx: ({EVAL_ROWS}, 1), 1)"
    tokens = student.call("generate", model, idx, 1, generator=generator(11))
    generated(what, tokens, idx, 1)
    if not torch.equal(tokens, greedy(idx, 1, SHARP)):
        raise CheckFailed(f"{what}: the tokens are not the eval-mode model's", variants.NOT_EVAL_MODE)


def test_generate_runs_without_gradients(student, make_model, own_gpt_serves, generator, device):
    idx = torch.tensor([[1], [3]], device=device)

    def tokens_with(kind: str):
        model = student.define("helpers", HELPERS_SOURCE).method("showing_gradients", make_model(SHARP, kind=kind))
        return student.call("generate", model, idx, 1, generator=generator(12))

    try:
        tokens = tokens_with("own" if own_gpt_serves else "GPT")
    except StudentError:
        if not own_gpt_serves:
            raise
        tokens = tokens_with("GPT")  # a GPT that breaks with its forward wrapped: the stock one decides
    what = "generate(model, idx: (2, 1), 1)"
    generated(what, tokens, idx, 1)
    if not torch.equal(tokens, greedy(idx, 1, SHARP)):
        raise CheckFailed(f"{what}: the model saw gradients enabled", variants.GRADIENTS_ON)


@pytest.mark.parametrize("options", [dict(temperature=0.0), dict(temperature=-1.0), dict(top_k=0)])
def test_generate_rejects_bad_arguments(student, make_model, device, options):
    idx = torch.tensor([[1]], device=device)
    model = make_model()
    expect_raises(ValueError, f"generate(model, idx, 2, {', '.join(f'{k}={v}' for k, v in options.items())})",
                  lambda: student.call("generate", model, idx, 2, **options))
