"""generate, checked with a scripted model whose logits the test chooses (``scripted.py``).

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

from pathlib import Path

import pytest
import torch

from grader.suite import CheckFailed, StudentException, expect_equal, expect_raises, expect_token_ids
from reference.hidden.a07 import scripted, variants

pytestmark = pytest.mark.part("generate")

VOCAB, CONTEXT = 6, 4
N, Z = 4000, 5.5
BASE = torch.tensor([2.0, 1.2, 0.5, 0.0, -0.7, -1.5])
SCRIPTED_SOURCE = Path(scripted.__file__).read_text(encoding="utf-8")


def table(device, sharpness: float = 1.0) -> torch.Tensor:
    """Row b: the last position's logits after token b; its arg-max is b + 1 (mod V), so
    greedy decoding counts up. With ``sharpness`` 30 the arg-max has all but 1e-10 of the
    probability: sampling is greedy decoding whatever the sampler, so the tests of cropping,
    eval mode and gradients depend on neither top_k nor the random numbers."""
    return sharpness * torch.stack([BASE.roll(b + 1) for b in range(VOCAB)]).to(device)


SHARP = 30.0


@pytest.fixture
def remote(student):
    return student.define("scripted", SCRIPTED_SOURCE)


@pytest.fixture
def model(remote, device):
    return remote.method("make_model", table(device), CONTEXT)


@pytest.fixture
def sharp_model(remote, device):
    return lambda **kwargs: remote.method("make_model", table(device, SHARP), CONTEXT, **kwargs)


@pytest.fixture
def generator(remote, device):
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


def greedy(idx: torch.Tensor, new: int, window=lambda idx: idx[:, -CONTEXT:]) -> torch.Tensor:
    """Arg-max decoding with the scripted model, here; ``window`` chooses what it is fed."""
    model = scripted.make_model(table(idx.device), CONTEXT)
    with torch.no_grad():
        for _ in range(new):
            logits, _ = model(window(idx))
            idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx


def expect_distribution(what: str, samples: torch.Tensor, probs: torch.Tensor,
                        mistakes: list[tuple[str, torch.Tensor]]) -> None:
    """The samples (N,) follow ``probs`` (V,) within the bound above; else name the first
    mistake whose distribution they follow."""
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
    logits = table(device)
    expect_distribution(what, generated(what, tokens, idx, 1)[:, 0],
                        variants.sampling_probabilities(logits[last], temperature, top_k),
                        variants.sampling_mistakes(logits[last], logits[first].roll(1), temperature, top_k))


def test_generate_shape_and_input_first(student, model, generator, device):
    idx = torch.tensor([[0, 1, 2], [3, 4, 5]], device=device)
    generated("generate(model, idx: (2, 3), 5)", student.call("generate", model, idx, 5, generator=generator(1)),
              idx, 5)


@pytest.mark.part("generate", points=3)
def test_generate_samples_the_softmax_of_the_last_logits(student, model, generator, device):
    expect_samples(student, model, generator, device, temperature=1.0, top_k=None, seed=2)


@pytest.mark.part("generate", points=2)
def test_generate_divides_the_logits_by_temperature(student, model, generator, device):
    expect_samples(student, model, generator, device, temperature=0.5, top_k=None, seed=3)


@pytest.mark.part("generate", points=2)
def test_generate_keeps_the_top_k(student, model, generator, device):
    expect_samples(student, model, generator, device, temperature=1.0, top_k=3, seed=4)


def test_generate_top_k_with_temperature(student, model, generator, device):
    expect_samples(student, model, generator, device, temperature=2.0, top_k=2, seed=5)


def test_generate_top_k_larger_than_the_vocabulary_means_all(student, model, generator, device):
    expect_samples(student, model, generator, device, temperature=1.0, top_k=VOCAB + 10, seed=6)


@pytest.mark.part("generate", points=2)
def test_generate_greedy_is_argmax_decoding(student, model, generator, device):
    idx = torch.tensor([[0], [3]], device=device)
    what = "generate(model, idx: (2, 1), 8, top_k=1)"
    tokens = student.call("generate", model, idx, 8, top_k=1, generator=generator(7))
    generated(what, tokens, idx, 8)
    if not torch.equal(tokens, greedy(idx, 8)):
        raise CheckFailed(f"{what}: {tokens.tolist()}, expected the arg-max decoding {greedy(idx, 8).tolist()}",
                          variants.TOP_K_WRONG_SET)


@pytest.mark.part("generate", points=2)
def test_generate_crops_the_context(student, sharp_model, generator, device):
    idx = torch.tensor([[0, 1, 2], [5, 0, 1]], device=device)  # grows past CONTEXT = 4 on its second step
    what = f"generate(model with context_length={CONTEXT}, idx: (2, 3), 6)"
    try:
        tokens = student.call("generate", sharp_model(), idx, 6, generator=generator(8))
    except StudentException as exc:
        if exc.type_name == "ValueError" and "exceeds context_length" in exc.message:
            raise CheckFailed(f"{what}: the model raised {exc.message}", variants.CONTEXT_NOT_CROPPED) from None
        raise
    generated(what, tokens, idx, 6)
    wrong_window = greedy(idx, 6, window=lambda idx: idx[:, :CONTEXT])
    if not torch.equal(tokens, greedy(idx, 6)) and torch.equal(tokens, wrong_window):
        raise CheckFailed(f"{what}: each step fed the first {CONTEXT} tokens", variants.CONTEXT_NOT_CROPPED)
    expect_equal(what, tokens, greedy(idx, 6))


def test_generate_same_generator_seed_same_tokens(student, model, generator, device):
    idx = torch.zeros(64, 1, dtype=torch.long, device=device)
    runs = [student.call("generate", model, idx, 4, generator=generator(seed)) for seed in (9, 9, 10)]
    for run in runs:
        generated("generate(model, idx: (64, 1), 4)", run, idx, 4)
    if not torch.equal(runs[0], runs[1]):
        raise CheckFailed("generate with two generators seeded 9 gave different tokens", variants.GENERATOR_IGNORED)
    if torch.equal(runs[0], runs[2]):  # 256 draws alike: about 0.33 ** 256 for a sampler that uses the seed
        raise CheckFailed("generate gave the same tokens with generators seeded 9 and 10",
                          variants.GENERATOR_IGNORED)


def test_generate_puts_the_model_in_eval_mode(student, sharp_model, generator, device):
    model = sharp_model(strict="training")
    model.method("train")
    idx = torch.tensor([[1]], device=device)
    tokens = student.call("generate", model, idx, 3, generator=generator(11))
    generated("generate(a model in training mode, idx: (1, 1), 3)", tokens, idx, 3)
    if not torch.equal(tokens, greedy(idx, 3)):
        raise CheckFailed("generate(a model in training mode, ...): the tokens are the training-mode model's",
                          variants.NOT_EVAL_MODE)


def test_generate_runs_without_gradients(student, sharp_model, generator, device):
    model = sharp_model(strict="gradients")
    idx = torch.tensor([[1]], device=device)
    tokens = student.call("generate", model, idx, 3, generator=generator(12))
    generated("generate(model, idx: (1, 1), 3)", tokens, idx, 3)
    if not torch.equal(tokens, greedy(idx, 3)):
        raise CheckFailed("generate(model, ...): the model saw gradients enabled", variants.GRADIENTS_ON)


@pytest.mark.parametrize("options", [dict(temperature=0.0), dict(temperature=-1.0), dict(top_k=0)])
def test_generate_rejects_bad_arguments(student, model, device, options):
    idx = torch.tensor([[1]], device=device)
    expect_raises(ValueError, f"generate(model, idx, 2, {', '.join(f'{k}={v}' for k, v in options.items())})",
                  lambda: student.call("generate", model, idx, 2, **options))
