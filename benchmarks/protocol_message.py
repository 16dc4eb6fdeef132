"""Benchmark: the CPU one message costs in the wire format between the grader and the student's process.

    python benchmarks/protocol_message.py [--repeat 2000]

A test reaches the student's code only through calls (``student.call``, a module's forward):
03 makes about 70 a grading, 07 about 440, and each call is two messages, a request and its
reply (:mod:`grader.sandbox.protocol`). This times, in one process, the steps of one request
as ``student.call("split_heads", x, 3)`` sends it, and of its reply: encoding the values,
writing the message, reading and checking it, decoding it. Beside them, the same number of
bytes through the bare socket: what the format itself adds. CPU time, best of 5, so what else
the machine runs changes it little. Nothing here crosses between two processes: the wake-ups
of a real call come on top (docs/performance.md, "One call").
"""

from __future__ import annotations

import argparse
import socket
import time
from collections.abc import Callable

import common  # noqa: F401  (this checkout's grader first on sys.path)
import torch

from grader.sandbox import protocol


def best_us(work: Callable[[], object], repeat: int) -> float:
    """Microseconds of CPU for one ``work()``: the best of 5 runs of ``repeat``."""
    for _ in range(repeat // 10):
        work()
    runs = []
    for _ in range(5):
        started = time.process_time()
        for _ in range(repeat):
            work()
        runs.append((time.process_time() - started) / repeat * 1e6)
    return min(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()

    ours, theirs = socket.socketpair()
    x = torch.randn(2, 5, 12)
    messages = {
        "request": lambda encoder: {"op": "call", "target": "split_heads", "args": encoder.encode((x, 3)),
                                    "kwargs": encoder.encode({})},
        "reply": lambda encoder: {"status": "ok", "value": encoder.encode(x.view(2, 5, 3, 4).transpose(1, 2))},
    }
    print(f"one message, CPU microseconds (best of 5 x {args.repeat}):")
    print(f"{'':10} {'encode':>8} {'write':>8} {'read':>8} {'decode':>8} {'in all':>8} {'bare socket':>12}")
    for kind, make in messages.items():
        encoder = protocol.Encoder()
        header = make(encoder)
        deadline = time.monotonic() + 3600
        protocol.send(ours, header, encoder.tensors, deadline)
        size = len(theirs.recv(1 << 16))
        received: list = []

        def sent_and_read() -> None:
            protocol.send(ours, header, encoder.tensors, deadline)
            received[:] = protocol.recv(theirs, deadline)

        def sent_and_taken() -> None:  # the same write, its bytes taken off the socket unread
            protocol.send(ours, header, encoder.tensors, deadline)
            theirs.recv(size)

        def bare() -> None:
            ours.sendall(b"x" * size)
            theirs.recv(size)

        def whole() -> None:
            sending = protocol.Encoder()
            protocol.send(ours, make(sending), sending.tensors, deadline)
            got, payload = protocol.recv(theirs, deadline)
            protocol.decode(got[value_key], payload)

        value_key = "args" if kind == "request" else "value"
        bare_us, taken_us = best_us(bare, args.repeat), best_us(sent_and_taken, args.repeat)
        read_us = best_us(sent_and_read, args.repeat) - taken_us
        decode_us = best_us(lambda: protocol.decode(received[0][value_key], received[1]), args.repeat)
        print(f"{kind:10} {best_us(lambda: make(protocol.Encoder()), args.repeat):8.1f} {taken_us - bare_us:8.1f} "
              f"{read_us:8.1f} {decode_us:8.1f} {best_us(whole, args.repeat):8.1f} {bare_us:12.1f}")
    ours.close()
    theirs.close()


if __name__ == "__main__":
    main()
