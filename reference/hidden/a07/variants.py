"""What common mistakes in assignment 07 produce.

For each mistake the contract names, a functional version of the part whose keyword
arguments switch on one mistake each (defaults equal to the reference), and the hint as a
module constant: docs/mistakes.md lists them (python -m reference.hidden.mistake_table).
"""

import torch
import torch.nn.functional as F

# Shared with 01-03, worded once (grader.core.hints); "scaled by d_model" is the input width here.
from grader.suite import FUTURE_VISIBLE, MASK_FILL_NOT_NEGATIVE, SCALE_BY_INPUT_WIDTH, Mistake
# Dropout in Head, MultiHead and MLP, judged as every part that owns one is (grader.suite.dropout).
from grader.suite import DROPOUT_RATE_IGNORED, DROPOUT_SAME_UNITS, DROPOUT_UNSCALED  # noqa: F401

# ---- Head, MultiHead, MLP, Block, GPT ------------------------------------------------------
NO_SCALE = "scores not scaled: multiply q @ k^T by head_size ** -0.5 (k.size(-1) ** -0.5)"
SOFTMAX_DIM = "softmax over the wrong dimension: normalise over the keys (the last dimension)"
MASK_NOT_CROPPED = ("the tril mask is not cropped to the input: use self.tril[:T, :T] with T = x.size(1), so every "
                    "T <= context_length works")
PROJECTION_REUSED = ("a projection computes two of q, k and v: q = self.query(x), k = self.key(x), v = self.value(x), "
                     "each with its own")
NO_PROJECTION = "the heads are concatenated but not projected: MultiHead returns dropout(proj(cat(heads)))"
PROJECTED_TWICE = "the output projection is applied twice: MultiHead returns dropout(proj(cat(heads))), with one proj"
RELU = "ReLU instead of GELU: the MLP is proj(gelu(fc(x))) with F.gelu (exact, erf)"
TANH_GELU = "the tanh approximation of GELU: use the exact one, F.gelu(x) (approximate='none', nn.GELU())"
NO_ACTIVATION = "no activation between fc and proj: proj(gelu(fc(x)))"
MLP_DROPOUT_MISPLACED = "dropout belongs after proj: dropout(proj(gelu(fc(x))))"
MLP_DROPOUT_MISSING = "no dropout in training mode: dropout(proj(gelu(fc(x)))) with nn.Dropout(dropout)"
HEAD_DROPOUT_MISSING = ("no dropout in training mode: apply nn.Dropout(dropout) to the attention weights, after the "
                        "softmax")
HEAD_DROPOUT_MISPLACED = ("dropout does not zero attention weights: apply it to the weights after the softmax, "
                          "dropout(weights) @ v")
HEAD_DROPOUT_ON_OUTPUT = ("dropout applied to the head's output: it belongs on the attention weights, "
                          "dropout(weights) @ v")
MULTIHEAD_DROPOUT_MISSING = ("no dropout in training mode: MultiHead returns dropout(proj(cat(heads))), "
                             "nn.Dropout(dropout)")
MULTIHEAD_DROPOUT_MISPLACED = "dropout belongs after the projection: dropout(proj(cat(heads)))"
POST_NORM = "post-norm (x = ln(x + sublayer(x))) instead of pre-norm: x = x + attn(ln1(x)), then x = x + mlp(ln2(x))"
MISSING_RESIDUAL = "a residual connection is missing: x = x + attn(ln1(x)), then x = x + mlp(ln2(x))"
MISSING_RESIDUAL_MLP = "the residual around the MLP is missing: x = x + mlp(ln2(x)), after x = x + attn(ln1(x))"
NO_FINAL_NORM = "no final LayerNorm: logits = lm_head(ln_f(x)) after the last block"
NO_POSITIONS = "positions are not added: x = token_embedding(idx) + position_embedding(arange(T))"
LOGITS_FLATTENED = ("logits returned flattened to (B*T, vocab_size): return them as (B, T, vocab_size) and flatten "
                    "only inside the loss")
LAST_POSITION_ONLY = ("logits only for the last position: forward returns logits for every position, "
                      "(B, T, vocab_size), with or without targets")
LM_HEAD_BIAS = "lm_head has no bias: nn.Linear(d_model, vocab_size, bias=False)"
WEIGHT_TYING = ("lm_head.weight is token_embedding.weight (weight tying): the contract's GPT has an lm_head of its "
                "own, nn.Linear(d_model, vocab_size, bias=False), trained apart from the embedding")
TARGETS_SHIFTED_TWICE = ("the targets are shifted again inside forward: targets[:, t] is already the token after "
                         "idx[:, t], so compare logits[:, t] with targets[:, t]: F.cross_entropy(logits.view(-1, V), "
                         "targets.view(-1))")
