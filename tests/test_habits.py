"""Habits from tutorials that used to get a raw error or no name: sequence-first and 2-D
code on batched input, masks in another representation, the RNN way of training.

The exception hints are checked against the messages torch really produces (the ops run
here); the submissions are written as a student following a tutorial would, each a
reference whose one function is replaced by the tutorial's version.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from grader.core import hints
from grader.core.assignment import Assignment
from reference import as_submission, module_for
from reference.hidden.a01 import variants as variants_01
from reference.hidden.a02 import variants as variants_02
from reference.hidden.a03 import variants as variants_03
from reference.hidden.a06 import variants as variants_06
from tests.conftest import ROOT, mutant, part


def _raised(operation: Callable[[], object]) -> tuple[str, str]:
    try:
        operation()
    except Exception as exc:  # noqa: BLE001 - whatever torch raises is the point
        return type(exc).__name__, str(exc)
    raise AssertionError("expected the operation to raise")


def _unpack_four(x: torch.Tensor) -> None:
    batch, heads, length, width = x.shape  # noqa: F841 - the unpacking is what raises


x3, x4 = torch.randn(2, 5, 8), torch.randn(2, 3, 5, 8)


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
@pytest.mark.parametrize(("operation", "names"), [
    pytest.param(lambda: x3 @ x3.T, "x.transpose(-2, -1)", id="keys.T on batched input"),
    pytest.param(lambda: x4 @ x4.T, "x.transpose(-2, -1)", id="keys.T on heads"),
    pytest.param(lambda: torch.bmm(x4, x4.transpose(-2, -1)), "torch.matmul", id="bmm on 4-D input"),
    pytest.param(lambda: _unpack_four(x3), "B, H, T, d_k = x.shape", id="4 dims unpacked from 3-D input"),
    pytest.param(lambda: x3 @ torch.randn(5, 2, 8).transpose(-2, -1), "tgt[:, :-1]", id="batch and time swapped"),
])
def test_a_batched_shape_habit_gets_its_cause_and_fix(operation, names):
    hint = hints.hint_for_exception(*_raised(operation))
    assert hint is not None and names in hint


# ---- whole submissions (slow) --------------------------------------------------------------

def _graded(grade_source, assignment_id: str, replacement: str):
    assignment = Assignment.load(ROOT / "assignments" / assignment_id)
    return grade_source(as_submission(module_for(assignment_id)) + "\n\n" + replacement,
                        assignment=assignment.directory)


# The 2-D habit: k.T, as a tutorial writes it for one unbatched sequence.
KEYS_T = '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.T / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    weights = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights @ v, weights
'''

# A GPT-style tutorial: the mask as floats, 1 where a position is blocked.
FLOAT_BLOCKED_MASK = '''
def causal_mask(T, device=None):
    return torch.triu(torch.ones(T, T, device=device), diagonal=1)
'''

# The RNN habit: feed the whole target, score output[:, 1:] against tgt[:, 1:].
LEAKY_STEP = '''
def train_step(model, src, tgt, optimizer, pad_idx, clip_norm=1.0):
    model.train()
    optimizer.zero_grad()
    output = model(src, tgt)
    output_dim = output.shape[-1]
    output = output[:, 1:].reshape(-1, output_dim)
    loss = F.cross_entropy(output, tgt[:, 1:].reshape(-1), ignore_index=pad_idx)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    return loss.item()
'''


@pytest.mark.slow
def test_keys_transposed_with_dot_t_is_named_with_its_fix(grade_source):
    report = _graded(grade_source, "01", KEYS_T)
    sdpa = part(report, "scaled_dot_product_attention")
    assert sdpa.score < sdpa.max_score and "x.transpose(-2, -1)" in sdpa.hint


@pytest.mark.slow
def test_a_float_mask_that_marks_the_blocked_positions_names_both_mistakes(grade_source):
    report = _graded(grade_source, "02", FLOAT_BLOCKED_MASK)
    mask = part(report, "causal_mask")
    assert mask.score < mask.max_score
    # The value tests name the inversion with the dtype; which test's hint heads the part is
    # the report's ranking.
    values = next(test for test in mask.tests if test.name == "test_causal_mask_values")
    assert values.hint == "wrong dtype (float32, expected bool) and " + variants_02.CAUSAL_BLOCKED


@pytest.mark.slow
def test_the_label_leaking_into_the_input_costs_points_in_train_step_only(grade_source):
    report = _graded(grade_source, "06", LEAKY_STEP)
    step = part(report, "train_step")
    assert step.score < step.max_score and step.hint == variants_06.LABEL_LEAKS
    assert part(report, "end_to_end").score == part(report, "end_to_end").max_score


def test_the_shared_attention_hints_are_worded_once():
    # Each suite prices the shared hint under its own contract's words (hints.Mistake); the
    # words a student reads are the one text in grader.core.hints.
    for shared, suites in ((hints.SCALE_BY_LENGTH, (variants_01.SCALE_BY_LENGTH, variants_02.SCALE_BY_LENGTH)),
                           (hints.MASK_FILL_NOT_NEGATIVE, (variants_02.MASK_FILL_NOT_NEGATIVE,
                                                           variants_03.MASK_FILL_NOT_NEGATIVE))):
        assert all(isinstance(hint, hints.Mistake) and hint == shared for hint in suites)


# Raschka-style causal attention whose blocked mask starts one diagonal too high: each
# position also sees the next one. No named mistake computes this; the probe names the leak.
ONE_STEP_AHEAD = '''
class CausalSelfAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=2))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        if num_tokens > self.context_length:
            raise ValueError("sequence longer than the context")
        keys, queries, values = self.W_key(x), self.W_query(x), self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return self.dropout(attn_weights) @ values
'''


def test_a_mask_that_lets_each_position_see_the_next_names_the_leaking_positions(grade_source):
    report = _graded(grade_source, "02", ONE_STEP_AHEAD)
    attention = part(report, "CausalSelfAttention")
    assert attention.score < attention.max_score
    assert any("position 0 sees position 1, position 1 sees position 2" in hint for hint in attention.hints), \
        attention.hints
    assert all(p.score == p.max_score for p in report.parts if p.id != "CausalSelfAttention")


# ---- d2l.ai's masks: valid lengths where the contract passes a bool mask ------------------------

D2L_MASKED_SOFTMAX = '''
def sequence_mask(X, valid_len, value=0):
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
    return torch.softmax(X.reshape(shape), dim=-1)


def scaled_dot_product_attention(q, k, v, mask=None):
    weights = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), mask)
    return weights @ v, weights
'''


def test_valid_lengths_are_named_from_the_lines_an_exception_passed_through():
    traceback = ('  File "attention.py", line 9, in masked_softmax\n'
                 '    X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)\n')
    shape_error = ("IndexError", "The shape of the mask [14, 7] at index 0 does not match the shape of the "
                   "indexed tensor [10, 7] at index 0")
    assert "not valid lengths" in hints.hint_for_exception(*shape_error, traceback)
    # Neither the habit without a shape error, nor a shape error without the habit.
    assert "not valid lengths" not in (hints.hint_for_exception("ValueError", "bad mask", traceback) or "")
    assert "not valid lengths" not in (hints.hint_for_exception(*shape_error, traceback.replace("valid_lens", "m"))
                                       or "")


def test_a_parameter_named_as_a_tutorial_names_it_gets_the_contract_name():
    def forward(queries, keys, values, valid_lens=None):
        return queries

    hint = hints.hint_for_exception(*_raised(lambda: forward(1, 2, 3, mask=None)))
    assert hint is not None and "name your parameters as the assignment's table does" in hint


class _Misspelled(torch.nn.Module):
    def foward(self, x, mask=None):
        return x


@pytest.mark.parametrize("call", [lambda: _Misspelled()(x3), lambda: _Misspelled()(x3, mask=None)],
                         ids=["positional", "with the mask by name"])
def test_a_module_without_forward_is_told_so_however_it_is_called(call):
    hint = hints.hint_for_exception(*_raised(call))
    assert hint is not None and hint.startswith("the module has no forward method")


@pytest.mark.slow
def test_d2l_masked_softmax_handed_a_bool_mask_is_named_and_its_lines_are_shown(grade_source):
    report = _graded(grade_source, "01", D2L_MASKED_SOFTMAX)
    sdpa = part(report, "scaled_dot_product_attention")
    assert sdpa.score < sdpa.max_score and "not valid lengths" in sdpa.hint
    failed = next(test for test in sdpa.tests if test.name == "test_sdpa_padding_mask")
    # The traceback shows the student's line of code, read from the grader's copy of it.
    assert failed.message.endswith("in sequence_mask\n    X[~mask] = value")


@pytest.mark.slow
def test_attention_that_returns_its_weights_too_headlines_that(grade_source):
    # As nn.MultiheadAttention does: (output, weights). Nine tests fail on it; it must lead.
    source = mutant(as_submission(module_for("03")), "        return self.W_o(combine_heads(heads))  # (B, T_q, d_model)",
                    "        return self.W_o(combine_heads(heads)), weights")
    report = grade_source(source, assignment=Assignment.load(ROOT / "assignments" / "03").directory)
    assert part(report, "MultiHeadAttention").hint == hints.RETURNS_SEVERAL


@pytest.mark.slow
def test_a_causal_mask_applied_transposed_in_03_names_the_leaking_positions(grade_source):
    # Queries and keys confused: each position sees the later ones and not the earlier ones.
    source = mutant(as_submission(module_for("03")), 'scores = scores.masked_fill(~mask, float("-inf"))',
                    'scores = scores.masked_fill(~mask.transpose(-2, -1), float("-inf"))')
    report = grade_source(source, assignment=Assignment.load(ROOT / "assignments" / "03").directory)
    causal = next(test for test in part(report, "MultiHeadAttention").tests if test.name == "test_mha_causal_mask")
    assert causal.outcome == "failed" and "position 0 sees position 1" in causal.hint
    assert causal.hint.endswith(variants_03.MASK_NOT_AS_GIVEN)
