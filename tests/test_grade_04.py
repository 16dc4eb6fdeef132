"""Assignment 04 end to end: reference, stubs, each named mistake.

Buggy submissions are the reference with one edit (a mutant), so each differs from a
correct solution in exactly the way its name says, and none is a hand-kept copy.
"""

from __future__ import annotations


import pytest

from grader import hints
from reference import as_submission
from reference.hidden.a04 import variants
from tests.conftest import ROOT, assert_mistake_named, mutant, part

pytestmark = pytest.mark.slow
ASSIGNMENT_04 = ROOT / "assignments" / "04"
REFERENCE = as_submission("positions")


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


ENCODING = "    pe[:, 0::2] = torch.sin(angle)\n    pe[:, 1::2] = torch.cos(angle)\n"

MISTAKES = {
    # A wrong table costs points in sinusoidal_encoding only: PositionalEncoding is graded
    # against the table it holds (part isolation).
    "sin and cos concatenated": (
        (ENCODING, "    pe[:, : d_model // 2] = torch.sin(angle)\n    pe[:, d_model // 2 :] = torch.cos(angle)\n"),
        {"sinusoidal_encoding": variants.CONCATENATED}),
    "sin and cos swapped": (
        (ENCODING, "    pe[:, 0::2] = torch.cos(angle)\n    pe[:, 1::2] = torch.sin(angle)\n"),
        {"sinusoidal_encoding": variants.SWAPPED}),
    "exponent i/d_model": (
        ("10000.0 ** (two_i / d_model)", "10000.0 ** (two_i / 2 / d_model)"),
        {"sinusoidal_encoding": variants.EXPONENT_I}),
    "table returned in float64": (
        ("    return pe.float()  # (max_len, d_model)", "    return pe  # (max_len, d_model)"),
        {"sinusoidal_encoding": variants.NOT_FLOAT32}),
    "output in float64": (
        ("return self.dropout(x + self.pe[:T].to(x.dtype))", "return self.dropout(x + self.pe[:T].double())"),
        {"PositionalEncoding": variants.PE_DTYPE}),
    "pe stored with a batch dimension": (
        ('self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))',
         'self.register_buffer("pe", sinusoidal_encoding(max_len, d_model)[None])'),
        # forward still adds pe[:T] (all of the (1, max_len, d) table): a shape error
        {"PositionalEncoding": variants.PE_SHAPE}),
    "odd d_model accepted": (
        ("if d_model % 2 != 0:", "if False:"),
        # then the odd table cannot be filled: an IndexError/RuntimeError, not a ValueError
        {"sinusoidal_encoding": None}),
    "pe registered as a parameter": (
        ('self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))',
         "self.pe = nn.Parameter(sinusoidal_encoding(max_len, d_model))"),
        {"PositionalEncoding": variants.PE_PARAMETER}),
    "pe kept as a plain attribute": (
        ('self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))',
         "self.pe = sinusoidal_encoding(max_len, d_model)"),
        {"PositionalEncoding": variants.PE_NOT_REGISTERED}),
    "input scaled in PositionalEncoding": (
        ("return self.dropout(x + self.pe[:T].to(x.dtype))",
         "return self.dropout(x * math.sqrt(x.size(-1)) + self.pe[:T].to(x.dtype))"),
        {"PositionalEncoding": variants.PE_SCALES_INPUT}),
    "dropout on pe only": (
        ("return self.dropout(x + self.pe[:T].to(x.dtype))", "return x + self.dropout(self.pe[:T].to(x.dtype))"),
        {"PositionalEncoding": variants.DROPOUT_ON_PE_ONLY}),
    "no length check": (
        ("if T > self.max_len:", "if False:"),
        {"PositionalEncoding": None}),
    "embeddings not scaled": (
        ("return self.embedding(tokens) * math.sqrt(self.d_model)", "return self.embedding(tokens)"),
        {"TokenEmbedding": variants.EMBEDDING_NOT_SCALED}),
    "embeddings scaled by d_model": (
        ("return self.embedding(tokens) * math.sqrt(self.d_model)", "return self.embedding(tokens) * self.d_model"),
        {"TokenEmbedding": variants.EMBEDDING_SCALED_BY_D_MODEL}),
    "padding_idx dropped": (
        ("nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)", "nn.Embedding(vocab_size, d_model)"),
        {"TokenEmbedding": variants.NO_PADDING_IDX}),
}


@pytest.mark.parametrize("name", MISTAKES)
def test_mistake_loses_points_in_its_part_with_its_hint(grade04, name):
    (old, new), expected_hints = MISTAKES[name]
    report = grade04(mutant(REFERENCE, old, new))
    assert_mistake_named(report, expected_hints, name)


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
