"""Assignment 03's named mistakes, each made in the reference: data for tests/test_mistakes.py.

A mutant is the reference submission with one edit (``old`` -> ``new``, unique in it), so it
differs from a correct solution in exactly the way its name says, and none is a hand-kept
copy. Each part it lists loses exactly the points written beside it, what an instructor would
take for the mistake, with a hint containing that text (None: any hint); every other part
keeps full marks. The grader never collects this module (it is no test_*.py).
"""

from __future__ import annotations

from reference.hidden.a03 import variants

MUTANTS: dict[str, tuple[tuple[str, str], dict[str, tuple[float, str | None]]]] = {
    "split with view, no transpose": (
        ("x.view(batch, length, num_heads, d_k).transpose(1, 2)", "x.reshape(batch, num_heads, length, d_k)"),
        # MultiHeadAttention calls the student's own split_heads: fix that first (the contract's uses);
        # it passes with the stock split_heads, so the mistake is charged in split_heads alone.
        {"split_heads": (3, variants.NO_TRANSPOSE_SPLIT), "MultiHeadAttention": (0, "fix split_heads first")}),
    "missing contiguous": (
        ("x.transpose(1, 2).contiguous().view(", "x.transpose(1, 2).view("),
        # MultiHeadAttention calls the student's own combine_heads, so it breaks too: fix that first;
        # charged in combine_heads alone.
        {"combine_heads": (4, ".contiguous()"), "MultiHeadAttention": (0, "fix combine_heads first")}),
    "scaled by sqrt(d_model)": (
        ("d_k = q.size(-1)\n", "d_k = q.size(-1) * q.size(1)\n"),
        {"MultiHeadAttention": (3, variants.SCALE_D_MODEL)}),
    "not scaled": (
        ("/ math.sqrt(d_k)", "/ 1.0"),
        {"MultiHeadAttention": (3, variants.NO_SCALE)}),
    "scaled by d_k": (
        ("/ math.sqrt(d_k)", "/ d_k"),
        {"MultiHeadAttention": (3, variants.SCALE_D_K)}),
    "softmax over the wrong dimension": (
        ("weights = softmax(scores, dim=-1)", "weights = softmax(scores, dim=-2)"),
        {"MultiHeadAttention": (4, variants.SOFTMAX_DIM)}),
    "mask inverted": (
        ("scores.masked_fill(~mask,", "scores.masked_fill(mask,"),
        {"MultiHeadAttention": (3, variants.MASK_INVERTED)}),
    "mask filled with 0": (
        ('scores.masked_fill(~mask, float("-inf"))', "scores.masked_fill(~mask, 0.0)"),
        {"MultiHeadAttention": (2, variants.MASK_FILL_NOT_NEGATIVE)}),
    # Issue 27: what used to pass unchecked.
    "no dropout": (
        ("heads = self.dropout(weights) @ v", "heads = weights @ v"),
        {"MultiHeadAttention": (2, variants.DROPOUT_MISSING)}),
    "dropout on the output": (
        ("        heads = self.dropout(weights) @ v  # (B, H, T_q, d_k)\n        return self.W_o(combine_heads(heads))",
         "        heads = weights @ v  # (B, H, T_q, d_k)\n"
         "        return self.dropout(self.W_o(combine_heads(heads)))"),
        {"MultiHeadAttention": (2, variants.DROPOUT_ON_OUTPUT)}),
    "key and value detached": (
        ("        q = split_heads(self.W_q(query), self.num_heads)",
         "        key, value = key.detach(), value.detach()\n        q = split_heads(self.W_q(query), self.num_heads)"),
        {"MultiHeadAttention": (2, variants.INPUT_DETACHED)}),
    # A generator of its own, seeded on each call, drops the same units every time (F.dropout
    # takes no generator, so the mask is drawn by hand): the part's dropout test (its points).
    "dropout from a generator seeded on each call": (
        ("        heads = self.dropout(weights) @ v  # (B, H, T_q, d_k)\n",
         "        if self.training and self.dropout.p > 0:\n"
         "            g = torch.Generator(device=weights.device).manual_seed(0)\n"
         "            keep = torch.rand(weights.shape, generator=g, device=weights.device) >= self.dropout.p\n"
         "            weights = weights * keep / (1 - self.dropout.p)\n"
         "        heads = weights @ v  # (B, H, T_q, d_k)\n"),
        {"MultiHeadAttention": (2, variants.DROPOUT_SAME_UNITS)}),
}

# A part the submission does not define (renamed): it scores 0, "not found", and these parts,
# which do not use it, keep full marks.
MISSING_PART: tuple[str, tuple[str, ...]] = ("combine_heads", ("split_heads",))

# Each mistake the contract (assignments/03/assignment.toml) says the grader must name,
# and the mutant above that makes it.
CONTRACT_MISTAKES = {
    "heads split with `view` and no `transpose` (features of different heads mixed)": "split with view, no transpose",
    "scores scaled by `sqrt(d_model)` instead of the head dimension": "scaled by sqrt(d_model)",
    "scores not scaled": "not scaled",
    "scores scaled by `d_k` instead of `sqrt(d_k)`": "scaled by d_k",
    "softmax over the wrong dimension": "softmax over the wrong dimension",
    'mask inverted (True read as "blocked")': 'mask inverted',
    "masked scores filled with a value that is not very negative (0, `1e-15`)": "mask filled with 0",
}
