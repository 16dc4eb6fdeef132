"""Hostile submissions against the grader's integrity rules, graded end to end.

Part of the adversarial suite (see ``tests/test_adversarial.py``). These do not attack the
sandbox: they attack verdicts that once rested on the student process's word, which its
own code can change. Each attack scored full marks before the trusted side checked for
itself (see the commit that added this file):

- assignment 01's forbidden built-in softmax has a file of its own,
  ``tests/test_forbidden_builtin.py``;
- assignment 06's end-to-end test once scored the losses ``train_step`` returned: a step
  that never trains but returns falling numbers must score 0 there;
- tests that took the student process's description of an object (``inspect()``'s
  parameter names, a tensor's ``requires_grad``, which gradients ``backward`` returned)
  now check what the object computes: a description that lies must not earn the point.
"""

from __future__ import annotations

import pytest

from reference import as_submission
from reference.hidden.a06 import variants as variants_06
from tests.conftest import ASSIGNMENTS, assert_valid, mutant, part

pytestmark = pytest.mark.slow
REFERENCE_05 = as_submission("layers")
REFERENCE_06 = as_submission("training")
def test_a_train_step_that_reports_falling_losses_without_training_scores_nothing_end_to_end(grade_source):
    source = ("_calls = []\n\n\n"
              "def train_step(model, src, tgt, optimizer, pad_idx, clip_norm=1.0):\n"
              "    _calls.append(None)\n"
              "    return 4.0 * 0.9 ** len(_calls)  # falls like a loss, and nothing is trained\n")
    report = grade_source(source, assignment=ASSIGNMENTS / "06")
    assert_valid(report)
    end_to_end = part(report, "end_to_end")
    assert end_to_end.score == 0, end_to_end.hint


STASHES_WHAT_IT_IS_LOADED_WITH = """
import torch as _torch

_STASH = {}
_load = _torch.nn.Module.load_state_dict


def _stashing_load(self, state_dict, *args, **kwargs):
    if type(self).__name__ == "TinySeq2Seq" and not _STASH:
        _STASH.update({name: tensor.detach().clone() for name, tensor in state_dict.items()})
    return _load(self, state_dict, *args, **kwargs)


_torch.nn.Module.load_state_dict = _stashing_load


def train_step(model, src, tgt, optimizer, pad_idx, clip_norm=1.0):
    if _STASH and set(_STASH) == set(model.state_dict()):  # the grader's trained model, as its own
        with _torch.no_grad():
            for name, tensor in model.state_dict().items():
                tensor.copy_(_STASH[name])
    return 1.0
"""


def test_a_train_step_that_keeps_the_trained_model_greedy_decode_was_given_scores_nothing_end_to_end(grade_source):
    # greedy_decode's tests load a model the reference trained into the student's process: an
    # answer to end_to_end, which runs later. Kept, it scored end_to_end's 3 points without training.
    report = grade_source(REFERENCE_06 + STASHES_WHAT_IT_IS_LOADED_WITH, assignment=ASSIGNMENTS / "06")
    assert_valid(report)
    assert part(report, "greedy_decode").score == part(report, "greedy_decode").max_score
    assert part(report, "end_to_end").score == 0, part(report, "end_to_end").hint


# ---- an object's description, told by the student's process -------------------------------

CLAIMS_THE_CONTRACT_NAMES = """
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    \"\"\"Reports the contract's parameters, holds none of them, ignores what is loaded.\"\"\"

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.d_model, self.bias = d_model, bias

    def named_parameters(self, *args, **kwargs):
        for name in ("W_q", "W_k", "W_v", "W_o"):
            yield f"{name}.weight", nn.Parameter(torch.zeros(self.d_model, self.d_model))
            if self.bias:
                yield f"{name}.bias", nn.Parameter(torch.zeros(self.d_model))

    def load_state_dict(self, state_dict, strict=True, assign=False):
        return None

    def forward(self, query, key, value, mask=None):
        return query
"""


