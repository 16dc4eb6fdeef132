"""Hints: the mistakes the contract names (:class:`Mistake`), words several suites share, and what an
exception the student's code raises usually means."""

from __future__ import annotations

import re


class Mistake(str):
    """A hint that names one of the contract's mistakes (assignment.toml's ``mistakes``):
    ``Mistake(hint, contract="the contract's words")``. It reads as its hint everywhere; a check
    whose value matches this mistake's also carries ``contract`` as its evidence, by which the
    rubric (assignment.toml's ``[rubric.deductions]``) prices the mistake. Several hints may
    name one contract mistake (ReLU, and GELU's tanh approximation)."""

    contract: str

    def __new__(cls, hint: str, contract: str) -> Mistake:
        made = super().__new__(cls, hint)
        made.contract = contract
        return made

    def __reduce__(self) -> tuple:  # copied (dataclasses.asdict deep-copies) as itself
        return Mistake, (str(self), self.contract)


def contract_mistake(hint: str | None) -> str | None:
    """The contract's words for the mistake ``hint`` names, when it is a :class:`Mistake`."""
    return hint.contract if isinstance(hint, Mistake) else None


NOT_IMPLEMENTED = "not implemented: the stub still raises NotImplementedError"
NOT_FOUND = "not found: the submission does not define it"
# Its code defines it, but the definition never ran: a cell before it raised or was stopped.
NOT_DEFINED_WHEN_LOADED = "not defined once your code had loaded, though it defines it: see the notes below"

# Attention mistakes that several assignments grade (01's attention, 02's CausalSelfAttention,
# 03's MultiHeadAttention): one wording wherever they can occur. Suites take them from grader.suite.
SCALE_BY_LENGTH = "scores scaled by sqrt(T), the sequence length: divide by sqrt(d_k), the width of q and k"
SCALE_BY_INPUT_WIDTH = ("scores scaled by the input width (C ** -0.5 with C = d_in, the last dimension of x): "
                        "divide by sqrt(d_k), the width of q and k")
MASK_FILL_NOT_NEGATIVE = ("masked scores filled with a value that is not very negative (0 or 1e-15): the masked "
                          "positions keep weight after the softmax; fill them with float('-inf') (or -1e9)")
FUTURE_VISIBLE = ("mask the scores of every key later than its query before the softmax (a causal mask, True on "
                  "and below the diagonal, cropped to the input's length)")

# Dropout, wherever a part owns it (grader.suite.dropout).
DROPOUT_UNSCALED = ("dropout survivors are not scaled by 1/(1-p) (each value must keep its expected value): use "
                    "nn.Dropout or F.dropout, which scale them")
DROPOUT_RATE_IGNORED = ("dropout does not drop at the rate the module is given (a rate hard-coded, nn.Dropout(0.1), or "
                        "dropout left out): build it from the constructor's argument, nn.Dropout(dropout)")
DROPOUT_SAME_UNITS = ("dropout drops the same units on every call (a fixed seed: torch.manual_seed in forward, or a "
                      "generator of its own seeded again on each call): draw new random numbers on each call from "
                      "torch's global generator, as nn.Dropout and F.dropout do")
FIXED_DEVICE = ("a tensor is created on, or moved to, a fixed device (torch.arange(T) with no device=, .cpu(), "
                ".to('cpu')): create and keep tensors on the input's device (device=x.device)")

# A parameter that changes nothing (grader.suite.checks.expect_computes_with); ``{module}`` names it.
UNUSED_PARAMETERS = ("{module} takes no part in forward: its parameters change nothing in the output; compute "
                     "with it where the contract says (a projection used twice leaves another unused)")

# What a value that is not the tensor a part returns says about the code (grader.suite.checks.expect_tensor).
RETURNS_NONE = "the function returns None: return the result (a missing return statement?)"
RETURNS_SEVERAL = ("return one tensor, not a tuple: the contract returns a single tensor here; drop the extra "
                   "values (such as the attention weights nn.MultiheadAttention also returns)")

