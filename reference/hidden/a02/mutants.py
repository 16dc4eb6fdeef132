"""Assignment 02's named mistakes, each made in the reference: data for tests/test_mistakes.py.

A mutant is the reference submission with one edit (``old`` -> ``new``, unique in it), so it
differs from a correct solution in exactly the way its name says, and none is a hand-kept
copy. Each part it lists loses exactly the points written beside it, what an instructor would
take for the mistake, with a hint containing that text (None: any hint); every other part
keeps full marks. The grader never collects this module (it is no test_*.py).
"""

from __future__ import annotations

from grader.suite import FIXED_DEVICE
from reference.hidden.a02 import variants

RETURNS_SEVERAL = "return one tensor, not a tuple"

CAUSAL = "torch.ones(T, T, dtype=torch.bool, device=device).tril()"

MUTANTS: dict[str, tuple[tuple[str, str], dict[str, tuple[float, str | None]]]] = {
    # CausalSelfAttention builds its buffer with the student's own causal_mask, so it breaks too,
    # and says to fix causal_mask first (the contract's uses); it passes with the stock
    # causal_mask, so the mistake is charged in causal_mask alone.
    "causal mask with triu": (
        (CAUSAL, CAUSAL.replace(".tril()", ".triu()")),
        {"causal_mask": (3, variants.CAUSAL_TRIU), "CausalSelfAttention": (0, "fix causal_mask first")}),
    "causal mask marks the blocked positions": (
        (CAUSAL, CAUSAL.replace(".tril()", ".triu(1)")),
        {"causal_mask": (3, variants.CAUSAL_BLOCKED), "CausalSelfAttention": (0, "fix causal_mask first")}),
    "causal mask without the diagonal": (
        (CAUSAL, CAUSAL.replace(".tril()", ".tril(-1)")),
        {"causal_mask": (6, variants.CAUSAL_NO_DIAGONAL), "CausalSelfAttention": (0, "fix causal_mask first")}),
    "padding mask inverted": (
        ("(tokens != pad_idx)", "(tokens == pad_idx)"),
        {"padding_mask": (5, variants.PADDING_INVERTED)}),
    "padding mask ignores pad_idx": (
        ("(tokens != pad_idx)", "(tokens != 0)"),
        {"padding_mask": (2, variants.PAD_IDX_IGNORED)}),
    "padding mask of shape (B, 1, T)": (
        ("[:, None, None, :]", "[:, None, :]"),
        {"padding_mask": (7, variants.PADDING_SHAPE)}),
    "padding mask over the queries": (
        ("[:, None, None, :]", "[:, None, :, None]"),
        {"padding_mask": (6, variants.PADDING_OVER_QUERIES)}),
    # CausalSelfAttention keeps full marks under the scaling mistakes: its tests check only
    # that dropout is on in training and off in eval.
    "dropout without 1/(1-p)": (
        ("return x * keep / (1.0 - p)", "return x * keep"),
        {"dropout": (3, variants.DROPOUT_NO_SCALING)}),
    "dropout scaled by (1-p)": (
        ("return x * keep / (1.0 - p)", "return x * keep * (1.0 - p)"),
        {"dropout": (3, variants.DROPOUT_SCALED_BY_KEEP)}),
    "dropout active at evaluation": (
        ("if not training or p == 0.0:", "if p == 0.0:"),
        {"dropout": (2, variants.DROPOUT_IN_EVAL), "CausalSelfAttention": (0, "fix dropout first")}),
    "dropout with p as the keep probability": (
        ("dtype=dtype) >= p", "dtype=dtype) < p"),
        {"dropout": (3, variants.DROPOUT_P_AS_KEEP)}),
    "dropout ignores the generator": (
        ("generator=generator, device=x.device", "device=x.device"),
        {"dropout": (1, variants.DROPOUT_GENERATOR_IGNORED)}),
    "dropout divides by zero at p=1": (
        ("    if p == 1.0:\n        return torch.zeros_like(x)\n", ""),
        {"dropout": (1, variants.DROPOUT_P_ONE)}),
    "causal self-attention without the mask": (
        ("scaled_dot_product_attention(q, k, v, self.mask[:T, :T])", "scaled_dot_product_attention(q, k, v)"),
        {"CausalSelfAttention": (12, variants.NO_CAUSAL_MASK)}),
    "causal self-attention with the mask inverted": (
        ("scaled_dot_product_attention(q, k, v, self.mask[:T, :T])",
         "scaled_dot_product_attention(q, k, v, ~self.mask[:T, :T])"),
        # The rubric's 3: every failing check matches the mistake (its first row, all blocked, is
        # NaN, which the eval-mode check no longer reads as dropout). Before: 12.
        {"CausalSelfAttention": (3, variants.CAUSAL_BLOCKED)}),
    "causal self-attention mask not a buffer": (
        ('self.register_buffer("mask", causal_mask(context_length))', "self.mask = causal_mask(context_length)"),
        {"CausalSelfAttention": (2, variants.MASK_NOT_A_BUFFER)}),
    "causal self-attention dropout in eval mode": (
        ("weights = dropout(weights, self.dropout_p, self.training)", "weights = dropout(weights, self.dropout_p)"),
        {"CausalSelfAttention": (2, variants.CSA_DROPOUT_IN_EVAL)}),
    "causal self-attention without dropout": (
        ("weights = dropout(weights, self.dropout_p, self.training)", "pass"),
        {"CausalSelfAttention": (2, variants.CSA_NO_DROPOUT)}),
    "causal self-attention scaled by sqrt(T)": (
        ("d_k = q.size(-1)", "d_k = q.size(-2)"),
        {"CausalSelfAttention": (9, variants.SCALE_BY_LENGTH)}),
    "causal self-attention scaled by the input width": (
        ("scaled_dot_product_attention(q, k, v, self.mask[:T, :T])",
         "scaled_dot_product_attention(q * (q.size(-1) / x.size(-1)) ** 0.5, k, v, self.mask[:T, :T])"),
        {"CausalSelfAttention": (9, variants.SCALE_BY_INPUT_WIDTH)}),
    "causal self-attention mask filled with 0": (
        ('scores.masked_fill(~mask, float("-inf"))', "scores.masked_fill(~mask, 0.0)"),
        {"CausalSelfAttention": (2, variants.MASK_FILL_NOT_NEGATIVE)}),
    "causal self-attention not scaled": (
        ("/ math.sqrt(d_k)", "/ 1.0"),
        {"CausalSelfAttention": (9, variants.NO_SCALE)}),
    # Issue 27: what used to pass unchecked.
    "dropout falls back to a fixed seed": (
        ("    dtype = x.dtype if x.is_floating_point() else torch.float32\n",
         "    dtype = x.dtype if x.is_floating_point() else torch.float32\n    if generator is None:\n"
         "        generator = torch.Generator(device=x.device).manual_seed(0)\n"),
        {"dropout": (1, variants.DROPOUT_SAME_ELEMENTS)}),
    "causal self-attention drops its output, unscaled": (
        ("        weights = dropout(weights, self.dropout_p, self.training)\n        return weights @ v",
         "        out = weights @ v\n        if self.training and self.dropout_p > 0:\n"
         "            out = out * (torch.rand_like(out) >= self.dropout_p)\n        return out"),
        {"CausalSelfAttention": (2, variants.CSA_DROPOUT_ON_OUTPUT)}),
    "causal self-attention with a dropout rate of its own": (
        ("weights = dropout(weights, self.dropout_p, self.training)", "weights = dropout(weights, 0.1, self.training)"),
        {"CausalSelfAttention": (2, variants.DROPOUT_RATE_IGNORED)}),
    "causal self-attention returns (output, weights)": (
        ("        return weights @ v  # (B, T, d_out)", "        return weights @ v, weights"),
        {"CausalSelfAttention": (16, RETURNS_SEVERAL)}),
    # A fixed seed drops the same units on every call: the part's dropout test (its points).
    "causal self-attention seeds the global generator in forward": (
        ("        weights = dropout(weights, self.dropout_p, self.training)\n",
         "        torch.manual_seed(1337)\n        weights = dropout(weights, self.dropout_p, self.training)\n"),
        {"CausalSelfAttention": (2, variants.DROPOUT_SAME_UNITS)}),
    "causal mask built on the cpu": (
        (CAUSAL, CAUSAL.replace(", device=device", "")),
        {"causal_mask": (1, FIXED_DEVICE)}),
}

# A part the submission does not define (renamed): it scores 0, "not found", and these parts,
# which do not use it, keep full marks.
MISSING_PART: tuple[str, tuple[str, ...]] = ("padding_mask", ("causal_mask",))

# Each mistake the contract (assignments/02/assignment.toml) says the grader must name,
# and the mutant above that makes it.
CONTRACT_MISTAKES = {
    "a causal mask built with `triu` instead of `tril`": "causal mask with triu",
    'a causal mask inverted (True read as "blocked")': 'causal mask marks the blocked positions',
    "the diagonal left out of the causal mask": "causal mask without the diagonal",
    "dropout without the `1/(1-p)` scaling": "dropout without 1/(1-p)",
    "dropout scaled by `(1-p)`": "dropout scaled by (1-p)",
    "dropout active at evaluation": "dropout active at evaluation",
    "`p` used as the keep probability": "dropout with p as the keep probability",
    "scores scaled by `sqrt(T)`, the sequence length": "causal self-attention scaled by sqrt(T)",
    "scores scaled by the input width (`C ** -0.5` with C = d_in)": "causal self-attention scaled by the input width",
    "masked scores filled with a value that is not very negative (0, `1e-15`)":
        "causal self-attention mask filled with 0",
}
