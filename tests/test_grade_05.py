"""Assignment 05 end to end: reference, stubs, each named mistake, part isolation.

Buggy submissions are the reference with one edit (a mutant), so each differs from a
correct solution in exactly the way its name says, and none is a hand-kept copy. The
reference as a submission inlines the earlier assignments' modules it imports, exactly
as a student pastes their own.
"""

from __future__ import annotations


import pytest

from grader.report import GradeReport, Status
from reference import as_submission
from reference.hidden.a05 import variants
from tests.conftest import ROOT, assert_mistake_named, mutant, part

pytestmark = pytest.mark.slow
ASSIGNMENT_05 = ROOT / "assignments" / "05"
PARTS = ("FeedForward", "EncoderLayer", "DecoderLayer", "Transformer")
REFERENCE = as_submission("layers")


def full_marks(report: GradeReport, part_id: str) -> bool:
    result = part(report, part_id)
    return result.score == result.max_score


@pytest.fixture
def grade05(grade_source):
    def run(text, suffix=".py", **kwargs):
        return grade_source(text, suffix=suffix, assignment=ASSIGNMENT_05, **kwargs)
    return run


def test_parts_done_but_earlier_pieces_not_pasted_say_so(grade05):
    # The student's 05 parts with the handout's stubs for 02-04 still in place.
    stub = (ASSIGNMENT_05 / "layers.py").read_text()
    earlier = stub[: stub.index("# ---- Assignment 05")]
    own = REFERENCE[REFERENCE.index("# ---- reference/layers.py"):]
    own = "\n".join(line for line in own.splitlines() if not line.startswith(("import ", "from ")))
    report = grade05(earlier + own)
    assert full_marks(report, "FeedForward")
    for part_id in ("EncoderLayer", "DecoderLayer", "Transformer"):
        hint = part(report, part_id).hint
        assert part(report, part_id).score == 0
        # The Transformer meets the stub TokenEmbedding (assignment 04) first.
        assert "which is still a stub (from assignment" in hint and "paste your solution here" in hint, hint
    assert "uses your MultiHeadAttention, which is still a stub (from assignment 03" in part(report, "EncoderLayer").hint


UNSCALED_ATTENTION = ("scores = attention_scores(q, k) / math.sqrt(d_k)", "scores = attention_scores(q, k) / 1.0")
ENCODER_FORWARD = ("        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, src_mask)))  # (B, S, d_model)\n"
                   "        return self.norm2(x + self.dropout(self.ffn(x)))  # (B, S, d_model)\n")
ENCODER_PRE_NORM = ("        h = self.norm1(x)\n"
                    "        x = x + self.dropout(self.self_attn(h, h, h, src_mask))\n"
                    "        return x + self.dropout(self.ffn(self.norm2(x)))\n")


def test_a_broken_multi_head_attention_costs_no_points_in_05(grade05):
    # Part isolation: scores not scaled is assignment 03's mistake. The layers and the
    # Transformer are graded with the student's own attention as a black box.
    report = grade05(mutant(REFERENCE, *UNSCALED_ATTENTION))
    assert report.status == Status.GRADED
    assert all(full_marks(report, part_id) for part_id in PARTS), [(p.id, p.hint) for p in report.parts]


def test_a_layer_mistake_with_a_broken_attention_says_to_fix_the_attention_first(grade05):
    report = grade05(mutant(mutant(REFERENCE, *UNSCALED_ATTENTION), ENCODER_FORWARD, ENCODER_PRE_NORM))
    hint = part(report, "EncoderLayer").hint
    assert not full_marks(report, "EncoderLayer")
    assert variants.PRE_NORM in hint, hint
    assert "fix first" in hint and variants.piece("MultiHeadAttention", ["self_attn"], "assignment 03") in hint, \
        hint
    assert all(full_marks(report, part_id) for part_id in ("FeedForward", "DecoderLayer", "Transformer"))


CROSS_ATTENTION = "x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory, memory_mask)))"
TGT_MASK = "tgt_mask = padding_mask(tgt_in, self.pad_idx) & causal_mask("

