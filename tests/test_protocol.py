"""Tests for the grader <-> child wire format (grader/sandbox/protocol.py).

The trusted side runs ``recv`` + ``decode`` on bytes written by untrusted student code, so
besides round trips these tests check that malformed or hostile input is refused with
``ProtocolError`` and that nothing in a message can run code on the receiving side.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import shlex
import socket
import struct
import threading
import time

import pytest
import torch
from safetensors.torch import save as save_tensors

from grader.sandbox.protocol import (
    MAX_HEADER_BYTES,
    MAX_PAYLOAD_BYTES,
    MAX_TENSORS_HEADER_BYTES,
    Deadline,
    Encoder,
    Handle,
    MessageTooLarge,
    PeerClosed,
    ProtocolError,
    decode,
    load_tensors,
    recv,
    send,
)

# ---- helpers ----------------------------------------------------------------------


@pytest.fixture
def pair():
    """(writer, reader) socketpair with a watchdog: a recv that would block forever sees EOF
    after a few seconds instead, so a broken deadline fails the test rather than hanging it."""
    writer, reader = socket.socketpair()
    watchdog = threading.Timer(5.0, lambda: _shutdown(writer))
    watchdog.daemon = True
    watchdog.start()
    yield writer, reader
    watchdog.cancel()
    writer.close()
    reader.close()


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _soon(seconds: float = 3.0) -> float:
    return time.monotonic() + seconds


def send_raw(sock: socket.socket, header: bytes, payload: bytes = b"") -> None:
    """Write one frame by hand, bypassing ``send``'s own encoding."""
    sock.sendall(struct.pack(">QQ", len(header), len(payload)) + header + payload)


def roundtrip(pair, value, encoder: Encoder | None = None):
    writer, reader = pair
    encoder = encoder or Encoder()
    send(writer, {"value": encoder.encode(value)}, encoder.tensors)
    header, tensors = recv(reader, deadline=_soon())
    assert set(header) == {"value"}
    return decode(header["value"], tensors)


def assert_same_tensor(actual, expected: torch.Tensor) -> None:
    assert type(actual) is torch.Tensor
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert actual.device == torch.device("cpu")
    assert torch.equal(actual, expected.detach())


# ---- round trips ------------------------------------------------------------------


@pytest.mark.parametrize(
    "tensor",
    [
        torch.tensor([[1.5, -2.0], [3.25, 0.0]], dtype=torch.float32),
        torch.tensor([1e-300, 1.0 / 3.0, -7.0], dtype=torch.float64),
        torch.tensor([[2**62, -(2**62)], [0, 1]], dtype=torch.int64),
        torch.tensor([True, False, True]),
        torch.tensor(3.5),  # 0-d
        torch.tensor(7, dtype=torch.int64),  # 0-d int
        torch.tensor(False),  # 0-d bool
        torch.empty((0, 3), dtype=torch.float32),
        torch.empty((0, 3), dtype=torch.int64),
        torch.arange(24, dtype=torch.float32).reshape(2, 3, 4),
    ],
    ids=lambda t: f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}",
)
def test_roundtrip_tensor_keeps_dtype_shape_and_values(pair, tensor):
    assert_same_tensor(roundtrip(pair, tensor), tensor)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.arange(6.0).reshape(2, 3).t(),
        lambda: torch.arange(20, dtype=torch.int64).reshape(4, 5)[:, ::2],
        lambda: torch.arange(8.0).expand(3, 8),
    ],
    ids=["transpose", "strided-slice", "expand"],
)
def test_roundtrip_noncontiguous_tensor_arrives_with_equal_values(pair, make):
    tensor = make()
    assert not tensor.is_contiguous()
    assert_same_tensor(roundtrip(pair, tensor), tensor)


