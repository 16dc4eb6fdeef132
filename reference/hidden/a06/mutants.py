"""Assignment 06's named mistakes, each made in the reference: data for tests/test_mistakes.py.

A mutant is the reference submission with one edit (``old`` -> ``new``, unique in it), so it
differs from a correct solution in exactly the way its name says, and none is a hand-kept
copy. Each part it lists loses exactly the points written beside it, what an instructor would
take for the mistake, with a hint containing that text (None: any hint); every other part
keeps full marks. The grader never collects this module (it is no test_*.py).
"""

from __future__ import annotations

from reference.hidden.a06 import variants

CLIP_THEN_STEP = "    nn.utils.clip_grad_norm_(model.parameters(), clip_norm)\n    optimizer.step()\n"

CROSS_ENTROPY = """    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)),  # (B*T, V)
        labels.reshape(-1),  # (B*T,)
        ignore_index=pad_idx,
        label_smoothing=label_smoothing,
    )
"""
# The annotated transformer's LabelSmoothing: KL divergence to eps/(V-2) on every class but
# the label and pad, summed and divided by the number of real tokens.
ANNOTATED_SMOOTHING = """    vocab = logits.size(-1)
    log_probs = torch.log_softmax(logits, dim=-1).reshape(-1, vocab)
    flat_labels = labels.reshape(-1)
    true_dist = torch.full_like(log_probs, label_smoothing / (vocab - 2))
    true_dist.scatter_(1, flat_labels[:, None], 1.0 - label_smoothing)
    true_dist[:, pad_idx] = 0
    true_dist[flat_labels == pad_idx] = 0
    kl = F.kl_div(log_probs, true_dist, reduction="sum")
    return kl / (flat_labels != pad_idx).sum()
"""

