"""Dimensions, reference modules and the pieces of each part for the 07 suite.

Small dimensions keep the suite fast: d_model=16, 2 heads of 8, context 8, a vocabulary of
11, 2 blocks. Every LayerNorm of a reference module gets random weights and biases, so
ln1, ln2 and ln_f differ and each wiring mistake changes the output visibly.

Part isolation (``grader.suite.part_isolation``): MultiHead is checked against ``proj(cat(heads))``
of the student's own heads, Block against pre-norm wiring of its own attn and mlp, GPT
against the contract's wiring of its own blocks, each called as a black box. A piece whose
parameter names are not the contract's (an ``nn.Sequential`` MLP, Karpathy's ``sa`` and
``ffwd``) cannot hold the reference's weights: a stock piece (``stock.py``) takes its place
(``grader.suite.new_graded_like``), and its names cost points where it is graded.
"""

import functools
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn

from grader.suite import (
    CheckFailed,
    Remote,
    StockPiece,
    StudentError,
    in_eval_mode,
    is_close,
    randomize_norms,
    seed_reference,
    source_defining,
    without_unexpected_biases,
)
from reference.gpt import GPT, MLP, Block, Head, MultiHead
from reference.hidden.a07 import helpers, stock

D_MODEL, NUM_HEADS, CONTEXT, VOCAB, NUM_LAYERS = 16, 2, 8, 11, 2
HEAD_SIZE = D_MODEL // NUM_HEADS
GPT_ARGS = (VOCAB, D_MODEL, NUM_HEADS, NUM_LAYERS, CONTEXT)
SHAPE_HINT = "a parameter has the wrong shape; check the nn.Linear and nn.Embedding sizes against the contract"
# The classes of the pieces a part may hold a stock piece for, with the arguments that build
# the student's own (grader.suite.expect_replaced_pieces_written).
PIECE_CLASSES = {"Head": (D_MODEL, HEAD_SIZE, CONTEXT), "MultiHead": (D_MODEL, NUM_HEADS, CONTEXT), "MLP": (D_MODEL,),
                 "Block": (D_MODEL, NUM_HEADS, CONTEXT)}
STOCK_SOURCE = Path(stock.__file__).read_text(encoding="utf-8")
HELPERS_SOURCE = Path(helpers.__file__).read_text(encoding="utf-8")  # no answers: see helpers.py


def params(module: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach() for name, p in module.named_parameters()}


@pytest.fixture
def make_tokens(device):
    def make(batch: int, length: int, *, seed: int) -> torch.Tensor:
        return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed)).to(device)
    return make


@pytest.fixture
def reference_head(device):
    seed_reference(1)
    return Head(D_MODEL, HEAD_SIZE, CONTEXT).to(device)


@pytest.fixture
def reference_multihead(device):
    seed_reference(2)
    return MultiHead(D_MODEL, NUM_HEADS, CONTEXT).to(device)


@pytest.fixture
def reference_mlp(device):
    seed_reference(3)
    return MLP(D_MODEL).to(device)


@pytest.fixture
def reference_block(device):
    seed_reference(4)
    return randomize_norms(Block(D_MODEL, NUM_HEADS, CONTEXT), seed=4).to(device)


@pytest.fixture
def reference_gpt(device):
    seed_reference(5)
    return randomize_norms(GPT(*GPT_ARGS), seed=5).to(device)


@pytest.fixture
def stock_pieces(student) -> list[StockPiece]:
    return stock_pieces_of(student)


def stock_pieces_of(student) -> list[StockPiece]:
    """Stand-ins for a Block inside a GPT, the MultiHead and MLP inside a Block and a Head inside a
    MultiHead, in the student's process, sent there only when a piece needs one, and each with
    only what it needs of ``stock.py``: they are answers (see ``student.define``), and the
    others there answer other parts."""
    stock = functools.cache(lambda name: student.define("stock", source_defining(STOCK_SOURCE, [name]), answers=True))
    return [StockPiece("Head", lambda head: stock("StockHead").method(
                "StockHead", D_MODEL, head.key.out_features, head.tril.size(0))),
            StockPiece("Block", lambda block: stock("StockBlock").method(
                "StockBlock", D_MODEL, len(block.attn.heads), block.attn.heads[0].tril.size(0))),
            StockPiece("MultiHead", lambda attn: stock("StockMultiHead").method(
                "StockMultiHead", D_MODEL, len(attn.heads), attn.heads[0].tril.size(0))),
            StockPiece("MLP", lambda mlp: stock("StockMLP").method("StockMLP", mlp.fc.in_features))]


# The student's modules holding the reference's parameters (a bias the contract leaves out at
# zero: its names test charges it), in eval mode: the numbers are graded with dropout off, as
# the README says; each part that owns a dropout has a test of its own for it.


