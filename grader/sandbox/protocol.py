"""The wire format between the trusted grader and the student's child process.

A message is a JSON header plus an optional safetensors payload, each length-prefixed.
Values inside the header are plain JSON, with tagged objects for what JSON lacks:
``{"$tensor": key}`` (the tensor ``key`` of the payload), ``{"$tuple": [...]}``,
``{"$dict": [[k, v], ...]}``, ``{"$handle": id, "type": name}`` (an object that stays in
the child), ``{"$dtype": "float32"}`` and ``{"$device": "cpu"}``. A tensor on the ``meta``
device (a shape and a dtype, no data) is ``{"$meta": [2, 3], "dtype": "float32"}``: the
grader sends one to see, on a machine without a GPU, whether code follows its input's
device; it is decoded only where the receiver expects one (``decode(..., meta=True)``), so
no reply to an ordinary request can hand the grader a tensor it cannot compute with.

Nothing here can run code on the receiving side: safetensors holds only plain tensors and
JSON holds only data. What the trusted side receives is bounded (:data:`MAX_HEADER_BYTES`,
:data:`MAX_PAYLOAD_BYTES`) and read into one buffer that the tensors then share, so a reply
costs the grader its own size once; anything malformed, oversized or of an unexpected kind
raises :class:`ProtocolError`.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import torch

from grader.sandbox.limits import format_bytes

_PREFIX = struct.Struct(">QQ")  # header length, payload length
# What the trusted side accepts from a child: far above any real reply (the suites' tensors
# are kilobytes), far below what would strain the grader.
MAX_HEADER_BYTES = 2**20
MAX_PAYLOAD_BYTES = 64 * 2**20
MAX_TENSORS = 4096
# The payload's own JSON header: an entry per tensor, some 100 bytes each.
MAX_TENSORS_HEADER_BYTES = MAX_TENSORS * 256
# A dimension of a tensor, a meta tensor's included: far above any real one, and every size,
# stride and product of them fits in 64 bits.
MAX_DIMENSION = 2**40
# safetensors' dtype names: https://github.com/huggingface/safetensors (format section)
_SAFETENSORS_DTYPES = {
    "F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64,
    "I8": torch.int8, "I16": torch.int16, "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8,
    "BOOL": torch.bool,
}

_SAFETENSORS_NAMES = {dtype: name for name, dtype in _SAFETENSORS_DTYPES.items()}

_DTYPES = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in (
        torch.float16, torch.bfloat16, torch.float32, torch.float64,
        torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool,
    )
}


class Status(StrEnum):
    """Outcome of one request, as the child reports it."""

    OK = "ok"
    EXCEPTION = "exception"  # the student's code raised
    NOT_FOUND = "not_found"  # the submission does not define the name
    BAD_REQUEST = "bad_request"  # the request itself could not be served


class ProtocolError(Exception):
    """The peer sent something that is not a well-formed message."""


class MessageTooLarge(ProtocolError):
    """A value holds more tensor data than a peer accepts (:data:`MAX_PAYLOAD_BYTES`): said before
    a byte of it is copied, by the side that would send it."""


class PeerClosed(ProtocolError):
    """The peer closed the connection (for a child: it ended or was killed)."""


class Deadline(Exception):
    """No complete message arrived before the deadline."""


@dataclass(frozen=True)
class Handle:
    """Reference to an object that lives in the child (a module, an optimizer, ...)."""

    id: int
    type: str


def is_shape(value: Any) -> bool:
    """Whether ``value``, from a peer's JSON, is a tensor's shape: at most 64 ints, each in
    ``[0, MAX_DIMENSION)``."""
    return type(value) is list and len(value) <= 64 and all(type(n) is int and 0 <= n < MAX_DIMENSION for n in value)


# ---- framing ----------------------------------------------------------------------


def send(sock: socket.socket, header: dict, tensors: dict[str, torch.Tensor] | None = None,
         deadline: float | None = None) -> None:
    """Write one message; a peer that stops reading makes it raise :class:`Deadline` at ``deadline``."""
    header_bytes = json.dumps(header).encode()
    payload = save_tensors(tensors) if tensors else b""
    sock.settimeout(None if deadline is None else max(deadline - time.monotonic(), 1e-3))
    try:
        # One write: the peer wakes once for the whole message, not once per part.
        sock.sendall(b"".join((_PREFIX.pack(len(header_bytes), len(payload)), header_bytes, payload)))
    except TimeoutError:
        raise Deadline() from None


def _recv_exactly(sock: socket.socket, size: int, deadline: float | None) -> bytearray:
    """``size`` bytes, read straight into one buffer (no chunks to join)."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    received = 0
    while received < size:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Deadline()
            sock.settimeout(remaining)
        else:
            sock.settimeout(None)
        try:
            count = sock.recv_into(view[received:], min(size - received, 1 << 20))
        except TimeoutError:
            raise Deadline() from None
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise PeerClosed(str(exc)) from None
        if not count:
            raise PeerClosed("connection closed")
        received += count
    return buffer


