"""Assignment 01's named mistakes, each made in the reference: data for tests/test_mistakes.py.

A mutant is the reference submission with one edit (``old`` -> ``new``, unique in it), so it
differs from a correct solution in exactly the way its name says, and none is a hand-kept
copy. Each part it lists loses exactly the points written beside it, what an instructor would
take for the mistake, with a hint containing that text (None: any hint); every other part
keeps full marks. The grader never collects this module (it is no test_*.py).
"""

from __future__ import annotations

from reference.hidden.a01 import variants

SOFTMAX_BODY = "    exp = torch.exp(x - row_max)\n    return exp / exp.sum(dim=dim, keepdim=True)\n"

MUTANTS: dict[str, tuple[tuple[str, str], dict[str, tuple[float, str | None]]]] = {
    "softmax ignores dim": (
        ("    row_max = x.amax(dim=dim, keepdim=True)\n",
         "    dim = -1\n    row_max = x.amax(dim=dim, keepdim=True)\n"),
        {"softmax": (3, variants.SOFTMAX_WRONG_DIM)}),
    "no max subtraction": (
        ("exp = torch.exp(x - row_max)", "exp = torch.exp(x)"),
        {"softmax": (3, variants.NO_MAX_SUBTRACTION)}),
    "max over the whole tensor": (
        ("row_max = x.amax(dim=dim, keepdim=True)", "row_max = x.max()"),
        {"softmax": (3, variants.GLOBAL_MAX)}),
    "forbidden torch.softmax": (
        (SOFTMAX_BODY, "    return torch.softmax(x, dim=dim)\n"),
        {"softmax": (14, variants.FORBIDDEN_SOFTMAX)}),
    "scores scaled": (
        ("return query @ keys.transpose(-2, -1)", "return query @ keys.transpose(-2, -1) / math.sqrt(query.size(-1))"),
        # scaled_dot_product_attention scales again, and SelfAttention calls it: each says to fix
        # attention_scores first, where the mistake is (the sdpa in between keeps full marks), and
        # loses nothing: the mistake is charged once.
        {"attention_scores": (5, variants.SCORES_SCALED),
         "scaled_dot_product_attention": (0, "fix attention_scores first"),
         "SelfAttention": (0, "fix attention_scores first")}),
    "scores transposed": (
        ("return query @ keys.transpose(-2, -1)", "return keys @ query.transpose(-2, -1)"),
        {"attention_scores": (7, variants.SCORES_TRANSPOSED),
         "scaled_dot_product_attention": (0, variants.OWN_PIECES_WRONG),
         "SelfAttention": (0, "fix attention_scores first")}),
    "not scaled": (
        ("/ math.sqrt(d_k)", "/ 1.0"),
        # SelfAttention calls the student's own scaled_dot_product_attention: it breaks too, and
        # passes with the stock one, so it says what to fix first and loses nothing.
        {"scaled_dot_product_attention": (3, variants.NO_SCALE),
         "SelfAttention": (0, "fix scaled_dot_product_attention first")}),
    "scaled by d_k": (
        ("/ math.sqrt(d_k)", "/ d_k"),
        {"scaled_dot_product_attention": (3, variants.SCALE_D_K),
         "SelfAttention": (0, "fix scaled_dot_product_attention first")}),
    "scaled by sqrt(T)": (
        ("d_k = q.size(-1)", "d_k = q.size(-2)"),
        {"scaled_dot_product_attention": (3, variants.SCALE_BY_LENGTH),
         "SelfAttention": (0, "fix scaled_dot_product_attention first")}),
    "attention softmax over the wrong dimension": (
        ("weights = softmax(scores, dim=-1)", "weights = softmax(scores, dim=-2)"),
        {"scaled_dot_product_attention": (3, variants.SOFTMAX_DIM),
         "SelfAttention": (0, "fix scaled_dot_product_attention first")}),
    "mask inverted": (
        ("scores.masked_fill(~mask,", "scores.masked_fill(mask,"),
        {"scaled_dot_product_attention": (3, variants.MASK_INVERTED)}),
    "mask inverted, filled with -1e9": (
        ('scores.masked_fill(~mask, float("-inf"))', "scores.masked_fill(mask, -1e9)"),
        {"scaled_dot_product_attention": (3, variants.MASK_INVERTED)}),
    "mask applied after the softmax": (
        ('        scores = scores.masked_fill(~mask, float("-inf"))\n    weights = softmax(scores, dim=-1)',
         "        pass\n    weights = softmax(scores, dim=-1)\n"
         "    if mask is not None:\n        weights = weights.masked_fill(~mask, 0.0)"),
        {"scaled_dot_product_attention": (2, variants.MASK_AFTER_SOFTMAX)}),
    "mask filled with 1e-15": (
        ('scores.masked_fill(~mask, float("-inf"))', 'scores.masked_fill(~mask, 1e-15)'),
        {"scaled_dot_product_attention": (2, variants.MASK_FILL_NOT_NEGATIVE)}),
    "mask ignored": (
        ('scores = scores.masked_fill(~mask, float("-inf"))', "pass"),
        {"scaled_dot_product_attention": (4, variants.MASK_IGNORED)}),
    "returns (weights, output)": (
        ("return weights @ v, weights", "return weights, weights @ v"),
        {"scaled_dot_product_attention": (13, variants.RETURN_ORDER),
         "SelfAttention": (0, "fix scaled_dot_product_attention first")}),
    "W_query and W_key swapped": (
        ("q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)",
         "q, k, v = self.W_key(x), self.W_query(x), self.W_value(x)"),
        {"SelfAttention": (6, variants.QUERY_KEY_SWAPPED)}),
}

# A part the submission does not define (renamed): it scores 0, "not found", and these parts,
# which do not use it, keep full marks.
MISSING_PART: tuple[str, tuple[str, ...]] = ("attention_scores", ("softmax",))

# Each mistake the contract (assignments/01/assignment.toml) says the grader must name,
# and the mutant above that makes it.
CONTRACT_MISTAKES = {
    "softmax over the wrong dimension": "softmax ignores dim",
    "no max subtraction (overflow to nan/inf)": "no max subtraction",
    "a forbidden built-in softmax": "forbidden torch.softmax",
    "scores not scaled": "not scaled",
    "scores scaled by `d_k` instead of `sqrt(d_k)`": "scaled by d_k",
    'mask inverted (True read as "blocked")': 'mask inverted',
    "mask applied after the softmax": "mask applied after the softmax",
    "scores scaled by `sqrt(T)`, the sequence length": "scaled by sqrt(T)",
    "masked scores filled with a value that is not very negative (0, `1e-15`)": "mask filled with 1e-15",
}