@pytest.mark.parametrize("requires_grad", [True, False])
def test_roundtrip_float_tensor_preserves_requires_grad(pair, requires_grad):
    tensor = torch.tensor([1.0, 2.0], requires_grad=requires_grad)
    result = roundtrip(pair, tensor)
    assert result.requires_grad is requires_grad
    assert torch.equal(result.detach(), tensor.detach())


def test_roundtrip_nonleaf_grad_tensor_arrives_requiring_grad(pair):
    tensor = torch.tensor([1.0, 2.0], requires_grad=True) * 3
    result = roundtrip(pair, tensor)
    assert result.requires_grad is True
    assert torch.equal(result.detach(), torch.tensor([3.0, 6.0]))


def test_decode_int_tensor_with_requires_grad_flag_ignores_it():
    tensors = {"t0": torch.tensor([1, 2])}
    result = decode({"$tensor": "t0", "device": "cpu", "requires_grad": True}, tensors)
    assert result.requires_grad is False
    assert torch.equal(result, torch.tensor([1, 2]))


def test_encode_copies_tensor_so_later_mutation_is_not_sent(pair):
    tensor = torch.zeros(3)
    encoder = Encoder()
    encoded = encoder.encode(tensor)
    tensor += 1
    writer, reader = pair
    send(writer, {"value": encoded}, encoder.tensors)
    header, tensors = recv(reader, deadline=_soon())
    assert torch.equal(decode(header["value"], tensors), torch.zeros(3))


def test_roundtrip_several_tensors_stay_distinct(pair):
    a, b = torch.tensor([1.0]), torch.tensor([2, 3])
    result = roundtrip(pair, {"a": a, "b": [b, a]})
    assert_same_tensor(result["a"], a)
    assert_same_tensor(result["b"][0], b)
    assert_same_tensor(result["b"][1], a)


@pytest.mark.parametrize(
    "value",
    [
        (1, 2),
        [1, 2],
        (),
        [],
        ((),),
        [()],
        ([1, (2, [3])], [(4,)]),
        [(1, [2, (3,)])],
    ],
    ids=repr,
)
def test_roundtrip_tuples_and_lists_stay_distinct(pair, value):
    def shape(v):
        if isinstance(v, (list, tuple)):
            return (type(v).__name__, [shape(item) for item in v])
        return v

    result = roundtrip(pair, value)
    assert shape(result) == shape(value)


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"a": 1},
        {"outer": {"inner": {"deep": [1, {"x": None}]}}, "": "empty key"},
        {"$tensor": "t0", "$tuple": [1], "$dict": 2},  # tag-like keys are plain keys here
        {"t": (1, {"u": (2.5,)})},
    ],
    ids=["empty", "flat", "nested", "tag-like-keys", "tuples-inside"],
)
def test_roundtrip_dicts_keep_keys_and_values(pair, value):
    result = roundtrip(pair, value)
    assert result == value
    assert type(result) is dict


@pytest.mark.parametrize(
    "value",
    [None, True, False, 0, -5, 2**62, 1.5, -0.25, 1.0, float("inf"), "", "text", "ünï€ode \n\"q\""],
    ids=repr,
)
def test_roundtrip_scalars_keep_value_and_type(pair, value):
    result = roundtrip(pair, value)
    assert result == value
    assert type(result) is type(value)


def test_roundtrip_nan_stays_nan(pair):
    result = roundtrip(pair, float("nan"))
    assert type(result) is float and math.isnan(result)


@pytest.mark.parametrize(
    "dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.uint8, torch.bool]
)
def test_roundtrip_dtype_value(pair, dtype):
    assert roundtrip(pair, dtype) is dtype


