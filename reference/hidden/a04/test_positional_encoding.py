import pytest
import torch

from grader.suite import (
    CheckFailed,
    buffer_of,
    DropoutHints,
    StudentError,
    StudentException,
    expect_close,
    expect_dropout,
    expect_follows_device,
    expect_new_draws,
    expect_no_dropout_at_zero,
    expect_raises,
    expect_tensor,
    in_eval_mode,
    is_close,
)
from reference.hidden.a04 import variants
from reference.hidden.a04.conftest import D_MODEL, MAX_LEN, TRAINING_HELPER
from reference.positions import sinusoidal_encoding

pytestmark = pytest.mark.part("PositionalEncoding")

# x + pe[:T] is one float32 addition: a correct module is exact up to ~1e-6 (a table
# computed in float32); the mistakes differ by ~1.
ATOL = 1e-5


def _module(student, device, **kwargs):
    """A new PositionalEncoding on ``device``, in eval mode: its values are graded without
    dropout, which is graded on its own (``test_pe_dropout_in_training_mode``)."""
    module = student.new("PositionalEncoding", D_MODEL, max_len=MAX_LEN, **kwargs)
    module.method("to", device)
    return in_eval_mode(module)


def _table_added(student, device) -> torch.Tensor | None:
    """The (MAX_LEN, D_MODEL) table a new module (no dropout) adds to its input, read off its
    output for zeros: what it computes, not what it says it holds. None if there is none."""
    module = _module(student, device)  # a stub raises here, and says it is one
    try:
        got = module(torch.zeros(1, MAX_LEN, D_MODEL, device=device))
    except StudentError as exc:
        if isinstance(exc, StudentException) and exc.stub:
            raise
        return None
    if isinstance(got, torch.Tensor) and got.is_floating_point() and tuple(got.shape) == (1, MAX_LEN, D_MODEL):
        return got[0].detach().float()
    return None


def _tables(student, device) -> list[torch.Tensor]:
    """The right answers for ``x + pe[:T]``: the reference table, and (part isolation: a
    wrong sinusoidal_encoding costs points in that part only) the table the student's own
    sinusoidal_encoding returns, which PositionalEncoding may hold. Never the table the
    module itself adds: a module that adds nothing, or a table of its own, is wrong here."""
    try:
        own = student.call("sinusoidal_encoding", MAX_LEN, D_MODEL)
    except StudentError:
        own = None
    if isinstance(own, torch.Tensor) and own.is_floating_point() and tuple(own.shape) == (MAX_LEN, D_MODEL) \
            and bool(torch.isfinite(own).all()):
        return [sinusoidal_encoding(MAX_LEN, D_MODEL).to(device), own.detach().float().to(device)]
    return [sinusoidal_encoding(MAX_LEN, D_MODEL).to(device)]


def _expect_the_buffer_is_added(module, x: torch.Tensor) -> torch.Tensor:
    """Which buffers a module has is the student process's word; what it computes is checked:
    loaded with one table as ``pe`` and then another, its output must change by the
    difference of their first T rows (whatever it does to x: that is graded elsewhere).
    Returns its output for ``x`` as it is left."""
    pe, load = buffer_of(module, "pe")
    if not (isinstance(pe, torch.Tensor) and pe.is_floating_point() and pe.numel() == MAX_LEN * D_MODEL):
        raise CheckFailed(f"PositionalEncoding's buffer pe: expected a float tensor of {MAX_LEN}x{D_MODEL} values",
                          variants.PE_NOT_REGISTERED)
    tables = [torch.randn(pe.shape, generator=torch.Generator().manual_seed(seed), dtype=pe.dtype).to(x.device)
              for seed in (47, 49)]
    outputs = []
    for table in tables:
        load(table)
        outputs.append(module(x))
    change = (tables[1] - tables[0]).reshape(MAX_LEN, D_MODEL)[: x.size(1)].to(x.dtype).expand_as(x)
    if not (all(isinstance(output, torch.Tensor) and output.shape == x.shape for output in outputs)
            and is_close(outputs[1] - outputs[0], change, atol=2 * ATOL)):
        raise CheckFailed("PositionalEncoding loaded with one table as pe, then another: its output did not change "
                          "by the difference of their first T rows", variants.PE_BUFFER_UNUSED)
    return outputs[1]


