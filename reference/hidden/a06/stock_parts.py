"""Stock parts for the 06 suite: grader-owned, written from the contract, not the reference's code.

Each is one of the contract's parts, by its name. When end_to_end fails, each failing test
runs once more with this train_step standing in for the student's (the contract's ``uses``;
``suite.toml``'s ``stand_ins``); a test that then passes shows train_step as its cause. An
answer: the grader sends it only into a student process that ends with that rerun (never with
``stock.py``, which the suite sends for its models). Needs only torch.
"""

import torch
import torch.nn.functional as F


def train_step(model, src, tgt, optimizer, pad_idx, clip_norm=1.0):
    decoder_input, labels = tgt[:, :-1], tgt[:, 1:]
    optimizer.zero_grad()
    logits = model(src, decoder_input)
    loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=pad_idx)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    return float(loss)