def test_roundtrip_device_value(pair):
    result = roundtrip(pair, torch.device("cpu"))
    assert result == torch.device("cpu")
    assert isinstance(result, torch.device)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_roundtrip_meta_tensor_keeps_shape_and_dtype_where_expected(pair, dtype):
    writer, reader = pair
    encoder = Encoder()
    send(writer, {"value": encoder.encode((torch.empty(2, 0, 5, dtype=dtype, device="meta"), torch.device("meta")))},
         encoder.tensors)
    header, tensors = recv(reader, deadline=_soon())
    tensor, device = decode(header["value"], tensors, meta=True)
    assert encoder.meta and not encoder.tensors  # no data crosses
    assert tensor.is_meta and tensor.shape == (2, 0, 5) and tensor.dtype == dtype
    assert device == torch.device("meta")


def test_an_encoder_says_whether_it_sent_something_on_the_meta_device():
    encoder = Encoder()
    encoder.encode((torch.zeros(2), torch.device("cpu")))
    assert not encoder.meta
    encoder.encode({"d": torch.device("meta")})
    assert encoder.meta


@pytest.mark.parametrize("value", [
    pytest.param({"$meta": [2, 3], "dtype": "float32"}, id="meta-tensor"),
    pytest.param({"$tuple": [{"$meta": [2], "dtype": "int64"}]}, id="meta-tensor-inside"),
    pytest.param({"$device": "meta"}, id="meta-device"),
])
def test_a_meta_value_is_refused_where_none_is_expected(value):
    # A reply to an ordinary request: a tensor without data would make the grader's arithmetic raise.
    with pytest.raises(ProtocolError):
        decode(value, {})


@pytest.mark.parametrize("value", [
    pytest.param({"$meta": [2, -1], "dtype": "float32"}, id="negative-size"),
    pytest.param({"$meta": [2**62, 2**62], "dtype": "float32"}, id="huge-size"),
    pytest.param({"$meta": [2.5], "dtype": "float32"}, id="float-size"),
    pytest.param({"$meta": "2, 3", "dtype": "float32"}, id="shape-not-a-list"),
    pytest.param({"$meta": [2], "dtype": "complex64"}, id="dtype-not-allowed"),
    pytest.param({"$meta": [2]}, id="no-dtype"),
    pytest.param({"$meta": [1] * 65, "dtype": "float32"}, id="too-many-dimensions"),
])
def test_a_malformed_meta_tensor_is_refused(value):
    with pytest.raises(ProtocolError):
        decode(value, {}, meta=True)


def test_roundtrip_handle(pair):
    result = roundtrip(pair, [Handle(7, "Linear"), (Handle(0, "SGD"),)])
    assert result == [Handle(7, "Linear"), (Handle(0, "SGD"),)]
    assert all(type(h) is Handle for h in (result[0], result[1][0]))


def test_roundtrip_mixed_structure(pair):
    tensor = torch.arange(4.0)
    value = {"out": (tensor, [torch.float64, torch.device("cpu")]), "meta": {"h": Handle(3, "M"), "n": None}}
    result = roundtrip(pair, value)
    assert_same_tensor(result["out"][0], tensor)
    assert result["out"][1] == [torch.float64, torch.device("cpu")]
    assert type(result["out"]) is tuple
    assert result["meta"] == {"h": Handle(3, "M"), "n": None}


def test_recv_reads_back_to_back_messages_separately(pair):
    writer, reader = pair
    send(writer, {"n": 1}, {"x": torch.tensor([1.0])})
    send(writer, {"n": 2})
    send(writer, {"n": 3}, {"y": torch.tensor([2, 3])})
    first, second, third = (recv(reader, deadline=_soon()) for _ in range(3))
    assert first[0] == {"n": 1} and torch.equal(first[1]["x"], torch.tensor([1.0]))
    assert second == ({"n": 2}, {})
    assert third[0] == {"n": 3} and torch.equal(third[1]["y"], torch.tensor([2, 3]))


# ---- Encoder ----------------------------------------------------------------------


class _Opaque:
    pass