def _expect_sum(what, got, x, tables):
    if isinstance(got, torch.Tensor) and got.is_floating_point() and got.dtype != x.dtype:
        expect_tensor(what, got, dtype=x.dtype, hint=variants.PE_DTYPE)
    for table in tables:
        if is_close(got, variants.positional_encoding(x, table), atol=ATOL):
            return
    # A table of the module's own (not its sinusoidal_encoding's) with a layout mistake is named too.
    wrong_tables = {hint: (lambda table=table: variants.positional_encoding(x, table()))
                    for hint, table in variants.encoding_mistakes(MAX_LEN, D_MODEL).items()}
    expect_close(what, got, variants.positional_encoding(x, tables[0]), atol=ATOL,
                 mistakes={**variants.positional_encoding_mistakes(x, tables[-1]), **wrong_tables})


@pytest.mark.part("PositionalEncoding", points=2)
def test_pe_is_a_buffer_not_a_parameter(student, make_input, device):
    module = _module(student, device)
    info = module.inspect()
    if "pe" in info["parameters"]:
        raise CheckFailed("PositionalEncoding: pe is a parameter (it would be trained), expected a buffer",
                          variants.PE_PARAMETER)
    if "pe" not in info["buffers"]:
        raise CheckFailed(f"PositionalEncoding: no buffer named pe (buffers: {sorted(info['buffers'])})",
                          variants.PE_NOT_REGISTERED)
    if info["parameters"]:
        raise CheckFailed(f"PositionalEncoding has parameters {sorted(info['parameters'])}; expected none",
                          "the positional encoding is fixed: nothing in it is trained")
    # What the module says it has is checked by what it does: it adds the pe it loads, and a
    # training step (each parameter against its gradient) leaves its output as it was.
    x = make_input(2, 5, D_MODEL, seed=46)
    before = _expect_the_buffer_is_added(module, x)
    student.define("training", TRAINING_HELPER).method("step", module, x)
    if not is_close(module(x), before, atol=ATOL):
        raise CheckFailed("PositionalEncoding after one training step: its output changed, so pe was trained",
                          variants.PE_PARAMETER)


def test_pe_buffer_shape(student, make_input, device):
    # Its dtype is sinusoidal_encoding's business; the output's dtype is checked with the values.
    module = _module(student, device)
    pe = module.attr("pe")
    hint = variants.PE_SHAPE if isinstance(pe, torch.Tensor) and pe.numel() == MAX_LEN * D_MODEL else None
    expect_tensor(f"PositionalEncoding({D_MODEL}, max_len={MAX_LEN}).pe", pe, shape=(MAX_LEN, D_MODEL), hint=hint)
    _expect_the_buffer_is_added(module, make_input(2, 5, D_MODEL, seed=48))


def test_pe_holds_the_sinusoidal_table(student, device):
    got = _table_added(student, device)
    want = sinusoidal_encoding(MAX_LEN, D_MODEL).to(device)
    if got is None:
        raise CheckFailed(f"PositionalEncoding({D_MODEL}, max_len={MAX_LEN})(zeros (1, {MAX_LEN}, {D_MODEL})): "
                          f"expected a float tensor of that shape, x + pe", variants.PE_NOT_REGISTERED)
    if is_close(got, want, atol=ATOL):
        return
    try:
        own = student.call("sinusoidal_encoding", MAX_LEN, D_MODEL)
    except StudentError:
        own = None
    if (isinstance(own, torch.Tensor) and own.is_floating_point() and own.numel() == got.numel()
            and is_close(got, own.float().reshape(got.shape).to(device), atol=ATOL)):
        return  # the table is your sinusoidal_encoding's: its mistakes cost points there only
    mistakes = dict(variants.encoding_mistakes(MAX_LEN, D_MODEL))
    mistakes[variants.PE_TABLE_DIFFERS] = lambda: got  # anything else: say where the table comes from
    expect_close(f"PositionalEncoding({D_MODEL}, max_len={MAX_LEN})(zeros): the table it adds", got, want, atol=ATOL,
                 mistakes=mistakes)


