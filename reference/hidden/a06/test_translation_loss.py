import pytest
import torch

from grader.suite import (
    CheckFailed,
    StudentException,
    expect_close,
    expect_derivative,
    expect_raises,
    expect_tensor,
)
from reference.hidden.a06 import variants
from reference.hidden.a06.conftest import PAD, VOCAB
from reference.training import translation_loss

pytestmark = pytest.mark.part("translation_loss")

# A float32 mean of ~20 cross-entropies of order 1: correct implementations (F.cross_entropy,
# log_softmax + gather, a masked mean) agree to ~1e-6; the mistakes differ by > 1e-2.
ATOL, RTOL = 1e-5, 1e-5

# Rows of different lengths; T=6 differs from VOCAB so logits and labels cannot be confused.
LABELS = [[5, 9, 4, 2, 0, 0], [7, 2, 0, 0, 0, 0], [3, 8, 11, 6, 10, 2], [4, 4, 2, 0, 0, 0]]


@pytest.fixture
def make_logits(device):
    def make(*shape: int, seed: int, scale: float = 2.0) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        return (scale * torch.randn(*shape, generator=generator)).to(device)
    return make


@pytest.fixture
def labels(device):
    return torch.tensor(LABELS, device=device)


def test_translation_loss_is_a_scalar(student, make_logits, labels, device):
    got = student.call("translation_loss", make_logits(4, 6, VOCAB, seed=30), labels, PAD)
    expect_tensor("translation_loss(logits: (4, 6, 12), labels: (4, 6), pad_idx=0)", got, shape=(),
                  dtype=torch.float32, device=device,
                  hint=variants.NOT_A_SCALAR if isinstance(got, torch.Tensor) and got.dim() > 0 else None)


def test_translation_loss_without_padding(student, make_logits, device):
    logits = make_logits(3, 4, VOCAB, seed=31)
    labels = torch.tensor([[3, 4, 5, 2], [6, 7, 8, 2], [9, 10, 11, 2]], device=device)
    expect_close("translation_loss(logits, labels without padding, pad_idx=0)",
                 student.call("translation_loss", logits, labels, PAD), translation_loss(logits, labels, PAD),
                 atol=ATOL, rtol=RTOL, mistakes=variants.loss_mistakes(logits, labels, PAD))


@pytest.mark.part("translation_loss", points=3)
def test_translation_loss_ignores_padding(student, make_logits, labels):
    logits = make_logits(4, 6, VOCAB, seed=32)
    expect_close("translation_loss(logits, labels with padding, pad_idx=0)",
                 student.call("translation_loss", logits, labels, PAD), translation_loss(logits, labels, PAD),
                 atol=ATOL, rtol=RTOL, mistakes=variants.loss_mistakes(logits, labels, PAD))


def test_translation_loss_with_another_pad_index(student, make_logits, device):
    # pad_idx=3 and label 0 is a real word: the pad index must come from the argument.
    logits = make_logits(2, 5, VOCAB, seed=33)
    labels = torch.tensor([[0, 5, 2, 3, 3], [6, 0, 7, 2, 3]], device=device)
    expect_close("translation_loss(logits, labels, pad_idx=3)", student.call("translation_loss", logits, labels, 3),
                 translation_loss(logits, labels, 3), atol=ATOL, rtol=RTOL,
                 mistakes={variants.PAD_HARDCODED: lambda: translation_loss(logits, labels, PAD),
                           **variants.loss_mistakes(logits, labels, 3)})


@pytest.mark.part("translation_loss", points=2)
def test_translation_loss_label_smoothing(student, make_logits, labels):
    logits = make_logits(4, 6, VOCAB, seed=34)
    expect_close("translation_loss(logits, labels, pad_idx=0, label_smoothing=0.1)",
                 student.call("translation_loss", logits, labels, PAD, label_smoothing=0.1),
                 translation_loss(logits, labels, PAD, label_smoothing=0.1), atol=ATOL, rtol=RTOL,
                 mistakes=variants.loss_mistakes(logits, labels, PAD, 0.1))


def test_translation_loss_is_differentiable(student, make_logits, labels):
    # Whether the result requires grad is the student process's word; a gradient is checked.
    # backward() from the loss must reach the logits (a loss rebuilt from .item(), .tolist()
    # or numpy does not), and moving the logits along that gradient must change the loss the
    # same code computes at the rate the gradient's norm says.
    logits = make_logits(4, 6, VOCAB, seed=35).requires_grad_(True)
    what = "translation_loss(logits that require grad, labels, pad_idx=0)"
    expect_tensor(what, student.call("translation_loss", logits, labels, PAD), shape=())
    try:
        grad = student.backward("translation_loss", logits, labels, PAD,
                                grad_output=torch.ones((), device=logits.device)).input_grads[0]
    except StudentException as exc:
        raise CheckFailed(f"{what}: loss.backward() failed: {exc.message}", variants.NOT_DIFFERENTIABLE) from None
    if not (isinstance(grad, torch.Tensor) and grad.shape == logits.shape and bool(torch.isfinite(grad).all())
            and bool(grad.abs().sum() > 0)):
        raise CheckFailed(f"{what}: loss.backward() gives the logits no gradient", variants.NOT_DIFFERENTIABLE)
    norm = float(grad.double().norm())
    direction = (grad / norm).to(logits.dtype)
    expect_derivative(f"{what}: the gradient w.r.t. the logits", norm,
                      lambda t: as_float(student.call("translation_loss", logits.detach() + t * direction, labels, PAD)),
                      step=1e-2, hint=variants.NOT_DIFFERENTIABLE)


def as_float(loss) -> float:
    return float(loss) if isinstance(loss, torch.Tensor) and loss.numel() == 1 else float("nan")


def test_translation_loss_batch_of_one_with_one_real_label(student, make_logits, device):
    logits = make_logits(1, 3, VOCAB, seed=36)
    labels = torch.tensor([[2, 0, 0]], device=device)
    expect_close("translation_loss(logits: (1, 3, 12), labels [[2, 0, 0]], pad_idx=0)",
                 student.call("translation_loss", logits, labels, PAD), translation_loss(logits, labels, PAD),
                 atol=ATOL, rtol=RTOL, mistakes=variants.loss_mistakes(logits, labels, PAD))


def test_translation_loss_rejects_mismatched_shapes(student, make_logits, labels):
    logits = make_logits(4, 5, VOCAB, seed=37)
    expect_raises(ValueError, "translation_loss(logits: (4, 5, 12), labels: (4, 6), pad_idx=0)",
                  lambda: student.call("translation_loss", logits, labels, PAD))
