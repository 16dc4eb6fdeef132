"""Hints for exceptions the student's code raises: what the error message usually means."""

from __future__ import annotations

import re

NOT_IMPLEMENTED = "not implemented: the stub still raises NotImplementedError"
NOT_FOUND = "not found: the submission does not define it"

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
        (r"Expected all tensors to be on the same device",
         "a tensor is created on a fixed device; create it on the input's device"),
        (r"mat1 and mat2 shapes cannot be multiplied|shape '\[.*\]' is invalid for input",
         "the shapes going into a matmul or view are wrong; print them against the docstring"),
        (r"bitwise_not.*not implemented for '(Float|Double|Half)'",
         "masks must be bool tensors (True = may attend); ~ works on bool, not on floats"),
        (r"Expected target size|Expected input batch_size .* to match target batch_size",
         "reshape logits to (B*T, V) and labels to (B*T,) before cross_entropy"),
        (r"^AssertionError",
         "bad arguments must raise ValueError with a message, not fail an assert"),
    )
)


def hint_for_exception(type_name: str, message: str) -> str | None:
    text = f"{type_name}: {message}"
    return next((hint for pattern, hint in _EXCEPTION_HINTS if pattern.search(text)), None)


def exception_hints() -> list[tuple[str, str]]:
    """(pattern, hint) pairs, for documentation."""
    return [(pattern.pattern, hint) for pattern, hint in _EXCEPTION_HINTS]


def another_parts_stub(stub_message: str, part: str) -> str | None:
    """The hint for a test of ``part`` whose code raised a stub's NotImplementedError, when the
    stub is another part's: stubs say whose they are ("MultiHeadAttention: from assignment 03:
    paste ..."). None when it is the part's own (or says no name): then NOT_IMPLEMENTED."""
    stub, _, detail = stub_message.partition(":")
    stub = stub.split(".")[0].strip()
    if stub.isidentifier() and part and stub != part:
        return f"{part} uses your {stub}, which is still a stub ({detail.strip()})"
    return None