@pytest.mark.part("PositionalEncoding", points=3)
def test_pe_forward_values(student, make_input, device):
    module = _module(student, device)
    x = make_input(2, 7, D_MODEL, seed=40)
    got = module(x)
    expect_tensor("PositionalEncoding(x: (2, 7, 16))", got, shape=x.shape)
    _expect_sum("PositionalEncoding(x: (2, 7, 16))", got, x, _tables(student, device))


def test_pe_forward_at_max_len(student, make_input, device):
    module = _module(student, device)
    x = make_input(1, MAX_LEN, D_MODEL, seed=41)
    _expect_sum(f"PositionalEncoding(x: (1, {MAX_LEN}, 16)) with max_len={MAX_LEN}", module(x), x,
                _tables(student, device))


def test_pe_rejects_input_longer_than_max_len(student, make_input, device):
    module = _module(student, device)
    x = make_input(1, MAX_LEN + 1, D_MODEL, seed=42)
    expect_raises(ValueError, f"PositionalEncoding(max_len={MAX_LEN})(x: (1, {MAX_LEN + 1}, 16))", lambda: module(x))


def test_pe_dropout_is_off_in_eval_mode(student, make_input, device):
    module = _module(student, device, dropout=0.5)
    module.method("eval")
    x = make_input(2, 7, D_MODEL, seed=43)
    got = module(x)
    tables = _tables(student, device)
    if isinstance(got, torch.Tensor) and got.shape == x.shape and (got == 0).float().mean() > 0.3:
        raise CheckFailed("PositionalEncoding(dropout=0.5) in eval mode: about half of the output is zero",
                          variants.DROPOUT_IN_EVAL)
    _expect_sum("PositionalEncoding(dropout=0.5) in eval mode", got, x, tables)


def test_pe_dropout_in_training_mode(student, make_input, device, seed_student):
    # 3200 elements, p=0.5, judged against the same module in eval mode (grader.suite.dropout):
    # each output zero or twice x + pe[:T], about half of them zero (within 6 standard deviations).
    x = make_input(4, 50, D_MODEL, seed=44)
    outputs, again = {}, {}
    for p in (0.0, 0.5):
        module = _module(student, device, dropout=p)
        what = f"PositionalEncoding(dropout={p})(x: (4, 50, 16))"
        kept = expect_tensor(f"{what} in eval mode", module(x), shape=x.shape, floating=True)
        module.method("train")
        seed_student(45)
        outputs[p] = expect_tensor(f"{what} in training mode", module(x), shape=x.shape, floating=True), kept
        again[p] = module(x)  # the next call drops other units (expect_new_draws)
    expect_no_dropout_at_zero("PositionalEncoding(dropout=0.0)", *outputs[0.0], atol=ATOL, rtol=0)
    # Kept: the same weights with dropout=0.0, in eval mode; this module's own eval mode is another test's.
    train, kept = outputs[0.5][0], outputs[0.0][1]
    expect_dropout("PositionalEncoding(dropout=0.5) in training mode", train, kept, 0.5, atol=2 * ATOL, rtol=1e-6,
                   named=DropoutHints(missing=variants.DROPOUT_MISSING, misplaced=variants.DROPOUT_MISPLACED,
                                      unscaled=variants.DROPOUT_UNSCALED),
                   elsewhere={variants.DROPOUT_ON_PE_ONLY: (train - x, kept - x)})
    expect_new_draws("PositionalEncoding(dropout=0.5) in training mode", train, again[0.5], kept, atol=2 * ATOL,
                     rtol=1e-6)


def test_pe_follows_the_input_device(student, make_input, device):
    x = make_input(1, 3, D_MODEL, seed=45)
    expect_follows_device("PositionalEncoding(x)", lambda where: _module(student, where)(x.to(where)), device,
                          shape=(1, 3, D_MODEL))