LOSS_WRONG = ("the loss is not the mean cross-entropy of the logits over all B*T positions: "
              "F.cross_entropy(logits.view(-1, V), targets.view(-1))")
GPT_WIRING = ("forward combines your modules differently from the contract: token_embedding(idx) + "
              "position_embedding(arange(T)) -> each block -> ln_f -> lm_head")
PIECES_UNUSABLE = ("your modules cannot be combined as the contract says ({error}): each Head, MultiHead, MLP and "
                   "Block must return one tensor of the contract's shape")


# The contract's words (assignments/07/assignment.toml's mistakes) for the mistakes these hints
# name: a check whose value matches one of them carries those words, the rubric's evidence.
FUTURE_VISIBLE = Mistake(FUTURE_VISIBLE, 'future positions visible (no causal mask)')
SCALE_BY_INPUT_WIDTH = Mistake(SCALE_BY_INPUT_WIDTH, 'scores scaled by `d_model` instead of the head size')
POST_NORM = Mistake(POST_NORM, 'post-norm instead of pre-norm')
RELU = Mistake(RELU, 'ReLU (or tanh-approximate GELU) instead of exact GELU')
TANH_GELU = Mistake(TANH_GELU, 'ReLU (or tanh-approximate GELU) instead of exact GELU')
NO_FINAL_NORM = Mistake(NO_FINAL_NORM, 'no final LayerNorm')
NO_POSITIONS = Mistake(NO_POSITIONS, 'positions not added')
LOGITS_FLATTENED = Mistake(LOGITS_FLATTENED, 'logits returned flattened to `(B*T, V)`')


def head(x: torch.Tensor, p: dict[str, torch.Tensor], *, scale: str = "head", causal: bool = True,
         fill: float = float("-inf"), softmax_dim: int = -1, sources: tuple[str, str, str] = ("query", "key", "value")
         ) -> torch.Tensor:
    """Head's forward from its parameters (key/query/value.weight), one mistake per keyword;
    ``sources``: the projections q, k and v are computed with."""
    q, k, v = (x @ p[f"{name}.weight"].T for name in sources)  # (B, T, hs)
    scores = q @ k.transpose(-2, -1) * {"head": k.size(-1) ** -0.5, "d_model": x.size(-1) ** -0.5,
                                        "none": 1.0}[scale]
    if causal:
        length = x.size(1)
        blocked = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(blocked, fill)
    return scores.softmax(dim=softmax_dim) @ v


def _reused(sources: tuple[str, str, str]) -> str:
    """The hint of a head computing q, k, v with ``sources``: "... (queries with the value projection)"."""
    wrong = next(i for i, name in enumerate(sources) if name != ("query", "key", "value")[i])
    return f"{PROJECTION_REUSED} ({('queries', 'keys', 'values')[wrong]} with the {sources[wrong]} projection)"


# Each of q, k, v computed with one of the other two projections.
REUSED_SOURCES = [tuple(other if i == j else name for j, name in enumerate(("query", "key", "value")))
                  for i in range(3) for other in ("query", "key", "value") if other != ("query", "key", "value")[i]]


def head_mistakes(x: torch.Tensor, p: dict[str, torch.Tensor]) -> dict:
    return {
        SCALE_BY_INPUT_WIDTH: lambda: head(x, p, scale="d_model"),
        NO_SCALE: lambda: head(x, p, scale="none"),
        FUTURE_VISIBLE: lambda: head(x, p, causal=False),
        MASK_FILL_NOT_NEGATIVE: lambda: head(x, p, fill=0.0),
        SOFTMAX_DIM: lambda: head(x, p, softmax_dim=-2),
        **{_reused(sources): (lambda sources=sources: head(x, p, sources=sources)) for sources in REUSED_SOURCES},
    }


def mlp(x: torch.Tensor, p: dict[str, torch.Tensor], *, activation: str = "gelu") -> torch.Tensor:
    hidden = torch.nn.functional.linear(x, p["fc.weight"], p["fc.bias"])
    hidden = {"gelu": torch.nn.functional.gelu, "relu": torch.relu, "none": lambda h: h,
              "tanh": lambda h: torch.nn.functional.gelu(h, approximate="tanh")}[activation](hidden)
    return torch.nn.functional.linear(hidden, p["proj.weight"], p["proj.bias"])


def mlp_mistakes(x: torch.Tensor, p: dict[str, torch.Tensor]) -> dict:
    return {RELU: lambda: mlp(x, p, activation="relu"), TANH_GELU: lambda: mlp(x, p, activation="tanh"),
            NO_ACTIVATION: lambda: mlp(x, p, activation="none")}