MUTANTS: dict[str, tuple[tuple[str, str], dict[str, tuple[float, str | None]]]] = {
    # teacher forcing
    "labels not shifted, in teacher_forcing_split": (
        ("return tgt[:, :-1], tgt[:, 1:]", "return tgt[:, :-1], tgt[:, :-1]"),
        # train_step uses the student's own split: graded on top of it, it keeps its points.
        {"teacher_forcing_split": (4, variants.LABELS_NOT_SHIFTED)}),
    "decoder input and labels swapped": (
        ("return tgt[:, :-1], tgt[:, 1:]", "return tgt[:, 1:], tgt[:, :-1]"),
        {"teacher_forcing_split": (4, variants.SPLIT_SWAPPED)}),
    "labels not shifted, in train_step": (
        ("tgt_in, labels = teacher_forcing_split(tgt)", "tgt_in, labels = tgt[:, :-1], tgt[:, :-1]"),
        {"train_step": (9, variants.LABELS_NOT_SHIFTED)}),
    # the loss
    "padding not ignored, in translation_loss": (
        ("        ignore_index=pad_idx,\n", ""),
        {"translation_loss": (3, variants.PAD_NOT_IGNORED)}),
    "padding not ignored, in train_step": (
        ("loss = translation_loss(logits, labels, pad_idx)",
         "loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())"),
        # Every failing test matches the mistake (the parameters' check too): the rubric's price.
        {"train_step": (3, variants.PAD_NOT_IGNORED)}),
    "pad index hard-coded": (
        ("ignore_index=pad_idx,", "ignore_index=0,"),
        {"translation_loss": (1, variants.PAD_HARDCODED)}),
    "label smoothing ignored": (
        ("        label_smoothing=label_smoothing,\n", ""),
        {"translation_loss": (2, variants.SMOOTHING_IGNORED)}),
    "label smoothing hard-coded": (
        ("label_smoothing=label_smoothing,", "label_smoothing=0.1,"),
        # train_step is graded on top of the student's own loss: it keeps its points.
        {"translation_loss": (2, variants.SMOOTHING_HARDCODED)}),
    "label smoothing hard-coded, in train_step": (
        # As the annotated transformer trains: the step's loss smoothed by 0.1, the rubric's price.
        ("loss = translation_loss(logits, labels, pad_idx)",
         "loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=pad_idx, label_smoothing=0.1)"),
        {"train_step": (2, variants.SMOOTHING_HARDCODED)}),
    "label smoothing the annotated-transformer way": (
        (CROSS_ENTROPY, ANNOTATED_SMOOTHING),
        {"translation_loss": (2, variants.SMOOTHING_ANNOTATED)}),
    "translation_loss wrong in an unknown way": (
        ("    return F.cross_entropy(\n", "    return 2 * F.cross_entropy(\n"),
        # train_step returns twice the loss too: its hint points at translation_loss.
        {"translation_loss": (8, None), "train_step": (7, variants.SUBPART_WRONG.format(name="translation_loss"))}),
    # the step
    "the label leaks into the input": (
        ("logits = model(src, tgt_in)  # (B, T-1, V)", "logits = model(src, tgt)[:, 1:]"),
        # The model learns to copy its input, which the end-to-end part, measuring the loss
        # of each known wrong objective too, counts as training: the step is wrong, not there.
        {"train_step": (9, variants.LABEL_LEAKS)}),
    "no zero_grad": (
        ("    optimizer.zero_grad()\n", ""),
        {"train_step": (3, variants.NO_ZERO_GRAD)}),
    "no optimizer step": (
        ("    optimizer.step()\n", ""),
        # end_to_end trains with the student's train_step: fix that first (the contract's uses).
        # It has no code of its own: it is train_step's work in use, and its points count.
        {"train_step": (7, variants.NO_STEP), "end_to_end": (3, "fix train_step first")}),
    "clipping after the step": (
        (CLIP_THEN_STEP, "    optimizer.step()\n    nn.utils.clip_grad_norm_(model.parameters(), clip_norm)\n"),
        {"train_step": (6, variants.CLIP_AFTER_STEP)}),
    "no clipping": (
        ("    nn.utils.clip_grad_norm_(model.parameters(), clip_norm)\n", ""),
        {"train_step": (6, variants.NO_CLIP)}),
    "clipping by value": (
        ("nn.utils.clip_grad_norm_(model.parameters(), clip_norm)",
         "nn.utils.clip_grad_value_(model.parameters(), clip_norm)"),
        {"train_step": (6, variants.CLIP_BY_VALUE)}),
    "loss returned as a tensor": (
        ("    return loss.item()\n", "    return loss\n"),
        {"train_step": (1, variants.LOSS_NOT_FLOAT)}),
    # greedy decoding
    "not padded after EOS": (
        ("            next_token = next_token.masked_fill(finished, pad_idx)\n", ""),
        {"greedy_decode": (5, variants.NOT_PADDED_AFTER_EOS)}),
    "logits of the first position": (
        ("logits[:, -1].argmax(dim=-1)", "logits[:, 0].argmax(dim=-1)"),
        {"greedy_decode": (8, variants.FIRST_POSITION)}),
    # On the trained model these two give the first position's tokens: each is named for itself.
    "BOS fed over and over": (
        ("logits = model(src, out)  # (B, t, V)", "logits = model(src, torch.full_like(out, bos_idx))  # (B, t, V)"),
        {"greedy_decode": (8, variants.PREFIX_NOT_FED)}),
    "only the last token fed": (
        ("logits = model(src, out)  # (B, t, V)", "logits = model(src, out[:, -1:])  # (B, t, V)"),
        {"greedy_decode": (8, variants.LAST_TOKEN_ONLY)}),
    "stops when the first row finishes": (
        ("if finished.all():", "if finished.any():"),
        {"greedy_decode": (5, variants.STOPS_AT_FIRST_EOS)}),
    "one token more than max_len": (
        ("for _ in range(max_len - 1):", "for _ in range(max_len):"),
        {"greedy_decode": (6, variants.MAX_LEN_OFF_BY_ONE)}),
    "BOS left out": (
        ("        return out\n", "        return out[:, 1:]\n"),
        {"greedy_decode": (11, variants.NO_BOS)}),
}

# A part the submission does not define (renamed): it scores 0, "not found", and these parts,
# which do not use it, keep full marks.
MISSING_PART: tuple[str, tuple[str, ...]] = ("greedy_decode", ("teacher_forcing_split", "translation_loss", "train_step", "end_to_end"))

# Each mistake the contract (assignments/06/assignment.toml) says the grader must name,
# and the mutant above that makes it.
CONTRACT_MISTAKES = {
    "labels not shifted": "labels not shifted, in teacher_forcing_split",
    "padding not ignored in the loss": "padding not ignored, in translation_loss",
    "no `zero_grad`": "no zero_grad",
    "no optimizer step": "no optimizer step",
    "clipping after the step": "clipping after the step",
    "label smoothing hard-coded": "label smoothing hard-coded",
    "label smoothing spread over `V-2` classes (the annotated transformer's KL divergence)":
        "label smoothing the annotated-transformer way",
    "the whole target fed to the model, the label leaking into the input": "the label leaks into the input",
}