MISTAKES = {
    # A layer's wiring mistake costs points in that layer only: the Transformer is graded
    # with its own layers as black boxes.
    "encoder pre-norm": (
        (ENCODER_FORWARD, ENCODER_PRE_NORM),
        {"EncoderLayer": variants.PRE_NORM}),
    "encoder residual missing around the feed-forward network": (
        ("return self.norm2(x + self.dropout(self.ffn(x)))", "return self.norm2(self.dropout(self.ffn(x)))"),
        {"EncoderLayer": variants.MISSING_RESIDUAL}),
    "decoder pre-norm": (
        ("        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, tgt_mask)))  # (B, T, d_model)\n"
         "        # Queries come from the decoder, keys and values from the encoder output.\n"
         f"        {CROSS_ATTENTION}\n"
         "        return self.norm3(x + self.dropout(self.ffn(x)))  # (B, T, d_model)\n",
         "        x = x + self.self_attn(self.norm1(x), self.norm1(x), self.norm1(x), tgt_mask)\n"
         "        x = x + self.cross_attn(self.norm2(x), memory, memory, memory_mask)\n"
         "        return x + self.ffn(self.norm3(x))\n"),
        {"DecoderLayer": variants.PRE_NORM}),
    "decoder residual missing around the cross-attention": (
        ("self.norm2(x + self.dropout(self.cross_attn(", "self.norm2(0 + self.dropout(self.cross_attn("),
        {"DecoderLayer": variants.MISSING_RESIDUAL}),
    "cross-attention over the decoder's own states": (
        ("self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(x, x, x, memory_mask)"),
        # With T != S and a memory mask the layer cannot run at all, so the Transformer,
        # which calls it, fails too and says which piece to fix.
        {"DecoderLayer": variants.CROSS_OVER_OWN_STATES,
         "Transformer": variants.PIECE_RAISES.format(piece="DecoderLayer (decoder_layers[0])",
                                                     where="the DecoderLayer part")}),
    "cross-attention through self_attn": (
        ("self.cross_attn(x, memory, memory, memory_mask)", "self.self_attn(x, memory, memory, memory_mask)"),
        {"DecoderLayer": variants.CROSS_USES_SELF_ATTN}),
    "no ReLU": (
        ("self.linear2(self.dropout(torch.relu(self.linear1(x))))", "self.linear2(self.dropout(self.linear1(x)))"),
        {"FeedForward": variants.NO_RELU}),
    "feed-forward dropout on the output": (
        ("self.linear2(self.dropout(torch.relu(self.linear1(x))))",
         "self.dropout(self.linear2(torch.relu(self.linear1(x))))"),
        {"FeedForward": variants.DROPOUT_ON_OUTPUT}),
    "no causal mask": (
        (TGT_MASK, "tgt_mask = padding_mask(tgt_in, self.pad_idx) | causal_mask("),
        {"Transformer": variants.NO_CAUSAL_MASK}),
    "no memory mask": (
        ("self.decode(tgt_in, memory, tgt_mask, src_mask)", "self.decode(tgt_in, memory, tgt_mask, None)"),
        {"Transformer": variants.NO_MEMORY_MASK}),
    "no positional encoding on the target": (
        ("x = self.pos_encoding(self.tgt_embed(tgt_in))", "x = self.tgt_embed(tgt_in)"),
        {"Transformer": variants.NO_POSITIONS_TGT}),
    "decode returns logits": (
        ("            x = layer(x, memory, tgt_mask, memory_mask)\n        return x\n",
         "            x = layer(x, memory, tgt_mask, memory_mask)\n        return self.generator(x)\n"),
        {"Transformer": variants.DECODE_RETURNS_LOGITS}),
}


@pytest.mark.parametrize("name", MISTAKES)
def test_mistake_loses_points_in_its_part_with_its_hint(grade05, name):
    (old, new), expected_hints = MISTAKES[name]
    report = grade05(mutant(REFERENCE, old, new))
    assert_mistake_named(report, expected_hints, name)


def test_a_broken_feed_forward_costs_points_in_feed_forward_only(grade05):
    # EncoderLayer and DecoderLayer call their own ffn as a black box, like their attention.
    report = grade05(mutant(REFERENCE, "self.linear2(self.dropout(torch.relu(self.linear1(x))))",
                            "self.linear2(self.dropout(torch.relu(self.linear1(x)))) * 2"))
    assert not full_marks(report, "FeedForward")
    assert all(full_marks(report, part_id) for part_id in ("EncoderLayer", "DecoderLayer", "Transformer"))


def test_a_broken_token_embedding_costs_no_points_in_05(grade05):
    # TokenEmbedding is assignment 04's; the Transformer is graded on how it uses it.
    report = grade05(mutant(REFERENCE, "return self.embedding(tokens) * math.sqrt(self.d_model)",
                            "return self.embedding(tokens)"))
    assert all(full_marks(report, part_id) for part_id in PARTS), [(p.id, p.hint) for p in report.parts]