@pytest.mark.parametrize(
    "value",
    [_Opaque(), [1, _Opaque()], {"k": _Opaque()}, {1: "int key"}, {1, 2}, b"bytes"],
    ids=["object", "in-list", "in-dict", "non-str-key", "set", "bytes"],
)
def test_encoder_without_to_handle_raises_typeerror(value):
    with pytest.raises(TypeError):
        Encoder().encode(value)


def test_an_encoder_refuses_more_tensor_data_than_a_peer_accepts_before_copying_it():
    encoder = Encoder()
    half = torch.zeros(MAX_PAYLOAD_BYTES // 2, dtype=torch.uint8)
    encoder.encode([half, half])  # exactly the bound: accepted
    huge = torch.zeros(1, dtype=torch.uint8).expand(2**32)  # 4 GiB, a view of one byte: refused, not copied
    with pytest.raises(MessageTooLarge, match="message too large: 4 GiB of tensors or more, where at most 64 MiB"):
        Encoder().encode({"output": huge})
    with pytest.raises(MessageTooLarge):
        encoder.encode(torch.zeros(1, dtype=torch.uint8))  # one byte more, in the same message


def test_encoder_with_to_handle_encodes_object_as_returned_handle(pair):
    obj = _Opaque()
    seen = []

    def to_handle(value):
        seen.append(value)
        return Handle(42, "Opaque")

    encoder = Encoder(to_handle=to_handle)
    assert encoder.encode(obj) == {"$handle": 42, "type": "Opaque"}
    assert seen == [obj] and seen[0] is obj
    result = roundtrip(pair, [1, {"o": obj}], Encoder(to_handle=to_handle))
    assert result == [1, {"o": Handle(42, "Opaque")}]


def test_encoder_with_to_handle_leaves_supported_values_alone():
    calls = []
    encoder = Encoder(to_handle=lambda v: calls.append(v) or Handle(1, "x"))
    assert encoder.encode([1, "a", None, (2.0,)]) == [1, "a", None, {"$tuple": [2.0]}]
    assert calls == []


# ---- decode rejects ---------------------------------------------------------------

_T0 = {"t0": torch.tensor([1.0, 2.0])}


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"$unknown": 1}, id="unknown-tag"),
        pytest.param({"__class__": "os.system"}, id="untagged-dict"),
        pytest.param({}, id="empty-dict"),
        pytest.param({"$tensor": "t1"}, id="tensor-key-not-in-payload"),
        pytest.param({"$tensor": 0}, id="tensor-key-not-a-string"),
        pytest.param({"$tensor": "t0", "device": "meta"}, id="tensor-device-meta"),
        pytest.param({"$tensor": "t0", "device": "garbage"}, id="tensor-device-garbage"),
        pytest.param({"$tensor": "t0", "device": 0}, id="tensor-device-int"),
        pytest.param({"$tensor": "t0", "device": None}, id="tensor-device-null"),
        pytest.param({"$tensor": "t0", "device": ["cpu"]}, id="tensor-device-list"),
        pytest.param({"$device": "meta"}, id="device-meta"),
        pytest.param({"$device": "garbage"}, id="device-garbage"),
        pytest.param({"$device": ""}, id="device-empty"),
        pytest.param({"$device": 0}, id="device-int"),
        pytest.param({"$device": None}, id="device-null"),
        pytest.param({"$device": {"$device": "cpu"}}, id="device-dict"),
        pytest.param({"$dict": [["a"]]}, id="dict-entry-too-short"),
        pytest.param({"$dict": [["a", 1, 2]]}, id="dict-entry-too-long"),
        pytest.param({"$dict": [[1, 2]]}, id="dict-entry-non-str-key"),
        pytest.param({"$dict": ["a", 1]}, id="dict-entry-not-a-pair"),
        pytest.param({"$dict": [{"a": 1}]}, id="dict-entry-object"),
        pytest.param({"$dict": {"a": 1}}, id="dict-not-a-list"),
        pytest.param({"$tuple": "abc"}, id="tuple-not-a-list"),
        pytest.param({"$handle": "1", "type": "M"}, id="handle-id-not-int"),
        pytest.param({"$dtype": "float128"}, id="dtype-unknown"),
        pytest.param({"$dtype": "torch.float32"}, id="dtype-with-prefix"),
        pytest.param({"$dtype": "complex64"}, id="dtype-not-allowed"),
        pytest.param({"$dtype": 1}, id="dtype-int"),
        pytest.param([1, {"$bogus": 2}], id="bad-value-inside-list"),
        pytest.param({"$tuple": [{}]}, id="bad-value-inside-tuple"),
        pytest.param({"$dict": [["k", {"$dtype": "nope"}]]}, id="bad-value-inside-dict"),
        # One tensor named twice would be sent on twice (a reply of 16 MiB, named 8 times: 128 MiB).
        pytest.param([{"$tensor": "t0"}, {"$tensor": "t0"}], id="tensor-named-twice"),
        pytest.param({"$dict": [["a", {"$tensor": "t0"}], ["b", {"$tuple": [{"$tensor": "t0"}]}]]},
                     id="tensor-named-twice-nested"),
    ],
)
def test_decode_malformed_value_raises_protocolerror(value):
    with pytest.raises(ProtocolError):
        decode(value, _T0)