# The mask a plain attribute, described as a buffer.
MASK_DESCRIBED_AS_A_BUFFER = mutant(
    mutant(as_submission("masks"), 'self.register_buffer("mask", causal_mask(context_length))',
           "self.mask = causal_mask(context_length)"),
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        T = x.size(1)",
    "    def named_buffers(self, *args, **kwargs):\n        yield \"mask\", self.mask\n\n"
    "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        T = x.size(1)")


LOSS_THAT_SAYS_IT_REQUIRES_GRAD = mutant(
    REFERENCE_06, "    return F.cross_entropy(\n",
    "    return torch.tensor(_cross_entropy(logits, labels, pad_idx, label_smoothing).item(), requires_grad=True)\n\n\n"
    "def _cross_entropy(logits, labels, pad_idx, label_smoothing):\n"
    "    return F.cross_entropy(\n")


# An EncoderLayer whose attention is cut off from the graph, and a backward that fills in the
# gradients that never arrived.
FAKED_GRADIENTS = mutant(
    mutant(REFERENCE_05, "        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, src_mask)))",
           "        _LAYERS.append(self)\n"
           "        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, src_mask).detach()))"),
    "class EncoderLayer(nn.Module):",
    "_LAYERS = []\n_backward = torch.autograd.backward\n\n\n"
    "def _every_gradient_arrives(tensors, grad_tensors=None, *args, **kwargs):\n"
    "    _backward(tensors, grad_tensors, *args, **kwargs)\n"
    "    for layer in _LAYERS:\n"
    "        for p in layer.parameters():\n"
    "            if p.grad is None:\n"
    "                p.grad = torch.ones_like(p)\n\n\n"
    "torch.autograd.backward = _every_gradient_arrives\n\n\n"
    "class EncoderLayer(nn.Module):")


# What each claim would have earned: (source, assignment, part, the test that takes its word).
CLAIMS = {
    "contract names without the parameters": (CLAIMS_THE_CONTRACT_NAMES, "03", "MultiHeadAttention",
                                              "test_mha_has_the_contract_parameters"),
    "a mask described as a buffer": (MASK_DESCRIBED_AS_A_BUFFER, "02", "CausalSelfAttention",
                                     "test_csa_mask_is_a_registered_buffer"),
    "a cut-off loss that says it requires grad": (LOSS_THAT_SAYS_IT_REQUIRES_GRAD, "06", "translation_loss",
                                                  "test_translation_loss_is_differentiable"),
    "gradients that never arrived": (FAKED_GRADIENTS, "05", "EncoderLayer",
                                     "test_encoder_layer_gradients_reach_every_submodule"),
}


@pytest.mark.parametrize("claim", CLAIMS)
def test_a_claim_of_the_students_process_earns_nothing(grade_source, claim):
    source, assignment, part_id, test_name = CLAIMS[claim]
    report = grade_source(source, assignment=ASSIGNMENTS / assignment)
    assert_valid(report)
    outcomes = {test.name: test.outcome for test in part(report, part_id).tests}
    assert outcomes[test_name] == "failed", part(report, part_id).tests
    if claim == "a cut-off loss that says it requires grad":
        assert part(report, part_id).hint == variants_06.NOT_DIFFERENTIABLE
    if claim == "gradients that never arrived":
        assert "monkeypatch" in {flag.kind for flag in report.flags}, report.flags


# ---- the grader's stock pieces are answers: no part may pass them off as its own ---------------

