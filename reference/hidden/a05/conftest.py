"""Dimensions, reference modules and part-isolation helpers for the 05 suite.

Small dimensions keep the suite fast: d_model=16, 2 heads, d_ff=32, 2 encoder and 2
decoder layers. Every LayerNorm of a reference module gets random weights and biases, so
norm1, norm2 and norm3 differ and each wiring mistake changes the output visibly.

Part isolation (docs/writing-an-assignment.md): a layer is checked against the contract's
wiring computed with the student's own attention and feed-forward modules as black boxes
(``layer.attr("self_attn")`` is callable), and the Transformer against the contract's
wiring of its own embeddings, positional encoding and layers. A mistake in an earlier
piece (or in FeedForward) then costs points where it is graded, not here.
"""

import dataclasses
import math
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from grader.checks import CheckFailed, expect_close, expect_derivative
from grader.sandbox.session import StudentError, StudentException
from reference.hidden.a05 import variants
from reference.layers import DecoderLayer, EncoderLayer, FeedForward, Transformer
from reference.masks import causal_mask, padding_mask

D_MODEL, NUM_HEADS, D_FF = 16, 2, 32
SRC_VOCAB, TGT_VOCAB, PAD, MAX_LEN, NUM_LAYERS = 11, 13, 0, 32, 2
TRANSFORMER_ARGS = dict(d_model=D_MODEL, num_heads=NUM_HEADS, num_encoder_layers=NUM_LAYERS,
                        num_decoder_layers=NUM_LAYERS, d_ff=D_FF, max_len=MAX_LEN, pad_idx=PAD)


# ---- inputs ----------------------------------------------------------------------------