def block(x: torch.Tensor, attn, mlp_, ln1, ln2, *, mode: str = "pre") -> torch.Tensor:
    """Block's wiring of callables: "pre" (the contract), "post", "no_residual" (around attn),
    "no_residual_mlp" (around the MLP)."""
    if mode == "post":
        x = ln1(x + attn(x))
        return ln2(x + mlp_(x))
    x = (attn(ln1(x)) if mode == "no_residual" else x + attn(ln1(x)))
    return mlp_(ln2(x)) if mode == "no_residual_mlp" else x + mlp_(ln2(x))


def block_mistakes(x: torch.Tensor, pieces: dict) -> dict:
    return {POST_NORM: lambda: block(x, **pieces, mode="post"),
            MISSING_RESIDUAL: lambda: block(x, **pieces, mode="no_residual"),
            MISSING_RESIDUAL_MLP: lambda: block(x, **pieces, mode="no_residual_mlp")}


def gpt(idx: torch.Tensor, modules: dict, *, positions: bool = True, final_norm: bool = True) -> torch.Tensor:
    """GPT's logits (B, T, V) from its modules (callables), one mistake per keyword."""
    x = modules["token_embedding"](idx)
    if positions:
        x = x + modules["position_embedding"](torch.arange(idx.size(1), device=idx.device))
    for each in modules["blocks"]:
        x = each(x)
    return modules["lm_head"](modules["ln_f"](x) if final_norm else x)


def gpt_mistakes(idx: torch.Tensor, modules: dict) -> dict:
    return {NO_POSITIONS: lambda: gpt(idx, modules, positions=False),
            NO_FINAL_NORM: lambda: gpt(idx, modules, final_norm=False)}


def tied_mistakes(idx: torch.Tensor, modules: dict, head: torch.Tensor) -> dict:
    """A tied GPT (lm_head.weight is token_embedding.weight) holding the reference's parameters:
    loading them wrote both matrices into its one tensor, lm_head's last (``head``), as a
    module registered in the contract's order loads them."""
    return {WEIGHT_TYING: lambda: gpt(idx, {**modules, "token_embedding": lambda ids: F.embedding(ids, head),
                                            "lm_head": lambda x: F.linear(x, head)})}


def loss_mistakes(logits: torch.Tensor, targets: torch.Tensor) -> dict:
    """Losses of the named mistakes, from the logits the model returned (checked) and the targets."""
    return {TARGETS_SHIFTED_TWICE: lambda: F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)).float(),
                                                           targets[:, 1:].reshape(-1))}


def gpt_from_parameters(idx: torch.Tensor, p: dict[str, torch.Tensor], *, scale: str = "head", causal: bool = True,
                        fill: float = float("-inf"), softmax_dim: int = -1,
                        sources: tuple[str, str, str] = ("query", "key", "value"), projection: bool = True,
                        activation: str = "gelu", mode: str = "pre", positions: bool = True,
                        final_norm: bool = True) -> torch.Tensor:
    """A whole GPT's logits (B, T, V) computed here from its parameters (the contract's names),
    in the contract's architecture or, one keyword each, in that of a mistake the parts name."""
    def under(prefix: str) -> dict[str, torch.Tensor]:
        return {name[len(prefix):]: tensor for name, tensor in p.items() if name.startswith(prefix)}

    def norm(prefix: str):
        return lambda x: F.layer_norm(x, x.shape[-1:], p[f"{prefix}.weight"], p[f"{prefix}.bias"])

    def attention(prefix: str):
        heads = sorted({int(name.split(".")[0]) for name in under(f"{prefix}.heads.")})

        def run(x: torch.Tensor) -> torch.Tensor:
            out = torch.cat([head(x, under(f"{prefix}.heads.{h}."), scale=scale, causal=causal, fill=fill,
                                  softmax_dim=softmax_dim, sources=sources) for h in heads], dim=-1)
            return F.linear(out, p[f"{prefix}.proj.weight"], p[f"{prefix}.proj.bias"]) if projection else out
        return run

    def each_block(i: int):
        feed_forward = under(f"blocks.{i}.mlp.")
        return lambda x: block(x, attention(f"blocks.{i}.attn"), lambda h: mlp(h, feed_forward, activation=activation),
                               norm(f"blocks.{i}.ln1"), norm(f"blocks.{i}.ln2"), mode=mode)

    layers = sorted({int(name.split(".")[0]) for name in under("blocks.")})
    modules = dict(token_embedding=lambda ids: F.embedding(ids, p["token_embedding.weight"]),
                   position_embedding=lambda ids: F.embedding(ids, p["position_embedding.weight"]),
                   blocks=[each_block(i) for i in layers], ln_f=norm("ln_f"),
                   lm_head=lambda x: F.linear(x, p["lm_head.weight"], p.get("lm_head.bias")))
    return gpt(idx, modules, positions=positions, final_norm=final_norm)