@pytest.mark.parametrize(
    "value", [object(), b"bytes", (1, 2), {1, 2}, torch.tensor([1.0])], ids=["object", "bytes", "tuple", "set", "tensor"]
)
def test_decode_non_json_python_value_raises_protocolerror(value):
    with pytest.raises(ProtocolError):
        decode(value, {})


@pytest.mark.parametrize(
    "value",
    [{"$tensor": []}, {"$tensor": {"a": 1}}, {"$dtype": []}, {"$dtype": {"a": 1}}],
    ids=["tensor-list", "tensor-object", "dtype-list", "dtype-object"],
)
def test_decode_unhashable_tag_value_raises_protocolerror(value):
    with pytest.raises(ProtocolError):
        decode(value, _T0)


def test_decode_tensor_on_nonexistent_cuda_device_raises_protocolerror():
    with pytest.raises(ProtocolError):
        decode({"$tensor": "t0", "device": "cuda:99"}, _T0)


def test_decode_tensor_subclass_in_payload_dict_raises_protocolerror():
    class T(torch.Tensor):
        pass

    with pytest.raises(ProtocolError):
        decode({"$tensor": "t0"}, {"t0": torch.tensor([1.0]).as_subclass(T)})


def _nest(kind: str, depth: int):
    value = 1
    for _ in range(depth):
        if kind == "list":
            value = [value]
        elif kind == "tuple":
            value = {"$tuple": [value]}
        else:
            value = {"$dict": [["k", value]]}
    return value


@pytest.mark.parametrize("kind", ["list", "tuple", "dict"])
@pytest.mark.parametrize("max_depth", [0, 3])
def test_decode_nesting_deeper_than_max_depth_raises_protocolerror(kind, max_depth):
    decode(_nest(kind, max_depth), {}, max_depth=max_depth)  # at the limit: fine
    with pytest.raises(ProtocolError):
        decode(_nest(kind, max_depth + 1), {}, max_depth=max_depth)


def test_decode_default_max_depth_rejects_deep_nesting():
    assert decode(_nest("list", 64), {}) is not None
    with pytest.raises(ProtocolError):
        decode(_nest("list", 65), {})
    with pytest.raises(ProtocolError):
        decode(_nest("list", 500), {})


# ---- recv rejects -----------------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [b"not json", b"{\"a\": ", b"", b"\xff\xfe\xfa garbage", b"{'single': 'quotes'}"],
    ids=["text", "truncated", "empty", "not-utf8", "python-literal"],
)
def test_recv_header_not_json_raises_protocolerror(pair, header):
    writer, reader = pair
    send_raw(writer, header)
    with pytest.raises(ProtocolError):
        recv(reader, deadline=_soon())


