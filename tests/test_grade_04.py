"""Assignment 04 end to end: a part built on another, unfinished or wrong.

Buggy submissions are the reference with one edit (a mutant), so each differs from a
correct solution in exactly the way its name says, and none is a hand-kept copy. The
mistakes every assignment names are in test_mistakes.py.
"""

from __future__ import annotations

import pytest

from grader.core import hints
from reference import as_submission, module_for
from reference.hidden.a04 import variants
from tests.conftest import ROOT, mutant, part

pytestmark = pytest.mark.slow
ASSIGNMENT_04 = ROOT / "assignments" / "04"
REFERENCE = as_submission(module_for("04"))


@pytest.fixture
def grade04(grade_source):
    def run(text, suffix=".py", **kwargs):
        return grade_source(text, suffix=suffix, assignment=ASSIGNMENT_04, **kwargs)
    return run


def test_a_part_using_an_unimplemented_piece_says_which(grade04):
    # PositionalEncoding builds its table with sinusoidal_encoding, here still a stub.
    source = mutant(REFERENCE, 'def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:\n',
                    'def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:\n'
                    '    raise NotImplementedError("sinusoidal_encoding: see assignments/04/README.md")\n')
    report = grade04(source)
    assert part(report, "sinusoidal_encoding").hint == hints.NOT_IMPLEMENTED
    hint = part(report, "PositionalEncoding").hint
    assert "uses your sinusoidal_encoding, which is still a stub" in hint, hint
    assert part(report, "TokenEmbedding").score == part(report, "TokenEmbedding").max_score


def test_a_wrong_table_that_positional_encoding_also_computes_inline_is_named_there(grade04):
    # PositionalEncoding not built from sinusoidal_encoding, with its own concatenation bug:
    # nothing to isolate, so the table check names the mistake.
    source = mutant(REFERENCE, 'self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))',
                    'table = sinusoidal_encoding(max_len, d_model)\n'
                    '        self.register_buffer("pe", torch.cat([table[:, 0::2], table[:, 1::2]], dim=1))')
    report = grade04(source)
    assert part(report, "sinusoidal_encoding").score == part(report, "sinusoidal_encoding").max_score
    result = part(report, "PositionalEncoding")
    assert result.score < result.max_score and variants.CONCATENATED in result.hint, result.hint
