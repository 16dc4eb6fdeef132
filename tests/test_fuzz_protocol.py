"""Whatever a student's process sends, the trusted side reads a value or refuses the message.

The child's replies are hostile input: any JSON where the protocol wants a tensor's entry, a
tagged value or a device. Reading one must end in a value or a :class:`ProtocolError`, which
retires the child and fails the test as the student's; any other exception would escape as
the grader's own error and make the whole report a grader error.
"""

from __future__ import annotations

import json
import struct

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from grader.sandbox.protocol import ProtocolError, decode, load_tensors

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)
# Mostly the protocol's own words, so that the checks past the first are reached too.
DTYPES = st.sampled_from(["F32", "F16", "BF16", "I64", "BOOL", "U8", "F8", "float32"])
SHAPES = st.lists(st.integers(-2, 40) | st.sampled_from([0, 2**39, 2**40, 2**63, 10**30]), max_size=4)
ENTRY_VALUES = JSON | DTYPES | SHAPES
ENTRIES = st.dictionaries(st.sampled_from(["dtype", "shape", "data_offsets", "__metadata__"]), ENTRY_VALUES,
                          max_size=4) | JSON
TAGS = st.sampled_from(["$tensor", "$tuple", "$dict", "$handle", "$dtype", "$device", "$meta", "dtype", "device",
                        "requires_grad", "type"])
WORDS = st.sampled_from(["t0", "t1", "cpu", "cuda", "cuda:7", "meta", "cpu:0", "float32", "bool", "F32"])
VALUES = st.recursive(
    JSON | WORDS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TAGS, children, max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(entries=st.dictionaries(st.sampled_from(["t0", "t1", "__metadata__"]), ENTRIES, max_size=3),
       data=st.binary(max_size=48))
@example(entries={"t0": {"dtype": ["F32"], "shape": [4], "data_offsets": [0, 16]}}, data=bytes(16))
@example(entries={"t0": {"dtype": {"F32": 1}, "shape": [4], "data_offsets": [0, 16]}}, data=bytes(16))
@example(entries={"t0": {"dtype": "F32", "shape": [2**63, 0], "data_offsets": [0, 0]}}, data=b"")
@example(entries={"t0": {"dtype": "F32", "shape": [0, 2**39, 2**39], "data_offsets": [0, 0]}}, data=b"")
def test_any_tensor_entry_is_read_or_refused(entries, data):
    meta = json.dumps(entries).encode()
    try:
        tensors = load_tensors(bytearray(struct.pack("<Q", len(meta)) + meta + data))
    except ProtocolError:
        return
    assert all(type(tensor) is torch.Tensor for tensor in tensors.values())


@pytest.mark.parametrize("meta", [False, True], ids=["ordinary-reply", "reply-to-a-meta-request"])
@settings(max_examples=300, deadline=None)
@given(value=VALUES)
@example(value={"$tensor": "t0", "device": ["cpu"]})
@example(value={"$tensor": "t0", "device": "cuda:7"})
def test_any_value_is_decoded_or_refused(meta, value):
    try:
        decode(value, {"t0": torch.arange(4.0), "t1": torch.zeros(0, dtype=torch.bool)}, meta=meta)
    except ProtocolError:
        pass