@pytest.mark.parametrize("header", [b"[1, 2]", b"[]", b"3", b"\"str\"", b"null", b"true"])
def test_recv_header_not_json_object_raises_protocolerror(pair, header):
    writer, reader = pair
    send_raw(writer, header)
    with pytest.raises(ProtocolError):
        recv(reader, deadline=_soon())


@pytest.mark.parametrize(
    "header_len, payload_len",
    [
        (MAX_HEADER_BYTES + 1, 0),
        (2**64 - 1, 0),
        (2, MAX_PAYLOAD_BYTES + 1),
        (2, 2**64 - 1),
    ],
    ids=["header-just-over", "header-huge", "payload-just-over", "payload-huge"],
)
def test_recv_declared_length_over_limit_raises_protocolerror(pair, header_len, payload_len):
    writer, reader = pair
    writer.sendall(struct.pack(">QQ", header_len, payload_len))  # the prefix only
    with pytest.raises(ProtocolError) as info:
        recv(reader, deadline=_soon(1.0))
    assert not isinstance(info.value, PeerClosed)


def _valid_blob() -> bytes:
    return save_tensors({"t": torch.arange(4.0)})


def _entry_blob(entry: object) -> bytes:
    meta = json.dumps({"t": entry}).encode()
    return struct.pack("<Q", len(meta)) + meta + b"\0" * 16


