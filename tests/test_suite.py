"""The seam between hidden suites and the student's code: suites import only
``grader.suite``, whose protocols the sandbox's session implements, whose shared fixtures
the grading plugin serves, and whose part-isolation helpers behave as documented."""

from __future__ import annotations

import ast
import inspect
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from pytest_jsonreport.plugin import JSONReport

from grader import suite
from grader.core import hints
from grader.engine.plugin import GradingPlugin
from grader.sandbox.session import RemoteObject, StudentSession
from grader.suite import (
    Backward,
    CheckFailed,
    Piece,
    PieceUnusable,
    StudentException,
    black_box,
    call_part,
    diagnosing,
    expect_gradients,
    expect_wiring,
    is_close,
)
from tests.conftest import ROOT

pytest_plugins = ("pytester",)

HIDDEN_SUITES = sorted((ROOT / "reference" / "hidden").glob("a*/*.py"))


def _grader_imports(path: Path) -> list[str]:
    """The grader modules a file imports, at any depth of its code."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return [name for name in names if name == "grader" or name.startswith("grader.")]


def test_there_are_hidden_suites_to_scan():
    assert {path.parent.name for path in HIDDEN_SUITES} >= {f"a0{n}" for n in range(1, 7)}


@pytest.mark.parametrize("path", HIDDEN_SUITES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_hidden_suites_import_the_grader_only_through_grader_suite(path):
    assert set(_grader_imports(path)) <= {"grader.suite"}, _grader_imports(path)


def _members(protocol: type) -> set[str]:
    return {name for name, value in vars(protocol).items()
            if (callable(value) or isinstance(value, property)) and (name == "__call__" or not name.startswith("_"))}


@pytest.mark.parametrize(("protocol", "implementation", "members"), [
    (suite.Student, StudentSession, {"program", "call", "new", "new_like", "build", "define", "watching", "timed_like", "backward"}),
    (suite.Remote, RemoteObject, {"type_name", "__call__", "method", "backward", "attr", "inspect", "load_parameters", "holding"}),
])
def test_the_session_implements_the_protocols_suites_are_typed_against(protocol, implementation, members):
    assert _members(protocol) == members
    for name in members:
        declared, actual = vars(protocol)[name], getattr(implementation, name)
        if isinstance(declared, property):
            assert isinstance(actual, property), name
        else:
            assert inspect.signature(declared).parameters.keys() == inspect.signature(actual).parameters.keys(), name


def test_every_name_grader_suite_exports_exists():
    assert all(hasattr(suite, name) for name in suite.__all__)


# ---- shared fixtures, served by the plugin ------------------------------------------------


def test_make_input_is_served_to_a_suite_that_does_not_import_it(pytester, monkeypatch):
    pytester.makeconftest("""
        import pytest

        @pytest.fixture
        def input_scale():
            return 2.0
    """)
    pytester.makepyfile("""
        import pytest
        import torch

        pytestmark = pytest.mark.part("p")

        def normal(*shape, seed, dtype=torch.float32):
            return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)

        def test_scale_defaults_to_the_suites_input_scale(make_input, device):
            x = make_input(2, 3, seed=7)
            assert x.device.type == device.type and torch.equal(x, 2.0 * normal(2, 3, seed=7))

        def test_a_call_names_its_own_scale_and_dtype(make_input):
            assert torch.equal(make_input(4, seed=1, scale=1.0), normal(4, seed=1))
            assert make_input(4, seed=1, dtype=torch.float64).dtype == torch.float64
    """)
    # As the runner loads them: no other plugin, and pytest-json-report, whose hook the grading plugin implements.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest_inprocess("-p", "pytest_jsonreport.plugin", "--json-report-file=none",
                                          plugins=[JSONReport(), GradingPlugin()])
    result.assert_outcomes(passed=2)


# ---- part isolation ----------------------------------------------------------------------


def _student_raises(type_name: str, message: str = "boom", stub: bool = False) -> StudentException:
    return StudentException("f", type_name, message, "", stub=stub)


def _raise(exc: Exception):
    raise exc


def test_is_close_wants_two_tensors_of_one_shape():
    a = torch.tensor([1.0, 2.0])
    assert is_close(a, a + 1e-7, atol=1e-6)
    assert not is_close(a, a + 1e-3, atol=1e-6)
    assert not is_close(a, a[:1], atol=1.0)
    assert not is_close(None, a, atol=1.0) and not is_close(a, None, atol=1.0)


def test_expect_wiring_accepts_the_contracts_wiring_of_the_students_own_pieces():
    reference, own_wiring = torch.zeros(3), torch.ones(3)
    expect_wiring("layer(x)", torch.ones(3), reference, lambda: own_wiring, atol=1e-6, rtol=0.0,
                  mistakes={}, unusable_hint="unusable: {error}")


def test_expect_wiring_names_the_mistake_and_the_piece_to_fix_first():
    wiring = torch.ones(3)
    wrong_piece = Piece("MultiHeadAttention", "self_attn", "assignment 03", lambda: torch.ones(2),
                        lambda: torch.zeros(2))
    right_piece = Piece("FeedForward", "ffn", "the FeedForward part", lambda: torch.ones(2), lambda: torch.ones(2))
    with pytest.raises(CheckFailed) as failure:
        expect_wiring("layer(x)", 2 * wiring, torch.zeros(3), lambda: wiring, atol=1e-6, rtol=0.0,
                      mistakes={"pre-norm": lambda: 2 * wiring, "raises": lambda: _raise(ValueError())},
                      unusable_hint="unusable: {error}", pieces=[wrong_piece, right_piece])
    assert failure.value.hint == ("pre-norm; " + suite.PIECES_DIFFER.format(
        pieces=suite.describe_piece("MultiHeadAttention", ["self_attn"], "assignment 03")))


def test_expect_wiring_leads_with_the_parts_own_mistake_when_it_fails_with_its_own_pieces_too():
    # A MultiHead that projects twice, over a wrong head: its output is not proj(cat(heads)) of its
    # own heads either, so the head is not its cause. Its own mistake leads; the head comes second.
    wiring = torch.ones(3)
    wrong_head = Piece("Head", "heads[0]", "the Head part", lambda: torch.ones(2), lambda: torch.zeros(2))
    with pytest.raises(CheckFailed) as failure:
        expect_wiring("MultiHead(x)", 3 * wiring, torch.zeros(3), lambda: wiring, atol=1e-6, rtol=0.0,
                      mistakes={"no projection": lambda: 2 * wiring}, unusable_hint="unusable: {error}",
                      pieces=[wrong_head])
    assert failure.value.hint == suite.OWN_WIRING + "; " + suite.PIECES_DIFFER.format(
        pieces=suite.describe_piece("Head", ["heads[0]"], "the Head part"))
    assert failure.value.mistake is None
    with pytest.raises(CheckFailed) as failure:  # no piece is wrong: the values say the rest
        expect_wiring("MultiHead(x)", 3 * wiring, torch.zeros(3), lambda: wiring, atol=1e-6, rtol=0.0,
                      mistakes={}, unusable_hint="unusable: {error}")
    assert failure.value.hint is None


def test_expect_wiring_passes_on_the_evidence_of_the_parts_own_mistake():
    wiring = torch.ones(3)
    pre_norm = suite.Mistake("pre-norm: use post-norm", "pre-norm instead of post-norm")
    with pytest.raises(CheckFailed) as failure:
        expect_wiring("layer(x)", 2 * wiring, torch.zeros(3), lambda: wiring, atol=1e-6, rtol=0.0,
                      mistakes={pre_norm: lambda: 2 * wiring}, unusable_hint="unusable: {error}")
    assert (failure.value.hint, failure.value.mistake) == ("pre-norm: use post-norm", "pre-norm instead of post-norm")


def test_expect_wiring_says_when_the_pieces_cannot_be_combined():
    with pytest.raises(CheckFailed) as failure:
        expect_wiring("layer(x)", torch.ones(3), torch.zeros(3), lambda: _raise(TypeError("a tuple")), atol=1e-6,
                      rtol=0.0, mistakes={"never tried": lambda: torch.ones(3)}, unusable_hint="unusable: {error}")
    assert failure.value.hint == "unusable: TypeError: a tuple"


def test_diagnosing_names_a_piece_that_raises_by_itself():
    piece = Piece("DecoderLayer", "decoder_layers[0]", "the DecoderLayer part",
                  lambda: _raise(_student_raises("RuntimeError")))
    with pytest.raises(CheckFailed) as failure, diagnosing([piece]):
        raise _student_raises("RuntimeError")
    assert failure.value.hint == suite.PIECE_RAISES.format(piece="DecoderLayer (decoder_layers[0])",
                                                           where="the DecoderLayer part")
    with pytest.raises(StudentException), diagnosing([piece]):  # a stub is the plugin's to report
        raise _student_raises("NotImplementedError", stub=True)
    with pytest.raises(CheckFailed), diagnosing([piece]):  # torch's own (no kernel for a dtype) is an error
        raise _student_raises("NotImplementedError", "\"lt_cpu\" not implemented for 'Bool'")


class _Piece:
    """Stands for one of the student's modules, called from the trusted side."""

    type_name = "FeedForward"

    def __init__(self, returns):
        self._returns = returns

    def __call__(self, *args):
        return self._returns


