import pytest
import torch

from grader.checks import CheckFailed, expect_close, expect_raises, expect_tensor
from grader.sandbox.session import StudentError
from reference.hidden.a04 import variants
from reference.hidden.a04.conftest import D_MODEL, MAX_LEN, close
from reference.positions import sinusoidal_encoding

pytestmark = pytest.mark.part("PositionalEncoding")

# x + pe[:T] is one float32 addition: a correct module is exact up to ~1e-6 (a table
# computed in float32); the mistakes differ by ~1.
ATOL = 1e-5


def _module(student, device, **kwargs):
    module = student.new("PositionalEncoding", D_MODEL, max_len=MAX_LEN, **kwargs)
    module.method("to", device)
    return module


def _students_table(module) -> torch.Tensor | None:
    """The table the student's module holds as (MAX_LEN, D_MODEL), if it holds one."""
    try:
        pe = module.attr("pe")
    except StudentError:
        return None
    if isinstance(pe, torch.Tensor) and pe.is_floating_point() and pe.numel() == MAX_LEN * D_MODEL:
        return pe.detach().reshape(MAX_LEN, D_MODEL).float()
    return None


def _tables(module, device) -> list[torch.Tensor]:
    """The right answers for ``x + pe[:T]``: the reference table, and (part isolation: a
    wrong sinusoidal_encoding costs points in that part only) the student's own table."""
    own = _students_table(module)
    return [sinusoidal_encoding(MAX_LEN, D_MODEL).to(device)] + ([own.to(device)] if own is not None else [])


def _expect_sum(what, got, x, tables):
    if isinstance(got, torch.Tensor) and got.is_floating_point() and got.dtype != x.dtype:
        expect_tensor(what, got, dtype=x.dtype, hint=variants.PE_DTYPE)
    for table in tables:
        if close(got, variants.positional_encoding(x, table), atol=ATOL):
            return
    table = tables[-1]
    expect_close(what, got, variants.positional_encoding(x, table), atol=ATOL,
                 mistakes=variants.positional_encoding_mistakes(x, table))


@pytest.mark.part("PositionalEncoding", points=2)
def test_pe_is_a_buffer_not_a_parameter(student):
    info = student.new("PositionalEncoding", D_MODEL, max_len=MAX_LEN).inspect()
    if "pe" in info["parameters"]:
        raise CheckFailed("PositionalEncoding: pe is a parameter (it would be trained), expected a buffer",
                          variants.PE_PARAMETER)
    if "pe" not in info["buffers"]:
        raise CheckFailed(f"PositionalEncoding: no buffer named pe (buffers: {sorted(info['buffers'])})",
                          variants.PE_NOT_REGISTERED)
    if info["parameters"]:
        raise CheckFailed(f"PositionalEncoding has parameters {sorted(info['parameters'])}; expected none",
                          "the positional encoding is fixed: nothing in it is trained")


def test_pe_buffer_shape(student):
    # Its dtype is sinusoidal_encoding's business; the output's dtype is checked with the values.
    pe = student.new("PositionalEncoding", D_MODEL, max_len=MAX_LEN).attr("pe")
    hint = variants.PE_SHAPE if isinstance(pe, torch.Tensor) and pe.numel() == MAX_LEN * D_MODEL else None
    expect_tensor(f"PositionalEncoding({D_MODEL}, max_len={MAX_LEN}).pe", pe, shape=(MAX_LEN, D_MODEL), hint=hint)


def test_pe_holds_the_sinusoidal_table(student):
    module = student.new("PositionalEncoding", D_MODEL, max_len=MAX_LEN)
    got = _students_table(module)
    want = sinusoidal_encoding(MAX_LEN, D_MODEL)
    if got is None:
        raise CheckFailed(f"PositionalEncoding({D_MODEL}, max_len={MAX_LEN}).pe: expected a float tensor with "
                          f"{MAX_LEN}x{D_MODEL} values", variants.PE_NOT_REGISTERED)
    if close(got, want, atol=ATOL):
        return
    try:
        own = student.call("sinusoidal_encoding", MAX_LEN, D_MODEL)
    except StudentError:
        own = None
    if (isinstance(own, torch.Tensor) and own.is_floating_point() and own.numel() == got.numel()
            and close(got, own.float().reshape(got.shape), atol=ATOL)):
        return  # the table is your sinusoidal_encoding's: its mistakes cost points there only
    mistakes = dict(variants.encoding_mistakes(MAX_LEN, D_MODEL))
    mistakes[variants.PE_TABLE_DIFFERS] = lambda: got  # anything else: say where the table comes from
    expect_close(f"PositionalEncoding({D_MODEL}, max_len={MAX_LEN}).pe", got, want, atol=ATOL, mistakes=mistakes)