@pytest.fixture
def student_head(student, reference_head):
    return in_eval_mode(without_unexpected_biases(student.new_like(reference_head, "Head", D_MODEL, HEAD_SIZE,
                                                                   CONTEXT), reference_head))


@pytest.fixture
def student_mlp(student, reference_mlp):
    return in_eval_mode(student.new_like(reference_mlp, "MLP", D_MODEL))


@pytest.fixture
def student_multihead(new_graded, reference_multihead):
    return graded_multihead(new_graded, reference_multihead)


@pytest.fixture
def student_block(new_graded, reference_block):
    return graded_block(new_graded, reference_block)


@pytest.fixture
def student_gpt(new_graded, reference_gpt):
    return graded_gpt(new_graded, reference_gpt)


def graded_multihead(new_graded, reference: nn.Module) -> Remote:
    return in_eval_mode(new_graded(reference, "MultiHead", D_MODEL, NUM_HEADS, CONTEXT))


def graded_block(new_graded, reference: nn.Module) -> Remote:
    return in_eval_mode(new_graded(reference, "Block", D_MODEL, NUM_HEADS, CONTEXT))


def graded_gpt(new_graded, reference: nn.Module) -> Remote:
    return in_eval_mode(without_unexpected_biases(new_graded(reference, "GPT", *GPT_ARGS), reference))


@pytest.fixture
def own_else_stock_pieces(stock_pieces):
    """own_else_stock_pieces(check, build, reference, paths, inputs), for inputs shorter than
    the context: ``check(module, args, stock)`` for each ``args`` of ``inputs``, first on
    ``build()``, the student's module with its own pieces. That run stands where it passes and
    each piece at ``paths`` ("heads.0", "attn", "blocks.1") gives what the reference's gives on
    what the reference's receives; else ``check`` runs again on a fresh ``build()`` whose pieces
    there are stock twins holding the reference's weights, which decides. So a piece that cannot
    handle the inputs (a tril not cropped) is graded where it is written, a part that makes up
    for a wrong piece is graded on its own handling of them as before, and a part whose own
    pieces are right needs no stock piece: they are answers, and the process that receives one
    ends with the test."""
    by_class = {piece.name: piece for piece in stock_pieces}

    def with_stock_pieces(module: Remote, reference: nn.Module, paths: list[str]) -> Remote:
        for path in paths:
            sub = reference.get_submodule(path)
            twin = by_class[type(sub).__name__].build(sub)
            twin.method("to", next(reference.parameters()).device)
            twin.load_parameters(dict(sub.named_parameters()))
            *parents, last = path.split(".")
            owner = module
            for parent in parents:
                owner = owner.attr(parent)
            if last.isdigit():
                owner.method("__setitem__", int(last), twin)
            else:
                owner.method("__setattr__", last, twin)
        return module

    def run(check: Callable[[Remote, tuple, bool], None], build: Callable[[], Remote], reference: nn.Module,
            paths: list[str], inputs: list[tuple]) -> None:
        module = build()
        try:
            for args in inputs:
                check(module, args, False)
            pieces = _pieces_at(module, paths)
            if pieces is not None and all(_pieces_agree(pieces, reference, args) for args in inputs):
                return
        except (CheckFailed, StudentError):
            pass  # the stock twins decide
        stocked = with_stock_pieces(build(), reference, paths)
        for args in inputs:
            check(stocked, args, True)
    return run


def _pieces_at(module: Remote, paths: list[str]) -> dict[str, Remote] | None:
    """``module``'s pieces at ``paths``; None where one is not an object of the student's process
    (a list, say, where the contract has a module)."""
    pieces = {}
    for path in paths:
        piece = module
        for name in path.split("."):
            piece = piece.method("__getitem__", int(name)) if name.isdigit() else piece.attr(name)
            if not isinstance(piece, Remote):
                return None
        pieces[path] = piece
    return pieces


def _pieces_agree(pieces: dict[str, Remote], reference: nn.Module, args: tuple) -> bool:
    """Whether each piece gives what the reference's piece at its path gives, on what that one
    receives when the reference runs on ``args``."""
    seen: dict[str, tuple] = {}

    def keep(path: str, _: nn.Module, piece_args: tuple, output: torch.Tensor) -> None:  # None: the output stays
        seen.setdefault(path, (piece_args, output))

    hooks = [reference.get_submodule(path).register_forward_hook(functools.partial(keep, path)) for path in pieces]
    try:
        with torch.no_grad():
            reference(*args)
    finally:
        for hook in hooks:
            hook.remove()
    return all(is_close(piece(*seen[path][0]), seen[path][1], atol=1e-4, rtol=1e-4) for path, piece in pieces.items())