@pytest.mark.parametrize(
    "payload",
    [
        b"hello, this is not safetensors",
        b"\x01",
        struct.pack("<Q", 2**40) + b"{}",
        struct.pack("<Q", 2) + b"[]",
        _valid_blob()[:-4],
        _entry_blob({"dtype": "F32", "shape": [4], "data_offsets": [0, 1000]}),
        # Values JSON allows where the entry wants a name, a shape or two offsets: each is an
        # entry the receiver refuses, never one its own code trips over (a list is unhashable).
        _entry_blob({"dtype": ["F32"], "shape": [4], "data_offsets": [0, 16]}),
        _entry_blob({"dtype": {"F32": 1}, "shape": [4], "data_offsets": [0, 16]}),
        _entry_blob({"dtype": "F32", "shape": [[4]], "data_offsets": [0, 16]}),
        _entry_blob({"dtype": "F32", "shape": [True, 4], "data_offsets": [0, 16]}),
        _entry_blob({"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}),
        _entry_blob({"dtype": "F32", "shape": [4], "data_offsets": {"0": 16}}),
        _entry_blob({"dtype": "F32", "shape": [4], "data_offsets": [0.0, 16]}),
        _entry_blob({"dtype": "F32", "shape": [4], "data_offsets": [0, 16, 32]}),
        _entry_blob(["F32", [4], [0, 16]]),
        # No elements, so no bytes: but sizes no tensor can have, or whose strides overflow.
        _entry_blob({"dtype": "F32", "shape": [2**63, 0], "data_offsets": [0, 0]}),
        _entry_blob({"dtype": "F32", "shape": [0, 2**39, 2**39], "data_offsets": [0, 0]}),
    ],
    ids=["text", "one-byte", "huge-inner-header", "inner-header-list", "truncated", "bad-offsets", "dtype-list",
         "dtype-dict", "shape-nested", "shape-bool", "shape-int", "offsets-dict", "offsets-float", "offsets-three",
         "entry-list", "empty-huge-size", "empty-strides-overflow"],
)
def test_recv_payload_not_safetensors_raises_protocolerror(pair, payload):
    writer, reader = pair
    send_raw(writer, b"{}", payload)
    with pytest.raises(ProtocolError) as info:
        recv(reader, deadline=_soon())
    assert not isinstance(info.value, PeerClosed)


def test_a_payload_header_far_longer_than_its_entries_need_is_refused_before_it_is_parsed(monkeypatch):
    # Parsed, 64 MiB of "[]," took 1.7 GiB and 7 s of the trusted side's CPU.
    parsed = []
    monkeypatch.setattr(json, "loads", lambda *args, **kwargs: parsed.append(args) or {})
    with pytest.raises(ProtocolError, match="header of"):
        load_tensors(bytearray(_entry_blob({"dtype": "F32", "shape": [4], "data_offsets": [0, 16],
                                            "pad": "[]," * MAX_TENSORS_HEADER_BYTES})))
    assert parsed == []


def _full_message() -> bytes:
    header = json.dumps({"value": {"$tensor": "t0"}}).encode()
    payload = save_tensors({"t0": torch.arange(16.0)})
    return struct.pack(">QQ", len(header), len(payload)) + header + payload


_MESSAGE = _full_message()
_HEADER_LEN = struct.unpack(">QQ", _MESSAGE[:16])[0]


@pytest.mark.parametrize(
    "cut",
    [0, 5, 16, 16 + _HEADER_LEN // 2, 16 + _HEADER_LEN, len(_MESSAGE) - 1],
    ids=["nothing", "mid-prefix", "after-prefix", "mid-header", "after-header", "mid-payload"],
)
def test_recv_peer_closes_mid_message_raises_peerclosed(pair, cut):
    writer, reader = pair
    writer.sendall(_MESSAGE[:cut])
    writer.close()
    with pytest.raises(PeerClosed):
        recv(reader, deadline=_soon())


def test_recv_whole_message_before_close_is_read(pair):
    writer, reader = pair
    writer.sendall(_MESSAGE)
    writer.close()
    header, tensors = recv(reader, deadline=_soon())
    assert torch.equal(decode(header["value"], tensors), torch.arange(16.0))


@pytest.mark.parametrize(
    "partial",
    [b"", _MESSAGE[:10], _MESSAGE[: 16 + _HEADER_LEN // 2], _MESSAGE[:-3]],
    ids=["nothing", "mid-prefix", "mid-header", "mid-payload"],
)
def test_recv_nothing_complete_before_deadline_raises_deadline(pair, partial):
    writer, reader = pair
    writer.sendall(partial)
    start = time.monotonic()
    with pytest.raises(Deadline):
        recv(reader, deadline=time.monotonic() + 0.05)
    assert time.monotonic() - start < 1.0


# ---- hostile payloads -------------------------------------------------------------


class _Exploit:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(self.marker)}",))


class _FileWriter:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _pickled(cls, marker) -> bytes:
    return pickle.dumps(cls(marker))


def _torch_saved(cls, marker) -> bytes:
    import io

    buffer = io.BytesIO()
    torch.save({"t": torch.zeros(2), "x": cls(marker)}, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("cls", [_Exploit, _FileWriter], ids=["os.system", "open"])
def test_exploit_pickle_is_armed(tmp_path, cls):
    # Control: the payload really runs code when unpickled, so the next test means something.
    marker = tmp_path / "control"
    pickle.loads(_pickled(cls, marker))
    assert marker.exists()


@pytest.mark.parametrize("cls", [_Exploit, _FileWriter], ids=["os.system", "open"])
@pytest.mark.parametrize("build", [_pickled, _torch_saved], ids=["pickle", "torch.save"])
@pytest.mark.parametrize("where", ["payload", "header"])
def test_recv_pickle_is_rejected_and_not_executed(pair, tmp_path, cls, build, where):
    writer, reader = pair
    marker = tmp_path / "pwned"
    blob = build(cls, marker)
    if where == "payload":
        send_raw(writer, b"{\"value\": {\"$tensor\": \"t\"}}", blob)
    else:
        send_raw(writer, blob)
    with pytest.raises(ProtocolError):
        recv(reader, deadline=_soon())
    assert not marker.exists()


def test_tensor_subclass_arrives_as_plain_tensor(pair):
    class T(torch.Tensor):
        pass

    tensor = torch.tensor([1.0, 2.0, 3.0]).as_subclass(T)
    assert type(tensor) is T
    result = roundtrip(pair, {"x": tensor})["x"]
    assert type(result) is torch.Tensor
    assert torch.equal(result, torch.tensor([1.0, 2.0, 3.0]))


def test_recv_tensors_are_plain_tensors(pair):
    writer, reader = pair
    send(writer, {}, {"a": torch.zeros(2), "b": torch.ones(3, dtype=torch.int64)})
    _, tensors = recv(reader, deadline=_soon())
    assert set(tensors) == {"a", "b"}
    assert all(type(t) is torch.Tensor for t in tensors.values())


# ---- known bugs in recv -----------------------------------------------------------


def test_recv_deeply_nested_header_raises_protocolerror(pair):
    writer, reader = pair
    depth = 20_000  # 40 KB, far under MAX_HEADER_BYTES
    send_raw(writer, b"{\"v\": " + b"[" * depth + b"]" * depth + b"}")
    with pytest.raises(ProtocolError):
        recv(reader, deadline=_soon())


def test_recv_header_with_huge_integer_raises_protocolerror(pair):
    writer, reader = pair
    send_raw(writer, b"{\"v\": " + b"9" * 5000 + b"}")
    with pytest.raises(ProtocolError):
        recv(reader, deadline=_soon())


def test_decode_rejects_a_boolean_handle_id():
    with pytest.raises(ProtocolError):
        decode({"$handle": True, "type": "Module"}, {})


def test_send_to_a_peer_that_stops_reading_raises_deadline(pair):
    writer, _ = pair  # the reader never reads: the socket's buffers fill
    start = time.monotonic()
    with pytest.raises(Deadline):
        send(writer, {"value": "x" * 2**22}, deadline=time.monotonic() + 0.2)
    assert time.monotonic() - start < 3.0


# ---- the payload writer ----------------------------------------------------------------

EVERY_DTYPE = {
    "f16": torch.randn(3).half(), "bf16": torch.randn(2, 2).to(torch.bfloat16), "f32": torch.randn(2, 3),
    "f64": torch.randn(5, dtype=torch.float64), "i8": torch.tensor([1, -2], dtype=torch.int8),
    "i16": torch.tensor([300], dtype=torch.int16), "i32": torch.tensor([7, 8, 9], dtype=torch.int32),
    "i64": torch.arange(5), "u8": torch.tensor([255, 0], dtype=torch.uint8), "bool": torch.tensor([True, False, True]),
    "scalar": torch.tensor(3.5), "empty": torch.empty(0, 4),
}


def test_the_payload_is_safetensors_that_the_library_reads_and_the_receiver_reads_in_place():
    from safetensors.torch import load

    from grader.sandbox.protocol import load_tensors
    from grader.sandbox.protocol import save_tensors as write_payload

    blob = write_payload(EVERY_DTYPE)
    assert len(blob) == len(save_tensors(EVERY_DTYPE))  # the library's layout: no gaps, the header padded
    by_library, in_place = load(blob), load_tensors(buffer := bytearray(blob))
    for name, tensor in EVERY_DTYPE.items():
        for back in (by_library[name], in_place[name]):
            assert back.dtype == tensor.dtype and torch.equal(back, tensor), name
    start = torch.frombuffer(buffer, dtype=torch.uint8).data_ptr()
    # Widest first, so every tensor starts aligned: none is copied out of the message.
    assert all(start <= in_place[name].data_ptr() < start + len(buffer) for name in EVERY_DTYPE
               if name not in ("bool", "empty"))


def test_a_tensor_of_a_dtype_the_grader_does_not_take_is_refused_where_it_is_encoded():
    with pytest.raises(TypeError, match="complex64 cannot be sent to the grader"):
        Encoder().encode(torch.zeros(2, dtype=torch.complex64))
