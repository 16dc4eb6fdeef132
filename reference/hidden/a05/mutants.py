"""Assignment 05's named mistakes, each made in the reference: data for tests/test_mistakes.py.

A mutant is the reference submission with one edit (``old`` -> ``new``, unique in it), so it
differs from a correct solution in exactly the way its name says, and none is a hand-kept
copy. Each part it lists loses exactly the points written beside it, what an instructor would
take for the mistake, with a hint containing that text (None: any hint); every other part
keeps full marks. The grader never collects this module (it is no test_*.py).
"""

from __future__ import annotations

from grader.suite import FIXED_DEVICE
from reference.hidden.a05 import variants

ENCODER_FORWARD = ("        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, src_mask)))  # (B, S, d_model)\n"
                   "        return self.norm2(x + self.dropout(self.ffn(x)))  # (B, S, d_model)\n")

ENCODER_PRE_NORM = ("        h = self.norm1(x)\n"
                    "        x = x + self.dropout(self.self_attn(h, h, h, src_mask))\n"
                    "        return x + self.dropout(self.ffn(self.norm2(x)))\n")

CROSS_ATTENTION = "x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory, memory_mask)))"

DECODER_FORWARD = ("        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, tgt_mask)))  # (B, T, d_model)\n"
                   "        # Queries come from the decoder, keys and values from the encoder output.\n"
                   f"        {CROSS_ATTENTION}\n"
                   "        return self.norm3(x + self.dropout(self.ffn(x)))  # (B, T, d_model)\n")

TGT_MASK = "tgt_mask = padding_mask(tgt_in, self.pad_idx) & causal_mask("

