"""Points lost once, where the mistake is: stock pieces, lazy modules, one return convention.

Tutorial-style submissions (an ``nn.Sequential`` feed-forward network, ``nn.LazyLinear``
layers, a d2l-style encoder layer with its feed-forward network inline) graded end to end.
A layer wired as the contract says keeps its points when its FeedForward's parameters have
other names: a stock FeedForward holding the reference's weights takes its place
(``grader.suite.part_isolation.new_graded_like``), and FeedForward's names cost points there.
"""

from __future__ import annotations

import pytest

from grader.core.report import Status
from grader.suite.part_isolation import STOCK_REPLACED
from reference import as_submission, module_for
from reference.hidden.a05 import variants
from tests.conftest import ROOT, mutant, part

pytestmark = pytest.mark.slow
ASSIGNMENT_01, ASSIGNMENT_05 = ROOT / "assignments" / "01", ROOT / "assignments" / "05"
REFERENCE_05 = as_submission(module_for("05"))
FEED_FORWARD = REFERENCE_05[REFERENCE_05.index("class FeedForward"):REFERENCE_05.index("class EncoderLayer")]

SEQUENTIAL_FEED_FORWARD = '''class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, d_ff),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(d_ff, d_model),
        )

    def forward(self, x):
        return self.net(x)


'''

LAZY_FEED_FORWARD = '''class FeedForward(nn.Module):
    """Sizes inferred on the first call, as some tutorials do."""

    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.LazyLinear(d_ff)
        self.linear2 = nn.LazyLinear(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(self.linear1(x).relu()))


'''

INLINE_FFN = ("        self.ffn = FeedForward(d_model, d_ff, dropout)\n        self.norm1 = nn.LayerNorm(d_model)\n"
              "        self.norm2 = nn.LayerNorm(d_model)\n        self.dropout = nn.Dropout(dropout)\n\n"
              "    def forward(self, x: torch.Tensor, src_mask")
D2L_ENCODER_INIT = ("        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))\n"
                    "        self.norm1 = nn.LayerNorm(d_model)\n        self.norm2 = nn.LayerNorm(d_model)\n"
                    "        self.dropout = nn.Dropout(dropout)\n\n    def forward(self, x: torch.Tensor, src_mask")
ENCODER_FORWARD = ("        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, src_mask)))  # (B, S, d_model)\n"
                   "        return self.norm2(x + self.dropout(self.ffn(x)))  # (B, S, d_model)\n")
D2L_ENCODER_FORWARD = ("        attn_output = self.self_attn(x, x, x, src_mask)\n"
                       "        x = self.norm1(x + self.dropout(attn_output))\n"
                       "        ff_output = self.ffn(x)\n"
                       "        return self.norm2(x + self.dropout(ff_output))\n")
D2L_PRE_NORM_FORWARD = ("        h = self.norm1(x)\n"
                        "        x = x + self.dropout(self.self_attn(h, h, h, src_mask))\n"
                        "        return x + self.dropout(self.ffn(self.norm2(x)))\n")


def full_marks(report, part_id: str) -> bool:
    result = part(report, part_id)
    return result.score == result.max_score


@pytest.fixture
def grade05(grade_source):
    def run(text):
        return grade_source(text, assignment=ASSIGNMENT_05)
    return run


def test_layers_around_a_sequential_feed_forward_keep_their_points(grade05):
    report = grade05(REFERENCE_05.replace(FEED_FORWARD, SEQUENTIAL_FEED_FORWARD))
    assert report.status == Status.GRADED, report.error
    assert not full_marks(report, "FeedForward")
    assert "linear1" in part(report, "FeedForward").hint, part(report, "FeedForward").hint
    for part_id in ("EncoderLayer", "DecoderLayer", "Transformer"):
        assert full_marks(report, part_id), (part_id, part(report, part_id).hint)


def test_a_lazy_linear_feed_forward_gets_full_marks(grade05):
    report = grade05(REFERENCE_05.replace(FEED_FORWARD, LAZY_FEED_FORWARD))
    assert report.status == Status.GRADED, report.error
    assert all(full_marks(report, p.id) for p in report.parts), [(p.id, p.hint) for p in report.parts]


def test_a_d2l_style_encoder_layer_with_its_ffn_inline(grade05):
    # The layer's ffn is an nn.Sequential (names 0, 2): the layer is graded on its wiring.
    inline = mutant(mutant(REFERENCE_05, INLINE_FFN, D2L_ENCODER_INIT), ENCODER_FORWARD, D2L_ENCODER_FORWARD)
    report = grade05(inline)
    assert all(full_marks(report, p.id) for p in report.parts), [(p.id, p.hint) for p in report.parts]

    # Its own mistake (pre-norm) costs points in the layer, and the hint says the ffn is stock.
    report = grade05(mutant(inline, D2L_ENCODER_FORWARD, D2L_PRE_NORM_FORWARD))
    hint = part(report, "EncoderLayer").hint
    assert not full_marks(report, "EncoderLayer")
    assert variants.PRE_NORM in hint, hint
    assert STOCK_REPLACED.format(attrs="ffn", names="0, 2", piece="FeedForward", part="EncoderLayer") in hint, hint
    assert all(full_marks(report, part_id) for part_id in ("FeedForward", "DecoderLayer")), \
        [(p.id, p.hint) for p in report.parts]


def test_every_check_of_scaled_dot_product_attention_wants_the_pair(grade_source):
    # A tutorial that returns only the output: the gradient check agrees with the value checks.
    reference = as_submission(module_for("01"))
    lone = mutant(mutant(reference, "    return weights @ v, weights  #", "    return weights @ v  #"),
                  "output, _ = scaled_dot_product_attention(q, k, v)", "output = scaled_dot_product_attention(q, k, v)")
    report = grade_source(lone, assignment=ASSIGNMENT_01)
    result = part(report, "scaled_dot_product_attention")
    assert result.score == 0, [(test.name, test.outcome) for test in result.tests]
    assert full_marks(report, "SelfAttention"), part(report, "SelfAttention").hint


def test_a_lazy_linear_multi_head_attention_gets_full_marks(grade_source):
    # The grader inspects a lazy module once it is materialized: nothing here is the student's mistake.
    lazy = as_submission(module_for("03"))
    for name in ("W_q", "W_k", "W_v", "W_o"):
        lazy = mutant(lazy, f"self.{name} = nn.Linear(d_model, d_model, bias=bias)",
                      f"self.{name} = nn.LazyLinear(d_model, bias=bias)")
    report = grade_source(lazy)
    assert report.status == Status.GRADED, report.error
    assert full_marks(report, "MultiHeadAttention"), part(report, "MultiHeadAttention").hint