def test_a_black_box_returns_what_has_its_reference_twins_shape():
    x, like = torch.randn(2, 3, 4), torch.nn.Linear(4, 4)
    assert black_box(_Piece(torch.ones(2, 3, 4)), like)(x).shape == (2, 3, 4)
    with pytest.raises(PieceUnusable, match=r"returned \(400000, 1, 1, 1\) \(float32\) where the contract's Linear "
                                            r"returns shape \(2, 3, 4\)"):
        black_box(_Piece(torch.zeros(400000, 1, 1, 1)), like)(x)
    with pytest.raises(PieceUnusable, match="returned a tuple of 2"):
        black_box(_Piece((x, x)), like)(x)
    # What the student's process may give instead: a bool of which units were kept, or a
    # number where its module should be (before, each went on into the grader's arithmetic).
    with pytest.raises(PieceUnusable, match=r"returned \(2, 3, 4\) \(bool\) where the contract's Linear returns "
                                            "floating-point values"):
        black_box(_Piece(torch.ones(2, 3, 4, dtype=torch.bool)), like)(x)
    with pytest.raises(PieceUnusable, match="your code gave int where the grader needs your Linear"):
        black_box(5, like)(x)


def test_a_piece_that_would_broadcast_makes_the_wiring_unusable_not_large():
    x = torch.randn(2, 3, 4)
    ffn = black_box(_Piece(torch.zeros(400000, 1, 1, 1)), torch.nn.Linear(4, 4))
    piece = Piece("FeedForward", "ffn", "the FeedForward part", lambda: ffn(x), lambda: x)
    with pytest.raises(CheckFailed) as failure:
        expect_wiring("layer(x)", x + 1, x, lambda: x + ffn(x), atol=1e-6, rtol=0.0,
                      mistakes={"post-norm": lambda: 2 * x + ffn(x)}, unusable_hint="unusable: {error}", pieces=[piece])
    assert failure.value.hint.startswith("unusable: PieceUnusable: your FeedForward returned (400000, 1, 1, 1)")
    assert failure.value.hint.endswith(suite.PIECES_DIFFER.format(
        pieces=suite.describe_piece("FeedForward", ["ffn"], "the FeedForward part")))