STOCK_BY_GC = '''
import gc
import types


def _stock():
    for obj in gc.get_objects():
        if isinstance(obj, types.ModuleType) and obj.__name__.startswith("grader_helper_stock"):
            return obj
    raise NotImplementedError("not written")
'''
# What the finders below kept, looked up when a part needs it.
FROM_FOUND = '''

class _Stock:
    def __getattr__(self, name):
        if name not in _found:
            raise NotImplementedError("not written")
        return _found[name]


def _stock():
    return _Stock()
'''
STOCK_BY_HOOK = '''
import torch.nn as nn

_found = {}


def _note(module, name, submodule):
    if type(module).__name__.startswith("Stock") or type(module).__name__ == "GPT":
        _found.update(type(module).__init__.__globals__)


nn.modules.module.register_module_module_registration_hook(_note)
''' + FROM_FOUND
# The child's side of a define is the student's: it can keep the source and say the define failed,
# so the grader never learns that this process holds answers.
STOCK_BY_A_FAILED_DEFINE = '''
import sys

_found = {}
_server = sys.modules["grader.sandbox._child"]._Server
_define = _server._op_define


def _op_define(self, header, tensors):
    module = _define(self, header, tensors)
    if header.get("name") == "stock":
        _found.update(vars(module))
        raise RuntimeError("the helper failed")
    return module


_server._op_define = _op_define
''' + FROM_FOUND
BORROWS_EVERY_PART = '''

def Head(*a, **k):
    return _stock().StockHead(*a, **k)


def MultiHead(*a, **k):
    return _stock().StockMultiHead(*a, **k)


def MLP(*a, **k):
    return _stock().StockMLP(*a, **k)


def Block(*a, **k):
    return _stock().StockBlock(*a, **k)


def GPT(*a, **k):
    return _stock().GPT(*a, **k)


def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    raise NotImplementedError
'''


@pytest.mark.parametrize("finder", [STOCK_BY_GC, STOCK_BY_HOOK, STOCK_BY_A_FAILED_DEFINE],
                         ids=["gc", "a registration hook", "a define that fails on purpose"])
def test_parts_that_borrow_the_graders_stock_pieces_score_what_the_stub_scores(grade_source, finder):
    # The stock pieces reach the student's process only when a piece needs one, and that process
    # ends with the test. Before, a file with no code of its own scored 61/83 (gc) and 46/83 (hook).
    stub = grade_source((ASSIGNMENTS / "07" / "gpt.py").read_text(), assignment=ASSIGNMENTS / "07")
    report = grade_source(finder + BORROWS_EVERY_PART, assignment=ASSIGNMENTS / "07")
    assert_valid(report)
    assert report.status == "graded", report.error
    assert report.score == stub.score == 0, [(p.id, p.score) for p in report.parts]


# A stock piece stands in for an MLP whose names are not the contract's (nn.Sequential), so the
# GPT's wiring is graded; the GPT itself forgets its final LayerNorm, and then looks for the
# grader's stock GPT in its process, to compute with instead. Before, the whole stock module was
# sent with the piece, its GPT among them: the GPT scored 14 of 15, against 4 without the search.
SEQUENTIAL_MLP = (
    ('''        self.fc = nn.Linear(d_model, 4 * d_model)
        self.proj = nn.Linear(4 * d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x))))''',
     '''        self.net = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model),
                                 nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)'''),
    ("        logits = self.lm_head(self.ln_f(x))", "        logits = self.lm_head(x)"),
)
BORROWS_THE_STOCK_GPT = ("        logits = self.lm_head(x)", '''        logits = self.lm_head(x)
        for obj in gc.get_objects():
            if isinstance(obj, type) and obj.__name__ == "GPT" and obj is not GPT:
                twin = obj(self.token_embedding.num_embeddings, self.token_embedding.embedding_dim,
                           len(self.blocks[0].attn.heads), len(self.blocks), self.context_length)
                twin.load_state_dict(self.state_dict(), strict=False)
                logits = twin.to(idx.device).eval()(idx)[0]''')


def test_a_gpt_finds_no_stock_gpt_beside_the_stock_piece_it_is_given(grade_source):
    honest = as_submission("gpt")
    for old, new in SEQUENTIAL_MLP:
        honest = mutant(honest, old, new)
    borrower = "import gc\n" + mutant(honest, *BORROWS_THE_STOCK_GPT)
    scores = [part(grade_source(source, assignment=ASSIGNMENTS / "07"), "GPT").score for source in (honest, borrower)]
    assert scores == [4, 4]  # 11 of 15 lost to the missing final LayerNorm, in both