@pytest.fixture
def make_input(device):
    def make(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        return (scale * torch.randn(*shape, generator=generator)).to(device)
    return make


@pytest.fixture
def make_tokens(device):
    """Token ids in 1..vocab-1, with ``pad[row]`` PAD tokens at the end of each row."""
    def make(batch: int, length: int, vocab: int, *, seed: int, pad: tuple[int, ...] = ()) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        tokens = torch.randint(1, vocab, (batch, length), generator=generator)
        for row, count in enumerate(pad):
            if count:
                tokens[row, length - count:] = PAD
        return tokens.to(device)
    return make


# ---- reference modules and the student's, holding the same parameters -------------------------


def randomize_norms(module: nn.Module, seed: int) -> nn.Module:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for norm in (m for m in module.modules() if isinstance(m, nn.LayerNorm)):
            norm.weight.copy_(1 + 0.3 * torch.randn(norm.weight.shape, generator=generator))
            norm.bias.copy_(0.3 * torch.randn(norm.bias.shape, generator=generator))
    return module


@pytest.fixture
def reference_ffn(device):
    torch.manual_seed(1)
    return FeedForward(D_MODEL, D_FF).to(device)


@pytest.fixture
def reference_encoder_layer(device):
    torch.manual_seed(2)
    return randomize_norms(EncoderLayer(D_MODEL, NUM_HEADS, D_FF), seed=2).to(device)


@pytest.fixture
def reference_decoder_layer(device):
    torch.manual_seed(3)
    return randomize_norms(DecoderLayer(D_MODEL, NUM_HEADS, D_FF), seed=3).to(device)


@pytest.fixture
def reference_transformer(device):
    torch.manual_seed(4)
    return randomize_norms(Transformer(SRC_VOCAB, TGT_VOCAB, dropout=0.0, **TRANSFORMER_ARGS), seed=4).to(device)


@pytest.fixture
def student_ffn(student, reference_ffn):
    return student.new_like(reference_ffn, "FeedForward", D_MODEL, D_FF)


@pytest.fixture
def student_encoder_layer(student, reference_encoder_layer):
    return student.new_like(reference_encoder_layer, "EncoderLayer", D_MODEL, NUM_HEADS, D_FF)


@pytest.fixture
def student_decoder_layer(student, reference_decoder_layer):
    return student.new_like(reference_decoder_layer, "DecoderLayer", D_MODEL, NUM_HEADS, D_FF)


@pytest.fixture
def student_transformer(student, reference_transformer):
    return student.new_like(reference_transformer, "Transformer", SRC_VOCAB, TGT_VOCAB,
                        dropout=0.0, **TRANSFORMER_ARGS)


SHAPE_HINT = "a parameter has the wrong shape; check the nn.Linear sizes against the contract"


GRAPH_CUT = ("every submodule must take part in forward, and nothing may cut the autograd graph "
             "(.detach(), torch.no_grad(), .data)")
# Along a unit direction. The reference's central differences are within 0.05% of its
# gradients' norms; at 1e-2 the curvature of a whole layer's parameters makes that 5-12%.
GRADIENT_STEP = 1e-3


def expect_gradients(what: str, module, reference: nn.Module, args: tuple, grad_output: torch.Tensor, *,
                     inputs: dict[int, tuple[str, str]]) -> None:
    """A gradient reaches every submodule of ``module`` (which holds ``reference``'s
    parameters) and each input ``inputs`` names (position -> (name, hint when none does)).
    Per submodule, not per parameter, and not against the reference's values: an attention
    that leaves W_o unused is assignment 03's mistake, not this part's (part isolation).

    Which gradients arrive is the student's process's word, so each one is checked against
    the loss ``<module(*args), grad_output>`` the same module computes: moved a little along
    the reported gradient, its parameters (or the input) must change that loss at the
    rate the gradient's norm says. Positions where the output is not finite are left out."""
    got = module.backward(*args, grad_output=grad_output)
    base = {name: p.detach() for name, p in reference.named_parameters()}
    groups: dict[str, dict[str, torch.Tensor]] = {}
    for name in base:
        grad = got.param_grads.get(name)
        groups.setdefault(_submodule(name), {}).update({name: grad} if isinstance(grad, torch.Tensor) else {})
    missing = sorted(group for group, grads in groups.items() if _norm(grads) == 0)
    if missing:
        raise CheckFailed(f"{what}: no gradient reached {missing}", GRAPH_CUT)
    for position, (name, hint) in inputs.items():
        grad = got.input_grads[position] if position < len(got.input_grads) else None
        if not isinstance(grad, torch.Tensor) or _norm({name: grad}) == 0:
            raise CheckFailed(f"{what}: no gradient reached {name}", hint)

    with torch.no_grad():
        finite = torch.isfinite(module(*args).detach())

    def loss(parameters: dict, moved_args: tuple) -> float:
        module.load_parameters(parameters)
        return float((module(*moved_args).detach().double() * grad_output.double()).where(finite, 0.0).sum())

    for group, grads in groups.items():
        norm = _norm(grads)
        moved = lambda t, grads=grads, norm=norm: {**base, **{n: base[n] + t * g / norm for n, g in grads.items()}}
        expect_derivative(f"{what}: gradient of {group}", norm, lambda t: loss(moved(t), args),
                          step=GRADIENT_STEP, hint=GRAPH_CUT)
    for position, (name, hint) in inputs.items():
        grad = got.input_grads[position]
        norm = _norm({name: grad})
        moved = lambda t, position=position, grad=grad, norm=norm: tuple(
            arg.detach() + t * grad / norm if i == position else arg for i, arg in enumerate(args))
        expect_derivative(f"{what}: gradient of {name}", norm, lambda t: loss(base, moved(t)),
                          step=GRADIENT_STEP, hint=hint)


def _norm(grads: dict[str, torch.Tensor]) -> float:
    return math.sqrt(sum(float(g.detach().double().pow(2).sum()) for g in grads.values()))


def _submodule(name: str) -> str:
    """'self_attn.W_q.weight' -> 'self_attn'; 'encoder_layers.1.ffn.linear1.bias' -> 'encoder_layers[1]'."""
    parts = name.split(".")
    return f"{parts[0]}[{parts[1]}]" if len(parts) > 2 and parts[1].isdigit() else parts[0]


# ---- the student's modules as black boxes ---------------------------------------------------------


def encoder_modules(layer, reference: EncoderLayer) -> dict:
    """The student's attention and feed-forward modules, reference norms with the same weights."""
    return dict(self_attn=layer.attr("self_attn"), ffn=layer.attr("ffn"),
                norm1=reference.norm1, norm2=reference.norm2)


def decoder_modules(layer, reference: DecoderLayer) -> dict:
    return dict(self_attn=layer.attr("self_attn"), cross_attn=layer.attr("cross_attn"), ffn=layer.attr("ffn"),
                norm1=reference.norm1, norm2=reference.norm2, norm3=reference.norm3)


def transformer_modules(model, reference: Transformer) -> dict:
    """The student's embeddings, positional encoding and layers; the generator is an
    nn.Linear holding the same weights, so the reference's serves."""
    encoder, decoder = model.attr("encoder_layers"), model.attr("decoder_layers")
    return dict(src_embed=model.attr("src_embed"), tgt_embed=model.attr("tgt_embed"),
                pos_encoding=model.attr("pos_encoding"),
                encoder_layers=[encoder.method("__getitem__", i) for i in range(NUM_LAYERS)],
                decoder_layers=[decoder.method("__getitem__", i) for i in range(NUM_LAYERS)],
                generator=reference.generator)


def reference_modules(reference: Transformer) -> dict:
    return dict(src_embed=reference.src_embed, tgt_embed=reference.tgt_embed, pos_encoding=reference.pos_encoding,
                encoder_layers=list(reference.encoder_layers), decoder_layers=list(reference.decoder_layers),
                generator=reference.generator)


def close(got, want: torch.Tensor, atol: float, rtol: float = 0.0) -> bool:
    """The test of ``grader.checks.expect_close``, as a bool."""
    return (isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(want.shape)
            and bool(torch.allclose(got.detach().double().cpu(), want.detach().double().cpu(),
                                    atol=atol, rtol=rtol, equal_nan=True)))


def quietly(mistakes: dict) -> dict:
    """Mistake variants call the student's modules: one that raises (there, or here on what
    they return) just does not match."""
    def guard(candidate):
        def run():
            try:
                with torch.no_grad():
                    return candidate()
            except Exception:
                return None
        return run
    return {hint: guard(candidate) for hint, candidate in mistakes.items()}


@dataclass(frozen=True)
class Piece:
    """One of the student's pieces inside the module under test, for the hint only.

    ``call`` runs it on some input; ``want`` gives what it should return (None: only
    check that it runs); ``where`` says where it is graded."""

    name: str  # e.g. "MultiHeadAttention"
    attr: str  # e.g. "self_attn" or "decoder_layers[0]"
    where: str  # e.g. "assignment 03", "the FeedForward part"
    call: Callable[[], object]
    want: Callable[[], torch.Tensor] | None = None


def raising_piece(pieces: list[Piece]) -> str | None:
    """The note for the first of ``pieces`` that raises by itself, if any."""
    for piece in pieces:
        try:
            piece.call()
        except StudentError:
            return variants.PIECE_RAISES.format(piece=f"{piece.name} ({piece.attr})", where=piece.where)
    return None


def differing_pieces(pieces: list[Piece]) -> str | None:
    """One note naming every one of ``pieces`` that raises or gives other values than the
    reference piece with the same weights ("fix it first"), or None."""
    wrong: dict[tuple[str, str], list[str]] = {}
    for piece in pieces:
        try:
            got = piece.call()
        except StudentError:
            got = None
        if piece.want is None and got is not None:
            continue
        try:
            with torch.no_grad():
                want = piece.want()
        except Exception:  # its own sub-pieces return what the contract does not: blame it
            want = None
        # Looser than the part checks: this only picks what to blame.
        if got is None or want is None or not close(got, want, atol=1e-4, rtol=1e-3):
            wrong.setdefault((piece.name, piece.where), []).append(piece.attr)
    if not wrong:
        return None
    return variants.PIECES_DIFFER.format(pieces=", ".join(
        variants.piece(name, attrs if len(attrs) <= 2 else [], where) for (name, where), attrs in wrong.items()))


def attention_pieces(modules: dict, reference: nn.Module, *calls) -> list[Piece]:
    """(module name, args) of attention calls -> the student's attention modules as Pieces."""
    return [Piece("MultiHeadAttention", name, "assignment 03", lambda name=name, args=args: modules[name](*args),
                  lambda name=name, args=args: getattr(reference, name)(*args)) for name, args in calls]


def ffn_piece(modules: dict, reference: nn.Module, x: torch.Tensor) -> list[Piece]:
    return [Piece("FeedForward", "ffn", "the FeedForward part", lambda: modules["ffn"](x), lambda: reference.ffn(x))]


def expect_wiring(what: str, got, want_reference: torch.Tensor, want_wiring, *, atol: float, rtol: float,
                  mistakes: dict, pieces: list[Piece] = (), mask=None, fallback_hint: str | None = None) -> None:
    """Pass when ``got`` matches the reference, or the contract's wiring of the student's own
    modules (``want_wiring()``: part isolation). Otherwise name the mistake, and add a note
    on those of the student's ``pieces`` that are wrong themselves ("fix it first").

    ``mask``: bool, broadcastable to the output; only these positions are compared."""
    def only(value):
        if mask is None or not isinstance(value, torch.Tensor) or value.shape != want_reference.shape:
            return value
        return torch.where(mask, value, want_reference)

    got = only(got)
    if close(got, want_reference, atol, rtol):
        return
    unusable = None
    try:
        with torch.no_grad():
            want = only(want_wiring())
    except StudentError:
        raise
    except Exception as exc:  # a piece returns what the contract does not (a tuple, a wrong shape)
        want, mistakes = want_reference, {}
        unusable = variants.PIECES_UNUSABLE.format(error=f"{type(exc).__name__}: {str(exc)[:200]}")
    if close(got, want, atol, rtol):
        return
    try:
        expect_close(what, got, want, atol=atol, rtol=rtol,
                     mistakes={hint: (lambda run=run: only(run())) for hint, run in quietly(mistakes).items()})
    except CheckFailed as failure:
        hints = [unusable or failure.hint or fallback_hint, differing_pieces(pieces)]
        raise CheckFailed(failure.message, "; ".join(hint for hint in hints if hint) or None) from None


@contextmanager
def diagnosing(pieces: list[Piece]):
    """If the student's module raises, and one of its pieces raises by itself, say which."""
    try:
        yield
    except StudentException as exc:
        if exc.type_name == "NotImplementedError":
            raise
        note = raising_piece(pieces)
        if note is None:
            raise
        raise CheckFailed(f"{exc}\n{exc.traceback}".strip(), note) from None


def masks(src: torch.Tensor, tgt_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(src_mask (B, 1, 1, S), tgt_mask (B, 1, T, T)) as the contract's forward builds them."""
    return padding_mask(src, PAD), padding_mask(tgt_in, PAD) & causal_mask(tgt_in.size(1), device=tgt_in.device)


def transformer_pieces(modules: dict, reference: Transformer, src: torch.Tensor, tgt_in: torch.Tensor,
                       side: str = "both") -> list[Piece]:
    """The student's Transformer pieces on the reference's intermediate values, for ``side``
    "encoder" (what encode uses), "decoder" (what decode uses) or "both": embeddings and
    positional encoding (04); per layer its attention (03), feed-forward network and
    wiring (compared with the contract's wiring of its own sub-pieces), then the layer
    as a whole (does it run)."""
    src_mask, tgt_mask = masks(src, tgt_in)
    with torch.no_grad():
        src_x, tgt_x = reference.src_embed(src), reference.tgt_embed(tgt_in)
        encoder_inputs = [reference.pos_encoding(src_x)]
        for layer in reference.encoder_layers:
            encoder_inputs.append(layer(encoder_inputs[-1], src_mask))
        memory = encoder_inputs[-1]
        decoder_inputs = [reference.pos_encoding(tgt_x)]
        for layer in reference.decoder_layers:
            decoder_inputs.append(layer(decoder_inputs[-1], memory, tgt_mask, src_mask))

    encoder = [Piece("TokenEmbedding", "src_embed", "assignment 04", lambda: modules["src_embed"](src),
                     lambda: reference.src_embed(src))]
    decoder = [Piece("TokenEmbedding", "tgt_embed", "assignment 04", lambda: modules["tgt_embed"](tgt_in),
                     lambda: reference.tgt_embed(tgt_in))]
    for side_pieces in (encoder, decoder):
        side_pieces.append(Piece("PositionalEncoding", "pos_encoding", "assignment 04",
                                 lambda: modules["pos_encoding"](src_x), lambda: reference.pos_encoding(src_x)))
    for i, x in enumerate(encoder_inputs[:-1]):
        layer, ref_layer, attr = modules["encoder_layers"][i], reference.encoder_layers[i], f"encoder_layers[{i}]"
        own = encoder_modules(layer, ref_layer)
        encoder += [dataclasses.replace(p, attr=f"{attr}.{p.attr}") for p in
                    attention_pieces(own, ref_layer, ("self_attn", (x, x, x, src_mask))) + ffn_piece(own, ref_layer, x)]
        encoder.append(Piece("EncoderLayer", attr, "the EncoderLayer part", lambda layer=layer, x=x: layer(x, src_mask),
                             lambda own=own, x=x: variants.encoder_layer(x, src_mask, **own)))
    for i, y in enumerate(decoder_inputs[:-1]):
        layer, ref_layer, attr = modules["decoder_layers"][i], reference.decoder_layers[i], f"decoder_layers[{i}]"
        own = decoder_modules(layer, ref_layer)
        decoder += [dataclasses.replace(p, attr=f"{attr}.{p.attr}") for p in
                    attention_pieces(own, ref_layer, ("self_attn", (y, y, y, tgt_mask)),
                                     ("cross_attn", (y, memory, memory, src_mask))) + ffn_piece(own, ref_layer, y)]
        decoder.append(Piece("DecoderLayer", attr, "the DecoderLayer part",
                             lambda layer=layer, y=y: layer(y, memory, tgt_mask, src_mask),
                             lambda own=own, y=y: variants.decoder_layer(y, memory, tgt_mask, src_mask, **own)))
    if side == "encoder":
        return encoder
    if side == "decoder":
        return decoder
    return encoder + decoder[:1] + decoder[2:]  # pos_encoding once


# ---- a part that fails because a piece it uses is still a stub says so -------------------------