class _Module:
    """Stands for a student's module in expect_gradients: right gradients, and an output of
    ``shape`` when called without them."""

    type_name = "Layer"

    def __init__(self, reference: torch.nn.Module, shape: tuple[int, ...]):
        self._reference, self._shape = reference, shape

    def backward(self, x, *, grad_output):
        x = x.detach().requires_grad_(True)
        self._reference.zero_grad()
        output = self._reference(x)
        output.backward(grad_output)
        return Backward(output, (x.grad,), {n: p.grad for n, p in self._reference.named_parameters()})

    def load_parameters(self, parameters):
        pass

    @contextmanager
    def holding(self, parameters):
        yield

    def __call__(self, x):
        return torch.zeros(self._shape)


def test_expect_gradients_checks_the_output_it_measures_the_loss_of_for_its_shape():
    reference, x, grad_output = torch.nn.Linear(4, 4), torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    with pytest.raises(CheckFailed) as failure:
        expect_gradients("Layer", _Module(reference, (400000, 1, 1, 1)), reference, (x,), grad_output,
                         inputs={0: ("x", "h")})
    assert failure.value.message == "Layer output: wrong shape: got (400000, 1, 1, 1), expected (2, 3, 4)"


class _Student:
    def __init__(self, exc: Exception):
        self._exc = exc

    def call(self, name, *args, **kwargs):
        raise self._exc


def test_call_part_names_the_unfinished_part_it_calls():
    with pytest.raises(CheckFailed) as failure:
        call_part(_Student(_student_raises("NotImplementedError", "translation_loss: see README", stub=True)),
                  "train_step")
    assert failure.value.hint == hints.NOT_IMPLEMENTED and "train_step calls translation_loss" in failure.value.message
    with pytest.raises(StudentException):  # its own stub
        call_part(_Student(_student_raises("NotImplementedError", "train_step: see README", stub=True)), "train_step")


def test_seed_reference_builds_the_reference_torch_manual_seed_builds():
    from grader.suite import seed_reference
    from reference.gpt import GPT

    torch.manual_seed(5)
    with_torch = GPT(11, 16, 2, 1, 16).state_dict()
    torch.manual_seed(6)  # another state first: seed_reference must set it, not find it
    seed_reference(5)
    ours = GPT(11, 16, 2, 1, 16).state_dict()
    assert with_torch.keys() == ours.keys() and all(torch.equal(with_torch[k], ours[k]) for k in ours)