MUTANTS: dict[str, tuple[tuple[str, str], dict[str, tuple[float, str | None]]]] = {
    # A layer's wiring mistake costs points in that layer only: the Transformer is graded
    # with its own layers as black boxes.
    "encoder pre-norm": (
        (ENCODER_FORWARD, ENCODER_PRE_NORM),
        {"EncoderLayer": (3, variants.PRE_NORM)}),
    "encoder residual missing around the feed-forward network": (
        ("return self.norm2(x + self.dropout(self.ffn(x)))", "return self.norm2(self.dropout(self.ffn(x)))"),
        {"EncoderLayer": (7, variants.MISSING_RESIDUAL)}),
    "decoder pre-norm": (
        (DECODER_FORWARD,
         "        h = self.norm1(x)\n"
         "        x = x + self.dropout(self.self_attn(h, h, h, tgt_mask))\n"
         "        x = x + self.dropout(self.cross_attn(self.norm2(x), memory, memory, memory_mask))\n"
         "        return x + self.dropout(self.ffn(self.norm3(x)))\n"),
        {"DecoderLayer": (3, variants.PRE_NORM)}),
    "decoder residual missing around the cross-attention": (
        ("self.norm2(x + self.dropout(self.cross_attn(", "self.norm2(0 + self.dropout(self.cross_attn("),
        {"DecoderLayer": (7, variants.MISSING_RESIDUAL)}),
    "cross-attention over the decoder's own states": (
        ("self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(x, x, x, memory_mask)"),
        # With T != S and a memory mask the layer cannot run at all, so the Transformer,
        # which calls it, fails too and says which piece to fix; it runs with the stock
        # DecoderLayer, so the mistake is charged in DecoderLayer alone. Before: 13 more here.
        {"DecoderLayer": (8, variants.CROSS_OVER_OWN_STATES),
         "Transformer": (0, variants.PIECE_RAISES.format(piece="DecoderLayer (decoder_layers[0])",
                                                    where="the DecoderLayer part"))}),
    "cross-attention through self_attn": (
        ("self.cross_attn(x, memory, memory, memory_mask)", "self.self_attn(x, memory, memory, memory_mask)"),
        {"DecoderLayer": (8, variants.CROSS_USES_SELF_ATTN)}),
    "no ReLU": (
        ("self.linear2(self.dropout(torch.relu(self.linear1(x))))", "self.linear2(self.dropout(self.linear1(x)))"),
        {"FeedForward": (5, variants.NO_RELU)}),
    "feed-forward dropout on the output": (
        ("self.linear2(self.dropout(torch.relu(self.linear1(x))))",
         "self.dropout(self.linear2(torch.relu(self.linear1(x))))"),
        {"FeedForward": (1, variants.DROPOUT_ON_OUTPUT)}),
    "no causal mask": (
        (TGT_MASK, "tgt_mask = padding_mask(tgt_in, self.pad_idx) | causal_mask("),
        {"Transformer": (7, variants.NO_CAUSAL_MASK)}),
    "no memory mask": (
        ("self.decode(tgt_in, memory, tgt_mask, src_mask)", "self.decode(tgt_in, memory, tgt_mask, None)"),
        {"Transformer": (6, variants.NO_MEMORY_MASK)}),
    "no positional encoding on the target": (
        ("x = self.pos_encoding(self.tgt_embed(tgt_in))", "x = self.tgt_embed(tgt_in)"),
        {"Transformer": (8, variants.NO_POSITIONS_TGT)}),
    # Issue 27: each part's own dropout, checked in training mode.
    "encoder without dropout": (
        (ENCODER_FORWARD, ENCODER_FORWARD.replace("self.dropout(self.self_attn(x, x, x, src_mask))",
                                                  "self.self_attn(x, x, x, src_mask)")
         .replace("self.dropout(self.ffn(x))", "self.ffn(x)")),
        {"EncoderLayer": (1, variants.DROPOUT_MISSING_IN_LAYER)}),
    "encoder dropout after the norm": (
        (ENCODER_FORWARD, ENCODER_FORWARD.replace("self.norm1(x + self.dropout(self.self_attn(x, x, x, src_mask)))",
                                                  "self.dropout(self.norm1(x + self.self_attn(x, x, x, src_mask)))")),
        {"EncoderLayer": (1, variants.DROPOUT_MISPLACED_IN_LAYER)}),
    "decoder without dropout": (
        (DECODER_FORWARD, DECODER_FORWARD.replace("self.dropout(", "(")),
        {"DecoderLayer": (1, variants.DROPOUT_MISSING_IN_LAYER)}),
    "feed-forward without dropout": (
        ("self.linear2(self.dropout(torch.relu(self.linear1(x))))", "self.linear2(torch.relu(self.linear1(x)))"),
        {"FeedForward": (1, variants.DROPOUT_MISSING)}),
    "causal mask built on the cpu": (
        ("tgt_in.size(1), device=tgt_in.device", "tgt_in.size(1)"),
        {"Transformer": (1, FIXED_DEVICE)}),
    "decode returns logits": (
        ("            x = layer(x, memory, tgt_mask, memory_mask)\n        return x\n",
         "            x = layer(x, memory, tgt_mask, memory_mask)\n        return self.generator(x)\n"),
        {"Transformer": (14, variants.DECODE_RETURNS_LOGITS)}),
    # A fixed seed drops the same units on every call: each part's dropout test (its point).
    "feed-forward seeds the global generator in forward": (
        ("        return self.linear2(self.dropout(torch.relu(self.linear1(x))))",
         "        torch.manual_seed(1337)\n        return self.linear2(self.dropout(torch.relu(self.linear1(x))))"),
        {"FeedForward": (1, variants.DROPOUT_SAME_UNITS)}),
    "encoder seeds the global generator in forward": (
        (ENCODER_FORWARD, "        torch.manual_seed(1337)\n" + ENCODER_FORWARD),
        {"EncoderLayer": (1, variants.DROPOUT_SAME_UNITS)}),
    "decoder seeds the global generator in forward": (
        (DECODER_FORWARD, "        torch.manual_seed(1337)\n" + DECODER_FORWARD),
        {"DecoderLayer": (1, variants.DROPOUT_SAME_UNITS)}),
}

# A part the submission does not define (renamed): it scores 0, "not found", and these parts,
# which do not use it, keep full marks.
MISSING_PART: tuple[str, tuple[str, ...]] = ("FeedForward", ())

# Each mistake the contract (assignments/05/assignment.toml) says the grader must name,
# and the mutant above that makes it.
CONTRACT_MISTAKES = {
    "pre-norm instead of post-norm": "encoder pre-norm",
    "a missing residual": "encoder residual missing around the feed-forward network",
    "cross-attention over the decoder's own states": "cross-attention over the decoder's own states",
}
