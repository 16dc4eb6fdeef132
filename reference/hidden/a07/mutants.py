"""Assignment 07's named mistakes, each made in the reference: data for tests/test_mistakes.py.

A mutant is the reference submission with one edit (``old`` -> ``new``, unique in it), so it
differs from a correct solution in exactly the way its name says, and none is a hand-kept
copy. The parts it lists lose points with a hint containing that text (None: any hint); every
other part keeps full marks. The grader never collects this module (it is no test_*.py).
"""

from __future__ import annotations

from reference.hidden.a07 import variants

Mutants = dict[str, tuple[tuple[str, str], dict[str, str | None]]]

# ---- Head, MultiHead, MLP, Block, GPT ------------------------------------------------------
MODULE_MUTANTS: Mutants = {}

MODULE_CONTRACT_MISTAKES: dict[str, str] = {}

# ---- generate, end_to_end ------------------------------------------------------------------
SAMPLE_STEP = ("        logits = logits[:, -1, :] / temperature  # (B, V)\n"
               "        if top_k is not None:\n"
               "            kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]  # (B, 1)\n"
               "            logits = logits.masked_fill(logits < kth, float(\"-inf\"))\n"
               "        next_token = torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)  # (B, 1)")

SAMPLING_MUTANTS: Mutants = {
    "context not cropped": (
        ("model(idx[:, -model.context_length:])", "model(idx)"),
        {"generate": variants.CONTEXT_NOT_CROPPED}),
    "temperature after the softmax": (
        (SAMPLE_STEP, SAMPLE_STEP.replace("logits[:, -1, :] / temperature", "logits[:, -1, :]")
                                 .replace("F.softmax(logits, dim=-1)", "F.softmax(logits, dim=-1) / temperature")),
        {"generate": variants.TEMPERATURE_AFTER_SOFTMAX}),
    "temperature multiplied": (
        ("logits[:, -1, :] / temperature", "logits[:, -1, :] * temperature"),
        {"generate": variants.TEMPERATURE_MULTIPLIED}),
    "top_k keeps one token too few": (
        ("logits.masked_fill(logits < kth,", "logits.masked_fill(logits <= kth,"),
        {"generate": variants.TOP_K_WRONG_SET}),
    "top_k keeps the smallest": (
        ("kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]  # (B, 1)\n"
         "            logits = logits.masked_fill(logits < kth,",
         "kth = -torch.topk(-logits, min(top_k, logits.size(-1))).values[:, [-1]]  # (B, 1)\n"
         "            logits = logits.masked_fill(logits > kth,"),
        {"generate": variants.TOP_K_WRONG_SET}),
    "top_k larger than the vocabulary": (
        ("min(top_k, logits.size(-1))", "top_k"),
        {"generate": variants.TOP_K_LARGER_THAN_VOCAB}),
    "generator ignored": (
        (", 1, generator=generator)", ", 1)"),
        {"generate": variants.GENERATOR_IGNORED}),
    "the first position's logits": (
        ("logits[:, -1, :] / temperature", "logits[:, 0, :] / temperature"),
        {"generate": variants.NOT_LAST_POSITION}),
    "argmax instead of sampling": (
        ("torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)", "logits.argmax(-1, keepdim=True)"),
        {"generate": variants.ARGMAX_NOT_SAMPLED}),
    "no eval mode": (
        ("    model.eval()\n    for _ in range(max_new_tokens):", "    for _ in range(max_new_tokens):"),
        {"generate": variants.NOT_EVAL_MODE}),
    "gradients on": (
        ("@torch.no_grad()\ndef generate(", "def generate("),
        {"generate": variants.GRADIENTS_ON}),
    "only the new tokens returned": (
        ("        idx = torch.cat([idx, next_token], dim=1)\n    return idx\n",
         "        idx = torch.cat([idx, next_token], dim=1)\n    return idx[:, -max_new_tokens:]\n"),
        {"generate": variants.PROMPT_NOT_KEPT}),
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
