"""What a public test compares the student's code with: data, never code that computes the answer.

A public test that checks values reads its case from the data file beside it
(``assignments/03/test_mha.py`` reads ``assignments/03/test_mha.safetensors``): fixed inputs,
fixed parameters, the right output on them, and what each common mistake outputs on them.

    CASES = Cases(__file__)

    def test_multi_head_attention_scales_by_sqrt_d_k():
        case = CASES["multi_head_attention"]
        mha = case.load(MultiHeadAttention(d_model=16, num_heads=2)).eval()  # the stored parameters
        x = case.tensor("x", 2, 5, 16)                                        # the stored input
        case.expect(mha(x, x, x), mistakes=("scores not scaled", "softmax over the wrong dimension"))

:meth:`Case.expect` fails with "mistake: <name>" when the output is the one that mistake gives
(the student's grader makes that the part's hint, :mod:`grader.student.grade`), and otherwise when it
is not the right one. The files are generated from the reference and the hidden suites' mutants
(``grade public-data``, :mod:`grader.engine.public_data`), never written by hand, and a test checks
that they are current.

This module ships in the handout. The public tests use it in the process that runs the
student's code, and torch and safetensors are imported there, when a case is first read: the
student's grader, which imports MISTAKE_PREFIX, starts without them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

DATA_SUFFIX = ".safetensors"
# A public test names the mistake it caught in its assertion's message, as plain pytest shows
# it too: `assert ok, "mistake: softmax over the wrong dimension"`. grader.student.grade reads it.
MISTAKE_PREFIX = "mistake: "
# How a data file's keys name what they hold: "<case>/input/<name>", "<case>/parameter/<name>",
# "<case>/expected", "<case>/mistake/<the contract's name of the mistake>".
INPUT, PARAMETER, EXPECTED, MISTAKE = "input", "parameter", "expected", "mistake"
ATOL, RTOL = 1e-5, 1e-5


def key(case: str, role: str, name: str = "") -> str:
    return f"{case}/{role}/{name}" if name else f"{case}/{role}"


class StaleData(Exception):
    """The data file does not hold what the test asks for: it is older than the test."""


class Cases:
    """The cases of one public test module, read from the file beside it when first asked for."""

    def __init__(self, test_file: str | Path) -> None:
        self.path = Path(test_file).with_suffix(DATA_SUFFIX)
        self._tensors: dict[str, torch.Tensor] | None = None

    def __getitem__(self, case: str) -> Case:
        if self._tensors is None:
            from safetensors.torch import load_file

            if not self.path.is_file():
                raise StaleData(f"{self.path.name} is missing: the public tests need it beside them")
            self._tensors = load_file(self.path)
        return Case(case, self._tensors, self.path.name)


class Case:
    """One case: its stored inputs and parameters, and what :meth:`expect` compares with."""

    def __init__(self, name: str, tensors: dict[str, torch.Tensor], file_name: str) -> None:
        self.name, self._tensors, self._file_name = name, tensors, file_name

    def tensor(self, name: str, *shape: int) -> torch.Tensor:
        """The stored float input ``name``, of ``shape``."""
        __tracebackhide__ = True  # pytest shows the test's line, not this module's
        return self._input(name, shape)

    def tokens(self, name: str, high: int, *shape: int) -> torch.Tensor:
        """The stored token ids ``name`` (a LongTensor of ``shape``, each in ``[0, high)``)."""
        __tracebackhide__ = True  # pytest shows the test's line, not this module's
        import torch

        tokens = self._input(name, shape)
        if tokens.dtype != torch.long or tokens.numel() and not 0 <= int(tokens.min()) <= int(tokens.max()) < high:
            raise StaleData(f"{self._file_name}'s tokens {name!r} of case {self.name!r} are not ids below {high}: "
                            "it is older than the test")
        return tokens

    def load(self, module: Any) -> Any:
        """``module`` with the stored parameters, by their names in the contract; returns it."""
        __tracebackhide__ = True  # pytest shows the test's line, not this module's
        import torch

        stored = self._stored(PARAMETER)
        yours = dict(module.named_parameters())
        if set(yours) != set(stored):
            raise AssertionError(f"{type(module).__name__}'s parameters are {_names(yours)}; the contract's are "
                                 f"{_names(stored)}")
        with torch.no_grad():
            for name, parameter in yours.items():
                if parameter.shape != stored[name].shape:
                    raise AssertionError(f"{type(module).__name__}.{name} has shape {tuple(parameter.shape)}; "
                                         f"the contract's is {tuple(stored[name].shape)}")
                parameter.copy_(stored[name])
        return module

    def expect(self, output: Any, *, mistakes: tuple[str, ...] = (), atol: float = ATOL, rtol: float = RTOL) -> None:
        """Fail with "mistake: <name>" when ``output`` is what one of ``mistakes`` gives (the first
        that matches), else unless it is the stored right output."""
        __tracebackhide__ = True  # pytest shows the test's line, not this module's
        expected = self._get(key(self.name, EXPECTED))
        made = self._stored(MISTAKE)
        if set(mistakes) != set(made):
            raise StaleData(f"{self._file_name} holds the outputs of other mistakes for case {self.name!r}: "
                            "it is older than the test")
        got = _comparable(output, expected)
        for mistake in mistakes:
            if same(got, made[mistake], atol, rtol):
                raise AssertionError(MISTAKE_PREFIX + mistake)
        if not same(got, expected, atol, rtol):
            raise AssertionError(f"{self.name}: not the expected output ({_difference(got, expected)})")

    def _input(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        stored = self._get(key(self.name, INPUT, name))
        if tuple(stored.shape) != shape:
            raise StaleData(f"{self._file_name}'s input {name!r} of case {self.name!r} has shape "
                            f"{tuple(stored.shape)}, not {shape}: it is older than the test")
        return stored.clone()  # the student's code may change it in place

    def _get(self, full_key: str) -> torch.Tensor:
        if full_key not in self._tensors:
            raise StaleData(f"{self._file_name} holds no {full_key!r}: it is older than the test")
        return self._tensors[full_key]

    def _stored(self, role: str) -> dict[str, torch.Tensor]:
        prefix = f"{self.name}/{role}/"
        return {name.removeprefix(prefix): tensor for name, tensor in self._tensors.items()
                if name.startswith(prefix)}


def same(got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> bool:
    """Equal as a public test judges it: close for floating point (nan where nan), exact otherwise."""
    import torch

    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if want.is_floating_point():
        return torch.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True)
    return torch.equal(got, want)


def _comparable(output: Any, expected: torch.Tensor) -> torch.Tensor:
    """``output`` on the CPU, with ``expected``'s dtype where both are floating point; an
    AssertionError that says what is wrong when it cannot be compared at all."""
    import torch

    if not isinstance(output, torch.Tensor):
        raise AssertionError(f"expected a tensor, got {type(output).__name__}")
    if tuple(output.shape) != tuple(expected.shape):
        raise AssertionError(f"shape {tuple(output.shape)}, expected {tuple(expected.shape)}")
    got = output.detach().cpu()
    if got.is_floating_point() and expected.is_floating_point():
        return got.to(expected.dtype)
    if got.dtype != expected.dtype:
        raise AssertionError(f"dtype {got.dtype}, expected {expected.dtype}")
    return got


def _difference(got: torch.Tensor, expected: torch.Tensor) -> str:
    if not expected.is_floating_point():
        return f"{int((got != expected).sum())} of {expected.numel()} elements differ"
    return f"largest difference {float((got - expected).abs().nan_to_num(float('inf')).max()):.3g}"


def _names(parameters: dict) -> str:
    return ", ".join(sorted(parameters)) or "none"
