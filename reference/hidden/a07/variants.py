"""What common mistakes in assignment 07 produce.

For each mistake the contract names, a functional version of the part whose keyword
arguments switch on one mistake each (defaults equal to the reference), and the hint as a
module constant: docs/mistakes.md lists them (python -m reference.hidden.mistake_table).
"""

import torch

# ---- Head, MultiHead, MLP, Block, GPT ------------------------------------------------------

# ---- generate, end_to_end ------------------------------------------------------------------
CONTEXT_NOT_CROPPED = ("the context is not cropped: feed the model only the last context_length tokens, "
                       "model(idx[:, -model.context_length:]), or it fails once the sequence outgrows its context")
TEMPERATURE_AFTER_SOFTMAX = ("temperature applied after the softmax (dividing probabilities changes nothing once "
                             "multinomial normalises them): divide the logits by temperature, then softmax")
TEMPERATURE_MULTIPLIED = "the logits are multiplied by temperature: divide them, logits / temperature"
NOT_LAST_POSITION = ("sampled from the logits of another position: take the last one, logits[:, -1, :], the "
                     "prediction for the next token")
ARGMAX_NOT_SAMPLED = ("always the most likely token: sample with torch.multinomial(probs, 1, generator=generator) "
                      "instead of argmax")
TOP_K_WRONG_SET = ("top_k keeps the wrong set of tokens: keep the k largest logits (ties with the k-th included) "
                   "and set the rest to -inf, e.g. v = torch.topk(logits, k).values; "
                   "logits[logits < v[:, [-1]]] = -inf")
TOP_K_LARGER_THAN_VOCAB = "top_k larger than the vocabulary means every token: use min(top_k, logits.size(-1))"
GENERATOR_IGNORED = ("the same generator seed gave different tokens: pass generator=generator to "
                     "torch.multinomial (global random state is not the caller's to use)")
NOT_EVAL_MODE = "the model is not in eval mode while generating: call model.eval() first (dropout would be on)"
GRADIENTS_ON = "generate runs with gradients on: decorate it with @torch.no_grad() (or use with torch.no_grad():)"
PROMPT_NOT_KEPT = "the output starts with the input: return torch.cat([idx, new_tokens], dim=1), (B, T + n)"

LOSS_DOES_NOT_FALL = ("training your GPT with a stock AdamW loop did not lower the loss the grader measured: "
                      "check that forward's logits depend on the parameters and the input as the contract says")
DOES_NOT_CONTINUE = ("after training, the grader's own greedy decoding with your GPT does not continue the "
                     "corpus's pattern: the model learns, but not the next token at each position (check causality "
                     "and the positions)")


def sampling_probabilities(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, *,
                           keep: str = "top") -> torch.Tensor:
    """The distribution generate samples one token from, for logits (V,): softmax(logits /
    temperature) over the kept tokens. ``keep`` switches on a mistake in the set top_k keeps:
    "top" (the contract), "bottom" (the k smallest), "one_less", "one_more"."""
    scaled = logits / temperature
    if top_k is not None:
        k = {"top": top_k, "bottom": top_k, "one_less": top_k - 1, "one_more": top_k + 1}[keep]
        k = max(1, min(k, logits.numel()))
        kept = torch.topk(scaled, k, largest=keep != "bottom").indices
        mask = torch.ones_like(scaled, dtype=torch.bool)
        mask[kept] = False
        scaled = scaled.masked_fill(mask, float("-inf"))
    return torch.softmax(scaled, dim=-1)


def sampling_mistakes(last: torch.Tensor, other: torch.Tensor, temperature: float,
                      top_k: int | None) -> list[tuple[str, torch.Tensor]]:
    """(hint, distribution) of the named sampling mistakes, given the logits at the last
    position (``last``) and at another one (``other``), each (V,)."""
    mistakes = [
        (TEMPERATURE_AFTER_SOFTMAX, sampling_probabilities(last, 1.0, top_k)),
        (TEMPERATURE_MULTIPLIED, sampling_probabilities(last, 1.0 / temperature, top_k)),
        (NOT_LAST_POSITION, sampling_probabilities(other, temperature, top_k)),
        (ARGMAX_NOT_SAMPLED, torch.nn.functional.one_hot(last.argmax(), last.numel()).to(last.dtype)),
    ]
    if top_k is not None:
        mistakes += [(TOP_K_WRONG_SET, sampling_probabilities(last, temperature, top_k, keep=keep))
                     for keep in ("bottom", "one_less", "one_more")]
    return mistakes
