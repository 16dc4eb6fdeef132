"""Assignment 04's named mistakes, each made in the reference: data for tests/test_mistakes.py.

A mutant is the reference submission with one edit (``old`` -> ``new``, unique in it), so it
differs from a correct solution in exactly the way its name says, and none is a hand-kept
copy. Each part it lists loses exactly the points written beside it, what an instructor would
take for the mistake, with a hint containing that text (None: any hint); every other part
keeps full marks. The grader never collects this module (it is no test_*.py).
"""

from __future__ import annotations

from reference.hidden.a04 import variants

ENCODING = "    pe[:, 0::2] = torch.sin(angle)\n    pe[:, 1::2] = torch.cos(angle)\n"

MUTANTS: dict[str, tuple[tuple[str, str], dict[str, tuple[float, str | None]]]] = {
    # A wrong table costs points in sinusoidal_encoding only: PositionalEncoding is graded
    # against the table it holds (part isolation).
    "sin and cos concatenated": (
        (ENCODING, "    pe[:, : d_model // 2] = torch.sin(angle)\n    pe[:, d_model // 2 :] = torch.cos(angle)\n"),
        {"sinusoidal_encoding": (2, variants.CONCATENATED)}),
    "sin and cos swapped": (
        (ENCODING, "    pe[:, 0::2] = torch.cos(angle)\n    pe[:, 1::2] = torch.sin(angle)\n"),
        {"sinusoidal_encoding": (2, variants.SWAPPED)}),
    "exponent i/d_model": (
        ("10000.0 ** (two_i / d_model)", "10000.0 ** (two_i / 2 / d_model)"),
        {"sinusoidal_encoding": (3, variants.EXPONENT_I)}),
    "table returned in float64": (
        ("    return pe.float()  # (max_len, d_model)", "    return pe  # (max_len, d_model)"),
        {"sinusoidal_encoding": (1, variants.NOT_FLOAT32)}),
    "output in float64": (
        ("return self.dropout(x + self.pe[:T].to(x.dtype))", "return self.dropout(x + self.pe[:T].double())"),
        {"PositionalEncoding": (5, variants.PE_DTYPE)}),
    "pe stored with a batch dimension": (
        ('self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))',
         'self.register_buffer("pe", sinusoidal_encoding(max_len, d_model)[None])'),
        # forward still adds pe[:T] (all of the (1, max_len, d) table): a shape error
        {"PositionalEncoding": (9, variants.PE_SHAPE)}),
    "odd d_model accepted": (
        ("if d_model % 2 != 0:", "if False:"),
        # then the odd table cannot be filled: an IndexError/RuntimeError, not a ValueError
        {"sinusoidal_encoding": (1, None)}),
    "pe registered as a parameter": (
        ('self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))',
         "self.pe = nn.Parameter(sinusoidal_encoding(max_len, d_model))"),
        {"PositionalEncoding": (2, variants.PE_PARAMETER)}),
    "pe kept as a plain attribute": (
        ('self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))',
         "self.pe = sinusoidal_encoding(max_len, d_model)"),
        {"PositionalEncoding": (4, variants.PE_NOT_REGISTERED)}),
    "input scaled in PositionalEncoding": (
        ("return self.dropout(x + self.pe[:T].to(x.dtype))",
         "return self.dropout(x * math.sqrt(x.size(-1)) + self.pe[:T].to(x.dtype))"),
        {"PositionalEncoding": (5, variants.PE_SCALES_INPUT)}),
    "dropout on pe only": (
        ("return self.dropout(x + self.pe[:T].to(x.dtype))", "return x + self.dropout(self.pe[:T].to(x.dtype))"),
        {"PositionalEncoding": (1, variants.DROPOUT_ON_PE_ONLY)}),
    "no length check": (
        ("if T > self.max_len:", "if False:"),
        {"PositionalEncoding": (1, None)}),
    "embeddings not scaled": (
        ("return self.embedding(tokens) * math.sqrt(self.d_model)", "return self.embedding(tokens)"),
        {"TokenEmbedding": (5, variants.EMBEDDING_NOT_SCALED)}),
    "embeddings scaled by d_model": (
        ("return self.embedding(tokens) * math.sqrt(self.d_model)", "return self.embedding(tokens) * self.d_model"),
        {"TokenEmbedding": (5, variants.EMBEDDING_SCALED_BY_D_MODEL)}),
    # Issue 27: graded against the reference's table, not the one the module adds.
    "positional encoding adds nothing": (
        ("return self.dropout(x + self.pe[:T].to(x.dtype))", "return self.dropout(x)"),
        {"PositionalEncoding": (9, variants.PE_NOT_ADDED)}),
    "positional encoding builds its own table, sin and cos swapped": (
        ('self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))',
         "pe = sinusoidal_encoding(max_len, d_model)\n"
         "        self.register_buffer(\"pe\", torch.stack([pe[:, 1::2], pe[:, 0::2]], dim=-1).flatten(1))"),
        {"PositionalEncoding": (2, variants.SWAPPED)}),
    "padding_idx dropped": (
        ("nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)", "nn.Embedding(vocab_size, d_model)"),
        {"TokenEmbedding": (2, variants.NO_PADDING_IDX)}),
    # A fixed seed drops the same units on every call: the dropout test's point.
    "positional encoding seeds the global generator in forward": (
        ("        return self.dropout(x + self.pe[:T].to(x.dtype))",
         "        torch.manual_seed(1337)\n        return self.dropout(x + self.pe[:T].to(x.dtype))"),
        {"PositionalEncoding": (1, variants.DROPOUT_SAME_UNITS)}),
}

# A part the submission does not define (renamed): it scores 0, "not found", and these parts,
# which do not use it, keep full marks.
MISSING_PART: tuple[str, tuple[str, ...]] = ("sinusoidal_encoding", ("TokenEmbedding",))

# Each mistake the contract (assignments/04/assignment.toml) says the grader must name,
# and the mutant above that makes it.
CONTRACT_MISTAKES = {
    "sin and cos concatenated instead of interleaved": "sin and cos concatenated",
    "sin and cos swapped": "sin and cos swapped",
    "exponent `i/d_model` instead of `2i/d_model`": "exponent i/d_model",
}