# The architecture of each mistake in Head, MultiHead, MLP, Block and GPT that keeps the
# contract's parameter names and shapes, as gpt_from_parameters' keywords.
ARCHITECTURE_MISTAKES: dict[str, dict] = {
    SCALE_BY_INPUT_WIDTH: dict(scale="d_model"), NO_SCALE: dict(scale="none"), FUTURE_VISIBLE: dict(causal=False),
    MASK_FILL_NOT_NEGATIVE: dict(fill=0.0), SOFTMAX_DIM: dict(softmax_dim=-2), NO_PROJECTION: dict(projection=False),
    RELU: dict(activation="relu"), TANH_GELU: dict(activation="tanh"), NO_ACTIVATION: dict(activation="none"),
    POST_NORM: dict(mode="post"), MISSING_RESIDUAL: dict(mode="no_residual"),
    MISSING_RESIDUAL_MLP: dict(mode="no_residual_mlp"), NO_FINAL_NORM: dict(final_norm=False),
    NO_POSITIONS: dict(positions=False), **{_reused(sources): dict(sources=sources) for sources in REUSED_SOURCES},
}


# ---- generate, end_to_end ------------------------------------------------------------------
CONTEXT_NOT_CROPPED = ("the context is not cropped: feed the model only the last context_length tokens, "
                       "model(idx[:, -model.context_length:]), or it fails once the sequence outgrows its context")
TEMPERATURE_AFTER_SOFTMAX = ("temperature has no effect: ignored, or applied after the softmax (dividing "
                             "probabilities changes nothing once multinomial normalises them); divide the logits by "
                             "temperature, then softmax")
TEMPERATURE_MULTIPLIED = "the logits are multiplied by temperature: divide them, logits / temperature"
NOT_LAST_POSITION = ("sampled from the logits of another position: take the last one, logits[:, -1, :], the "
                     "prediction for the next token")
ARGMAX_NOT_SAMPLED = ("always the most likely token: sample with torch.multinomial(probs, 1, generator=generator) "
                      "instead of argmax")
TOP_K_WRONG_SET = ("top_k keeps the wrong set of tokens: keep the k largest logits (ties with the k-th included) "
                   "and set the rest to -inf, e.g. v = torch.topk(logits, k).values; "
                   "logits[logits < v[:, [-1]]] = -inf")
TOP_K_IGNORED = ("top_k is ignored: keep the k largest logits and set the rest to -inf before the softmax, "
                 "e.g. v = torch.topk(logits, k).values; logits[logits < v[:, [-1]]] = -inf")
TOP_K_LARGER_THAN_VOCAB = "top_k larger than the vocabulary means every token: use min(top_k, logits.size(-1))"
GENERATOR_IGNORED = ("the same generator seed gave different tokens: pass generator=generator to "
                     "torch.multinomial (global random state is not the caller's to use)")
NOT_EVAL_MODE = "the model is not in eval mode while generating: call model.eval() first (dropout would be on)"
GRADIENTS_ON = "generate runs with gradients on: decorate it with @torch.no_grad() (or use with torch.no_grad():)"
PROMPT_NOT_KEPT = "the output starts with the input: return torch.cat([idx, new_tokens], dim=1), (B, T + n)"

PARAMETERS_DO_NOT_FIT = ("the grader measures the trained model itself, with your GPT's parameters in the contract's "
                         "GPT: name and shape them as the contract says (token_embedding, position_embedding, blocks, "
                         "ln_f, lm_head without a bias)")
LOSS_DOES_NOT_FALL = ("training your GPT with a stock AdamW loop did not lower the loss the grader measured with its "
                      "trained parameters: check that forward's logits depend on the parameters and the input as the "
                      "contract says")
DOES_NOT_CONTINUE = ("after training, the grader's own greedy decoding with your GPT's parameters does not continue the "
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
        mistakes += [(TOP_K_IGNORED, sampling_probabilities(last, temperature, None)),
                     (TOP_K_IGNORED, sampling_probabilities(last, 1.0, None))]  # temperature ignored too
        mistakes += [(TOP_K_WRONG_SET, sampling_probabilities(last, temperature, top_k, keep=keep))
                     for keep in ("bottom", "one_less", "one_more")]
    return mistakes