def recv(
    sock: socket.socket, deadline: float | None = None, *,
    max_header: int = MAX_HEADER_BYTES, max_payload: int = MAX_PAYLOAD_BYTES,
) -> tuple[dict, dict[str, torch.Tensor]]:
    """Read one message; ``deadline`` is a ``time.monotonic()`` value or None for no limit.
    The bounds are the trusted side's; the child, which receives the submission's source,
    passes its own."""
    header_len, payload_len = _PREFIX.unpack(_recv_exactly(sock, _PREFIX.size, deadline))
    if header_len > max_header or payload_len > max_payload:
        raise ProtocolError(f"message too large: {format_bytes(header_len)} of data and {format_bytes(payload_len)} "
                            f"of tensors, where at most {format_bytes(max_header)} and {format_bytes(max_payload)} "
                            "are accepted")
    try:
        header = json.loads(_recv_exactly(sock, header_len, deadline))
    except (ValueError, RecursionError) as exc:  # bad JSON or UTF-8, huge ints, deep nesting
        raise ProtocolError(f"header is not acceptable JSON: {type(exc).__name__}") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    tensors = load_tensors(_recv_exactly(sock, payload_len, deadline)) if payload_len else {}
    return header, tensors


def save_tensors(tensors: dict[str, torch.Tensor]) -> bytes:
    """A safetensors blob of CPU tensors that need no gradient (as :class:`Encoder` makes
    them), each laid out in row-major order whatever its strides. Written here: the library's
    writer takes three times as long for the few small tensors of a message. The widest dtypes
    first and the header padded to 8 bytes, as the library lays it out, so every tensor starts
    aligned and :func:`load_tensors` reads it in place."""
    header: dict[str, dict] = {}
    data: list[bytes] = []
    offset = 0
    for name, tensor in sorted(tensors.items(), key=lambda item: (-item[1].element_size(), item[0])):
        # numpy has no bfloat16: its bytes go as int16's, which are the same bytes.
        raw = (tensor.view(torch.int16) if tensor.dtype == torch.bfloat16 else tensor).numpy().tobytes()
        header[name] = {"dtype": _SAFETENSORS_NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        data.append(raw)
        offset += len(raw)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    return b"".join((struct.pack("<Q", len(encoded)), encoded, *data))


def load_tensors(blob: bytearray) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors blob, as views of ``blob`` (no copy). Validated here
    rather than by the safetensors library, whose loader copies every tensor."""
    if len(blob) < 8:
        raise ProtocolError("payload is not a valid safetensors blob: too short")
    (meta_len,) = struct.unpack_from("<Q", blob)
    if meta_len > len(blob) - 8:
        raise ProtocolError("payload is not a valid safetensors blob: header longer than the payload")
    if meta_len > MAX_TENSORS_HEADER_BYTES:  # parsed JSON takes many times its size in memory and time
        raise ProtocolError(f"payload is not a valid safetensors blob: a header of {format_bytes(meta_len)}, where "
                            f"at most {format_bytes(MAX_TENSORS_HEADER_BYTES)} are accepted")
    try:
        meta = json.loads(blob[8:8 + meta_len])
    except (ValueError, RecursionError):
        raise ProtocolError("payload is not a valid safetensors blob: header is not JSON") from None
    if not isinstance(meta, dict):
        raise ProtocolError("payload is not a valid safetensors blob: header is not an object")
    meta.pop("__metadata__", None)
    if len(meta) > MAX_TENSORS:
        raise ProtocolError(f"too many tensors ({len(meta)}; the limit is {MAX_TENSORS})")
    data_start = 8 + meta_len
    spans = []
    tensors = {}
    for name, info in meta.items():
        dtype, shape, begin, end = _tensor_entry(name, info, len(blob) - data_start)
        spans.append((begin, end))
        tensors[name] = _tensor_view(blob, dtype, shape, data_start + begin)
    spans.sort()
    if any(later_begin < end for (_, end), (later_begin, _) in zip(spans, spans[1:])):
        raise ProtocolError("payload is not a valid safetensors blob: tensors overlap")
    return tensors


def _tensor_entry(name: str, info: Any, data_len: int) -> tuple[torch.dtype, list[int], int, int]:
    dtype = shape = offsets = None
    if isinstance(info, dict):
        name_of_dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        dtype = _SAFETENSORS_DTYPES.get(name_of_dtype) if isinstance(name_of_dtype, str) else None
    if (dtype is None or not is_shape(shape) or type(offsets) is not list or len(offsets) != 2 or not all(type(n) is int for n in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= data_len
            or math.prod(shape) * dtype.itemsize != offsets[1] - offsets[0]):
        raise ProtocolError(f"payload is not a valid safetensors blob: bad entry for {name[:40]!r}")
    return dtype, shape, offsets[0], offsets[1]


def _tensor_view(blob: bytearray, dtype: torch.dtype, shape: list[int], offset: int) -> torch.Tensor:
    count = math.prod(shape)
    if count == 0:
        try:
            return torch.empty(shape, dtype=dtype)
        except RuntimeError:  # no elements, but sizes whose strides overflow ([0, 2**39, 2**39])
            raise ProtocolError(f"payload is not a valid safetensors blob: a shape of {len(shape)} dimensions "
                                "whose strides overflow") from None
    if dtype == torch.bool:  # any byte but 0 is True; a bool tensor holding 2 would be undefined
        return torch.frombuffer(blob, dtype=torch.uint8, count=count, offset=offset).reshape(shape) != 0
    if offset % dtype.itemsize:  # unaligned (after an odd-sized tensor): copy this one
        flat = torch.frombuffer(bytearray(blob[offset:offset + count * dtype.itemsize]), dtype=dtype)
    else:
        flat = torch.frombuffer(blob, dtype=dtype, count=count, offset=offset)
    return flat if len(shape) == 1 else flat.reshape(shape)


# ---- values -----------------------------------------------------------------------


class Encoder:
    """Turns Python values into a JSON-able structure plus a dict of tensors.

    ``to_handle`` decides what happens to values that are none of the supported kinds:
    the child keeps them and sends a handle; the trusted side never has such values.
    """

    def __init__(self, to_handle=None):
        self.tensors: dict[str, torch.Tensor] = {}
        self.meta = False  # whether a meta tensor or the meta device was encoded
        self._to_handle = to_handle
        self._payload_bytes = 0

    def encode(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.is_meta:
            self.meta = True
            return {"$meta": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
        if isinstance(value, torch.Tensor):
            if value.dtype not in _SAFETENSORS_NAMES:
                raise TypeError(f"a tensor of dtype {value.dtype} cannot be sent to the grader (it takes "
                                f"{', '.join(sorted(_DTYPES))})")
            if value.layout != torch.strided:
                raise TypeError(f"a tensor of layout {value.layout} cannot be sent to the grader: send a dense "
                                "one (Tensor.to_dense())")
            self._payload_bytes += value.numel() * value.element_size()
            if self._payload_bytes > MAX_PAYLOAD_BYTES:  # the peer would refuse it: copy none of it
                raise MessageTooLarge(f"message too large: {format_bytes(self._payload_bytes)} of tensors or more, "
                                      f"where at most {format_bytes(MAX_PAYLOAD_BYTES)} are accepted")
            key = f"t{len(self.tensors)}"
            # A copy: the message holds the tensor as it is now, whatever happens to it before it is sent.
            self.tensors[key] = value.detach().clone() if value.device.type == "cpu" else value.detach().cpu()
            return {"$tensor": key, "device": str(value.device), "requires_grad": value.requires_grad}
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, Handle):
            return {"$handle": value.id, "type": value.type}
        if isinstance(value, torch.dtype):
            return {"$dtype": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            self.meta = self.meta or value.type == "meta"
            return {"$device": str(value)}
        if isinstance(value, (tuple, list)):
            items = [self.encode(item) for item in value]
            return items if isinstance(value, list) else {"$tuple": items}
        if isinstance(value, dict) and all(isinstance(key, str) for key in value):
            return {"$dict": [[key, self.encode(item)] for key, item in value.items()]}
        if self._to_handle is not None:
            return self.encode(self._to_handle(value))
        raise TypeError(f"cannot send a value of type {type(value).__name__}")


def _parse_device(text: Any, meta: bool = False) -> torch.device:
    if not isinstance(text, str):
        raise ProtocolError("device is not a string")
    try:
        device = torch.device(text)
    except RuntimeError:
        raise ProtocolError(f"unknown device {text!r}") from None
    if device.type not in ("cpu", "cuda", *(("meta",) if meta else ())):
        raise ProtocolError(f"unsupported device {text!r}")
    return device


def _meta_tensor(value: dict) -> torch.Tensor:
    shape, dtype = value["$meta"], value.get("dtype")
    if not (is_shape(shape) and isinstance(dtype, str) and dtype in _DTYPES):
        raise ProtocolError(f"malformed meta tensor {str(value)[:80]!r}")
    try:
        return torch.empty(shape, dtype=_DTYPES[dtype], device="meta")
    except RuntimeError:  # a shape whose size overflows
        raise ProtocolError(f"malformed meta tensor {str(value)[:80]!r}") from None


def decode(value: Any, tensors: dict[str, torch.Tensor], *, max_depth: int = 64, meta: bool = False) -> Any:
    """Inverse of :class:`Encoder`; raises :class:`ProtocolError` on anything unexpected.

    Tensors are moved to the device their descriptor names, so a test can check where
    the student's code put its output. ``meta``: meta tensors and the meta device are
    expected (the reply to a request that sent them); else they are refused. Each of the
    payload's tensors is named once: a tensor the value named again would be a second copy
    wherever the value is sent on (8 names for one 16 MiB tensor: 128 MiB to send back).
    """
    return _decode(value, tensors, max_depth, meta, set())


def _decode(value: Any, tensors: dict[str, torch.Tensor], max_depth: int, meta: bool, named: set[str]) -> Any:
    if max_depth < 0:
        raise ProtocolError("value nested too deeply")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_decode(item, tensors, max_depth - 1, meta, named) for item in value]
    if not isinstance(value, dict) or len(value) == 0:
        raise ProtocolError(f"unexpected value {str(value)[:80]!r}")
    if "$meta" in value and meta:
        return _meta_tensor(value)
    if "$tensor" in value:
        tensor = tensors.get(value["$tensor"]) if isinstance(value["$tensor"], str) else None
        if type(tensor) is not torch.Tensor:
            raise ProtocolError(f"missing tensor {str(value['$tensor'])[:40]!r}")
        if value["$tensor"] in named:
            raise ProtocolError(f"tensor {value['$tensor'][:40]!r} named twice")
        named.add(value["$tensor"])
        device = value.get("device", "cpu")
        if device != "cpu":  # the payload's tensors are on the CPU already
            device = _parse_device(device)
            try:
                tensor = tensor.to(device)
            except (RuntimeError, AssertionError):  # no such CUDA device here
                raise ProtocolError(f"device {device} is not available") from None
        if value.get("requires_grad") is True and tensor.is_floating_point():
            tensor.requires_grad_(True)
        return tensor
    if "$tuple" in value and isinstance(value["$tuple"], list):
        return tuple(_decode(item, tensors, max_depth - 1, meta, named) for item in value["$tuple"])
    if "$dict" in value and isinstance(value["$dict"], list):
        result = {}
        for pair in value["$dict"]:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                raise ProtocolError("malformed dict entry")
            result[pair[0]] = _decode(pair[1], tensors, max_depth - 1, meta, named)
        return result
    if "$handle" in value and type(value["$handle"]) is int:
        return Handle(value["$handle"], str(value.get("type", "object"))[:200])
    if "$dtype" in value and isinstance(value["$dtype"], str) and value["$dtype"] in _DTYPES:
        return _DTYPES[value["$dtype"]]
    if "$device" in value:
        return _parse_device(value["$device"], meta)
    raise ProtocolError(f"unexpected value {str(value)[:80]!r}")
