"""Assignment 07's named mistakes, each made in the reference: data for tests/test_mistakes.py.

A mutant is the reference submission with one edit (``old`` -> ``new``, unique in it), so it
differs from a correct solution in exactly the way its name says, and none is a hand-kept
copy. Each part it lists loses exactly the points written beside it, what an instructor would
take for the mistake, with a hint containing that text (None: any hint); every other part
keeps full marks. The grader never collects this module (it is no test_*.py).
"""

from __future__ import annotations

from grader.suite import FIXED_DEVICE
from reference.hidden.a07 import variants

Mutants = dict[str, tuple[tuple[str, str], dict[str, tuple[float, str | None]]]]

# ---- Head, MultiHead, MLP, Block, GPT ------------------------------------------------------
MODULE_MUTANTS: Mutants = {
    "no causal mask": (
        ("        scores = scores.masked_fill(~self.tril[:length, :length], float(\"-inf\"))\n", ""),
        # The whole model then reads the next token: it cannot continue the corpus by itself.
        {"Head": (5, variants.FUTURE_VISIBLE), "end_to_end": (2, variants.DOES_NOT_CONTINUE)}),
    "mask not cropped": (
        ("~self.tril[:length, :length]", "~self.tril"),
        # end_to_end decodes from a one-character prompt itself, with the trained parameters.
        {"Head": (9, variants.MASK_NOT_CROPPED)}),
    "scaled by d_model": (
        ("k.size(-1) ** -0.5", "x.size(-1) ** -0.5"),
        {"Head": (2, variants.SCALE_BY_INPUT_WIDTH)}),
    "not scaled": (
        (" * k.size(-1) ** -0.5", ""),
        {"Head": (7, variants.NO_SCALE)}),
    "mask filled with zero": (
        ("~self.tril[:length, :length], float(\"-inf\")", "~self.tril[:length, :length], 0.0"),
        {"Head": (9, variants.MASK_FILL_NOT_NEGATIVE)}),
    "no output projection": (
        ("return self.dropout(self.proj(out))", "return self.dropout(out)"),
        {"MultiHead": (7, variants.NO_PROJECTION)}),
    "projection applied twice": (
        ("return self.dropout(self.proj(out))", "return self.dropout(self.proj(self.proj(out)))"),
        # Named (before: no hint). The model still trains, too slowly for end_to_end's bound:
        # end_to_end has nothing of its own to write and is the GPT's work in use.
        {"MultiHead": (6, variants.PROJECTED_TWICE), "end_to_end": (5, None)}),
    "ReLU": (
        ("self.proj(F.gelu(self.fc(x)))", "self.proj(F.relu(self.fc(x)))"),
        {"MLP": (2, variants.RELU)}),
    "tanh GELU": (
        ("self.proj(F.gelu(self.fc(x)))", "self.proj(F.gelu(self.fc(x), approximate=\"tanh\"))"),
        {"MLP": (2, variants.TANH_GELU)}),
    "post-norm": (
        ("        x = x + self.attn(self.ln1(x))  # (B, T, d_model)\n        return x + self.mlp(self.ln2(x))\n",
         "        x = self.ln1(x + self.attn(x))\n        return self.ln2(x + self.mlp(x))\n"),
        {"Block": (3, variants.POST_NORM)}),
    "no residual around the attention": (
        ("x = x + self.attn(self.ln1(x))", "x = self.attn(self.ln1(x))"),
        {"Block": (6, variants.MISSING_RESIDUAL)}),
    "no final LayerNorm": (
        ("logits = self.lm_head(self.ln_f(x))", "logits = self.lm_head(x)"),
        {"GPT": (11, variants.NO_FINAL_NORM)}),
    "positions not added": (
        ("self.token_embedding(idx) + self.position_embedding(positions)", "self.token_embedding(idx)"),
        {"GPT": (11, variants.NO_POSITIONS)}),
    # Issue 27: each part's own dropout, a projection used twice, the lm_head, the MLP's residual,
    # the loss and the device.
    "Head without dropout": (
        ("weights = self.dropout(F.softmax(scores, dim=-1))", "weights = F.softmax(scores, dim=-1)"),
        {"Head": (1, variants.HEAD_DROPOUT_MISSING)}),
    "MultiHead without dropout": (
        ("return self.dropout(self.proj(out))", "return self.proj(out)"),
        {"MultiHead": (1, variants.MULTIHEAD_DROPOUT_MISSING)}),
    "MLP without dropout": (
        ("return self.dropout(self.proj(F.gelu(self.fc(x))))", "return self.proj(F.gelu(self.fc(x)))"),
        {"MLP": (1, variants.MLP_DROPOUT_MISSING)}),
    "MLP with a dropout rate of its own": (
        ("        self.proj = nn.Linear(4 * d_model, d_model)\n        self.dropout = nn.Dropout(dropout)",
         "        self.proj = nn.Linear(4 * d_model, d_model)\n        self.dropout = nn.Dropout(0.1)"),
        {"MLP": (1, variants.DROPOUT_RATE_IGNORED)}),
    "queries from the value projection": (
        ("k, q, v = self.key(x), self.query(x), self.value(x)", "k, q, v = self.key(x), self.value(x), self.value(x)"),
        {"Head": (8, variants.PROJECTION_REUSED)}),
    "no residual around the MLP": (
        ("return x + self.mlp(self.ln2(x))", "return self.mlp(self.ln2(x))"),
        {"Block": (6, variants.MISSING_RESIDUAL_MLP)}),
    "lm_head with a bias": (
        ("self.lm_head = nn.Linear(d_model, vocab_size, bias=False)", "self.lm_head = nn.Linear(d_model, vocab_size)"),
        {"GPT": (1, variants.LM_HEAD_BIAS)}),
    "lm_head tied to the token embedding": (
        ("        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)\n",
         "        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)\n"
         "        self.lm_head.weight = self.token_embedding.weight\n"),
        {"GPT": (2, variants.WEIGHT_TYING)}),
    "targets shifted again": (
        ("return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())",
         "return logits, F.cross_entropy(logits[:, :-1].flatten(0, 1), targets[:, 1:].flatten())"),
        {"GPT": (2, variants.TARGETS_SHIFTED_TWICE)}),
    "positions built on the cpu": (
        ("positions = torch.arange(length, device=idx.device)", "positions = torch.arange(length)"),
        {"GPT": (1, FIXED_DEVICE)}),
    "logits flattened": (
        ("return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())",
         "logits = logits.flatten(0, 1)\n        return logits, F.cross_entropy(logits, targets.flatten())"),
        {"GPT": (2, variants.LOGITS_FLATTENED)}),
    # Dropout that drops the same units on every call: each part's dropout test (its point).
    "Head draws its dropout from a generator seeded on each call": (
        ("        weights = self.dropout(F.softmax(scores, dim=-1))  # (B, T, T)\n",
         "        weights = F.softmax(scores, dim=-1)  # (B, T, T)\n"
         "        if self.training and self.dropout.p > 0:\n"
         "            g = torch.Generator(device=x.device).manual_seed(1337)\n"
         "            mask = torch.rand(weights.shape, generator=g, device=x.device) > self.dropout.p\n"
         "            weights = weights * mask / (1 - self.dropout.p)\n"),
        {"Head": (1, variants.DROPOUT_SAME_UNITS)}),
    "MultiHead seeds the global generator in forward": (
        ("        return self.dropout(self.proj(out))",
         "        torch.manual_seed(1337)\n        return self.dropout(self.proj(out))"),
        {"MultiHead": (1, variants.DROPOUT_SAME_UNITS)}),
    "MLP seeds the global generator in forward": (
        ("        return self.dropout(self.proj(F.gelu(self.fc(x))))",
         "        torch.manual_seed(1337)\n        return self.dropout(self.proj(F.gelu(self.fc(x))))"),
        {"MLP": (1, variants.DROPOUT_SAME_UNITS)}),
}