@pytest.mark.part("PositionalEncoding", points=3)
def test_pe_forward_values(student, make_input, device):
    module = _module(student, device)
    x = make_input(2, 7, D_MODEL, seed=40)
    got = module(x)
    expect_tensor("PositionalEncoding(x: (2, 7, 16))", got, shape=x.shape)
    _expect_sum("PositionalEncoding(x: (2, 7, 16))", got, x, _tables(module, device))


def test_pe_forward_at_max_len(student, make_input, device):
    module = _module(student, device)
    x = make_input(1, MAX_LEN, D_MODEL, seed=41)
    _expect_sum(f"PositionalEncoding(x: (1, {MAX_LEN}, 16)) with max_len={MAX_LEN}", module(x), x,
                _tables(module, device))


def test_pe_rejects_input_longer_than_max_len(student, make_input, device):
    module = _module(student, device)
    x = make_input(1, MAX_LEN + 1, D_MODEL, seed=42)
    expect_raises(ValueError, f"PositionalEncoding(max_len={MAX_LEN})(x: (1, {MAX_LEN + 1}, 16))", lambda: module(x))


def test_pe_dropout_is_off_in_eval_mode(student, make_input, device):
    module = _module(student, device, dropout=0.5)
    module.method("eval")
    x = make_input(2, 7, D_MODEL, seed=43)
    got = module(x)
    tables = _tables(module, device)
    if isinstance(got, torch.Tensor) and got.shape == x.shape and (got == 0).float().mean() > 0.3:
        raise CheckFailed("PositionalEncoding(dropout=0.5) in eval mode: about half of the output is zero",
                          variants.DROPOUT_IN_EVAL)
    _expect_sum("PositionalEncoding(dropout=0.5) in eval mode", got, x, tables)


def test_pe_dropout_in_training_mode(student, make_input, device):
    # 3200 elements, p=0.5: the fraction dropped is 0.5 +- 0.009 (one standard deviation),
    # so [0.4, 0.6] fails a correct module with probability ~1e-28.
    module = _module(student, device, dropout=0.5)
    x = make_input(4, 50, D_MODEL, seed=44)
    got = module(x)
    expect_tensor("PositionalEncoding(dropout=0.5)(x: (4, 50, 16)) in training mode", got, shape=x.shape)
    got = got.detach()
    base = variants.positional_encoding(x, _tables(module, device)[-1])  # x + pe[:T], no dropout
    kept = got != 0
    dropped = 1.0 - kept.float().mean().item()
    if 0.4 <= dropped <= 0.6 and close(got[kept], 2 * base[kept], atol=2 * ATOL):
        return
    hint = None
    if close(got, base, atol=ATOL):
        hint = variants.DROPOUT_MISSING
    elif 0.4 <= dropped <= 0.6 and close(got[kept], base[kept], atol=ATOL):
        hint = variants.DROPOUT_UNSCALED
    elif 0.4 <= ((got - x).abs() < ATOL).float().mean().item() <= 0.6:
        hint = variants.DROPOUT_ON_PE_ONLY
    raise CheckFailed("PositionalEncoding(dropout=0.5) in training mode: expected about half of x + pe[:T] "
                      f"zeroed and the rest multiplied by 2 (1/(1-p)); {dropped:.0%} of the output is zero", hint)


def test_pe_follows_the_input_device(student, make_input, device):
    module = _module(student, device)
    expect_tensor("PositionalEncoding output", module(make_input(1, 3, D_MODEL, seed=45)), device=device)
