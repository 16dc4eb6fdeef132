"""Assignment 05 end to end: part isolation, earlier pieces not pasted.

Buggy submissions are the reference with one edit (a mutant), so each differs from a
correct solution in exactly the way its name says, and none is a hand-kept copy. The
reference as a submission inlines the earlier assignments' modules it imports, exactly
as a student pastes their own. The mistakes every assignment names are in test_mistakes.py.
"""

from __future__ import annotations

import pytest

from grader import suite
from grader.core.report import GradeReport, Status
from reference import as_submission, module_for
from reference.hidden.a05 import variants
from reference.hidden.a05.mutants import ENCODER_FORWARD, ENCODER_PRE_NORM
from tests.conftest import ROOT, mutant, part

pytestmark = pytest.mark.slow
ASSIGNMENT_05 = ROOT / "assignments" / "05"
PARTS = ("FeedForward", "EncoderLayer", "DecoderLayer", "Transformer")
REFERENCE = as_submission(module_for("05"))


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


def test_a_broken_multi_head_attention_costs_no_points_in_05(grade05):
    # Part isolation: scores not scaled is assignment 03's mistake. The layers and the
    # Transformer are graded with the student's own attention as a black box.
    report = grade05(mutant(REFERENCE, *UNSCALED_ATTENTION))
    assert report.status == Status.GRADED
    assert all(full_marks(report, part_id) for part_id in PARTS), [(p.id, p.hint) for p in report.parts]


def test_a_layer_mistake_with_a_broken_attention_leads_with_its_own_mistake_then_the_attention(grade05):
    # The layer fails with its own attention too (part isolation): the attention is not its cause.
    report = grade05(mutant(mutant(REFERENCE, *UNSCALED_ATTENTION), ENCODER_FORWARD, ENCODER_PRE_NORM))
    hint = part(report, "EncoderLayer").hint
    assert not full_marks(report, "EncoderLayer")
    assert hint.startswith(variants.PRE_NORM), hint
    assert hint.endswith(suite.PIECES_DIFFER.format(
        pieces=suite.describe_piece("MultiHeadAttention", ["self_attn"], "assignment 03"))), hint
    assert all(full_marks(report, part_id) for part_id in ("FeedForward", "DecoderLayer", "Transformer"))


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