# (pattern in "Type: message", hint), first match wins.
_EXCEPTION_HINTS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), hint)
    for pattern, hint in (
        (r"view size is not compatible with input tensor's size and stride",
         "missing .contiguous() before .view() after a transpose (or use .reshape())"),
        (r"Missing key\(s\) in state_dict|Unexpected key\(s\) in state_dict",
         "submodule or parameter names differ from the contract (see the assignment's table)"),
        (r"size mismatch for",
         "a parameter has the wrong shape; check the nn.Linear sizes against the contract"),
        (r"Expected all tensors to be on the same device|is not on the expected device", FIXED_DEVICE),
        (r"mat1 and mat2 shapes cannot be multiplied|shape '\[.*\]' is invalid for input",
         "the shapes going into a matmul or view are wrong; print them against the docstring"),
        (r"bitwise_not.*not implemented for '(Float|Double|Half)'|~ \(operator.invert\) is only implemented on integer",
         "masks must be bool tensors (True = may attend); ~ works on bool, not on floats"),
        (r"not implemented for '(Long|Int|Short|Char|Byte|Bool)'",
         "a tensor of integers (or bools) reaches an operation that needs floats: torch.arange(T) and "
         "torch.tensor([1, 2]) make integers; give them dtype=torch.float, or call .float()"),
        (r"Expected target size|Expected input batch_size .* to match target batch_size",
         "reshape logits to (B*T, V) and labels to (B*T,) before cross_entropy"),
        (r"batch[12] must be a 3D tensor",
         "torch.bmm takes 3-D tensors only: with heads, (B, H, T, d_k), use torch.matmul or @, which "
         "broadcast over the leading dimensions"),
        (r"The size of tensor a \(\d+\) must match the size of tensor b \(\d+\) at non-singleton dimension",
         "two tensors' shapes do not line up: x.T on a batched (B, T, d) tensor reverses every dimension (use "
         "x.transpose(-2, -1)), and sequence-first code swaps batch and time (the contract is batch-first, "
         "(B, T, ...): slice time with tgt[:, :-1], not tgt[:-1, :])"),
        (r"^ValueError: (not enough|too many) values to unpack",
         "a shape unpacked into the wrong number of names (B, H, T, d_k = x.shape on a 3-D (B, T, d) tensor): "
         "unpack as many as the docstring's shape has, or index x.size(-1)"),
        (r'missing the required "forward" function|_forward_unimplemented\(\)',
         "the module has no forward method, so nn.Module has nothing to call: define def forward(self, ...) "
         "inside the class, spelled so (a misspelled foward, or a forward indented outside the class?)"),
        (r"^TypeError: .*got an unexpected keyword argument",
         "the grader passes this argument by its name in the contract: name your parameters as the "
         "assignment's table does (a tutorial's valid_lens or attn_mask is the contract's mask)"),
        (r"^AssertionError",
         "bad arguments must raise ValueError with a message, not fail an assert"),
    )
)


# Habits read from the lines of code an exception passed through (the grader's own copy of
# them, grader.sandbox.errors.with_source_lines), with the exceptions they cause.
_HABIT_HINTS: tuple[tuple[re.Pattern[str], re.Pattern[str], str], ...] = (
    # d2l.ai's masked_softmax(X, valid_lens) and sequence_mask take lengths, one per row; handed
    # the contract's bool mask, they fail on the shapes.
    (re.compile(r"\bvalid_lens?\b"),
     re.compile(r"^(RuntimeError|IndexError): .*(size|shape)", re.IGNORECASE),
     "the mask is a bool tensor (True = may attend), broadcastable to the scores' shape, not valid lengths "
     "(d2l's masked_softmax(X, valid_lens)): apply it with scores.masked_fill(~mask, float('-inf'))"),
)


def hint_for_exception(type_name: str, message: str, traceback: str = "") -> str | None:
    """What an exception usually means, from its type and message and the student's lines of
    code it passed through."""
    text = f"{type_name}: {message}"
    habit = next((hint for code, error, hint in _HABIT_HINTS if code.search(traceback) and error.search(text)), None)
    return habit or next((hint for pattern, hint in _EXCEPTION_HINTS if pattern.search(text)), None)


def exception_hints() -> list[tuple[str, str]]:
    """(pattern, hint) pairs, for documentation."""
    return ([(code.pattern, hint) for code, _, hint in _HABIT_HINTS]
            + [(pattern.pattern, hint) for pattern, hint in _EXCEPTION_HINTS])


def stub_owner(stub_message: str) -> str | None:
    """The part whose stub raised NotImplementedError with this message: stubs say whose they
    are ("MultiHeadAttention: from assignment 03: paste ...", "MultiHeadAttention.forward: ...").
    None when the message names none."""
    owner = stub_message.partition(":")[0].split(".")[0].strip()
    return owner if owner.isidentifier() else None


_STILL_A_STUB = "which is still a stub"


def another_parts_stub(stub_message: str, part: str, owner: str | None = None, *, quote: bool = True) -> str | None:
    """The hint for a test of ``part`` whose code raised a stub's NotImplementedError, when the
    stub is another part's: ``owner``, the class or function whose code raised it, else the one
    its message names. None when it is the part's own (or neither says): then NOT_IMPLEMENTED.
    ``quote``: the hint quotes the stub's message (not from a process that held answers, which
    the message could carry into the report)."""
    named = stub_owner(stub_message)
    owner = owner or named
    if not (owner and part and owner != part):
        return None
    detail = (stub_message.partition(":")[2].strip() if named == owner else stub_message.strip()) if quote else ""
    return f"{part} uses your {owner}, {_STILL_A_STUB}" + (f" ({detail})" if detail else "")


def quotes_stub(hint: str | None, unquoted: str) -> bool:
    """Whether ``hint`` is ``unquoted``, another part's stub hint given with ``quote=False``,
    quoting the stub's message (:func:`another_parts_stub`)."""
    return unquoted.endswith(_STILL_A_STUB) and (hint or "").startswith(f"{unquoted} (")