MODULE_CONTRACT_MISTAKES: dict[str, str] = {
    "future positions visible (no causal mask)": "no causal mask",
    "the mask not cropped to `T` (a crash for `T < context_length`: the hint says to crop)": "mask not cropped",
    "scores scaled by `d_model` instead of the head size": "scaled by d_model",
    "post-norm instead of pre-norm": "post-norm",
    "ReLU (or tanh-approximate GELU) instead of exact GELU": "ReLU",
    "no final LayerNorm": "no final LayerNorm",
    "positions not added": "positions not added",
    "logits returned flattened to `(B*T, V)`": "logits flattened",
}

# ---- generate, end_to_end ------------------------------------------------------------------
SAMPLE_STEP = ("        logits = logits[:, -1, :] / temperature  # (B, V)\n"
               "        if top_k is not None:\n"
               "            kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]  # (B, 1)\n"
               "            logits = logits.masked_fill(logits < kth, float(\"-inf\"))\n"
               "        next_token = torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)  # (B, 1)")

SAMPLING_MUTANTS: Mutants = {
    "context not cropped": (
        ("model(idx[:, -model.context_length:])", "model(idx)"),
        {"generate": (5, variants.CONTEXT_NOT_CROPPED)}),
    "temperature after the softmax": (
        (SAMPLE_STEP, SAMPLE_STEP.replace("logits[:, -1, :] / temperature", "logits[:, -1, :]")
                                 .replace("F.softmax(logits, dim=-1)", "F.softmax(logits, dim=-1) / temperature")),
        {"generate": (3, variants.TEMPERATURE_AFTER_SOFTMAX)}),
    "temperature multiplied": (
        ("logits[:, -1, :] / temperature", "logits[:, -1, :] * temperature"),
        {"generate": (3, variants.TEMPERATURE_MULTIPLIED)}),
    "top_k keeps one token too few": (
        ("logits.masked_fill(logits < kth,", "logits.masked_fill(logits <= kth,"),
        {"generate": (6, variants.TOP_K_WRONG_SET)}),
    "top_k keeps the smallest": (
        ("kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]  # (B, 1)\n"
         "            logits = logits.masked_fill(logits < kth,",
         "kth = -torch.topk(-logits, min(top_k, logits.size(-1))).values[:, [-1]]  # (B, 1)\n"
         "            logits = logits.masked_fill(logits > kth,"),
        {"generate": (5, variants.TOP_K_WRONG_SET)}),
    "top_k larger than the vocabulary": (
        ("min(top_k, logits.size(-1))", "top_k"),
        {"generate": (1, variants.TOP_K_LARGER_THAN_VOCAB)}),
    "generator ignored": (
        (", 1, generator=generator)", ", 1)"),
        {"generate": (1, variants.GENERATOR_IGNORED)}),
    "the first position's logits": (
        ("logits[:, -1, :] / temperature", "logits[:, 0, :] / temperature"),
        {"generate": (13, variants.NOT_LAST_POSITION)}),
    "argmax instead of sampling": (
        ("torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)", "logits.argmax(-1, keepdim=True)"),
        {"generate": (10, variants.ARGMAX_NOT_SAMPLED)}),
    "no eval mode": (
        ("    model.eval()\n    for _ in range(max_new_tokens):", "    for _ in range(max_new_tokens):"),
        {"generate": (1, variants.NOT_EVAL_MODE)}),
    "gradients on": (
        ("@torch.no_grad()\ndef generate(", "def generate("),
        {"generate": (1, variants.GRADIENTS_ON)}),
    "only the new tokens returned": (
        ("        idx = torch.cat([idx, next_token], dim=1)\n    return idx\n",
         "        idx = torch.cat([idx, next_token], dim=1)\n    return idx[:, -max_new_tokens:]\n"),
        {"generate": (17, variants.PROMPT_NOT_KEPT)}),
}

SAMPLING_CONTRACT_MISTAKES: dict[str, str] = {
    "the context not cropped to `context_length` when generating": "context not cropped",
    "temperature applied after the softmax": "temperature after the softmax",
    "`top_k` keeping the wrong set": "top_k keeps one token too few",
    "sampling ignoring `generator`": "generator ignored",
}

# ---- the data tests/test_mistakes.py and tests/test_contract.py read ----------------------
MUTANTS: Mutants = {**MODULE_MUTANTS, **SAMPLING_MUTANTS}

# A part the submission does not define (renamed): it scores 0, "not found", and these parts,
# which do not use it, keep full marks.
MISSING_PART: tuple[str, tuple[str, ...]] = ("generate", ("Head", "MultiHead", "MLP", "Block", "GPT", "end_to_end"))

# Each mistake the contract (assignments/07/assignment.toml) says the grader must name,
# and the mutant above that makes it.
CONTRACT_MISTAKES: dict[str, str] = {**MODULE_CONTRACT_MISTAKES, **SAMPLING_CONTRACT_MISTAKES}
