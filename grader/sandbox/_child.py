"""The student's side of the trust boundary: the only module that runs student code.

:func:`run` is entered in a freshly forked process. It confines the process (own session
and process group, resource limits, scratch directory, scrubbed environment and import
path), runs the submission's cells in order, reporting each one, and then serves calls
from the trusted side until the connection closes.

Nothing this process sends is trusted: the parent decodes it strictly, applies its own
timeouts, and kills the whole process group when done. The checks made here exist to
give the student clear messages, not to protect the grader.
"""

from __future__ import annotations

import contextlib
import ctypes
import dis
import fcntl
import gc
import io
import os
import resource
import signal
import socket
import sys
import tempfile
import traceback
import types
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.utils._pytree
from torch.utils._python_dispatch import TorchDispatchMode

from grader.core.cells import exception_message, loading_submission, run_cell
from grader.core.ingest import MAX_SOURCE_BYTES, Cell, Program
from grader.core.jupyter_names import give_jupyter_names
from grader.sandbox import landlock, namespaces, protocol, seccomp
from grader.sandbox.isolation import Isolation
from grader.sandbox.limits import Limits, die_with_parent
from grader.sandbox.protocol import Handle, Status

# The program message: the submission's code, at most MAX_SOURCE_BYTES characters, each of
# which JSON may escape into up to 12 bytes (an astral character as two \u escapes).
PROGRAM_MESSAGE_BYTES = 16 * MAX_SOURCE_BYTES
_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
_TRACEBACK_FRAMES = 8
_HIGH_DESCRIPTOR = 512  # below the usual RLIMIT_NOFILE soft limit of 1024


def run(
    sock: socket.socket,
    output: int,
    limits: Limits,
    scratch: Path,
    device: str,
    hidden_paths: tuple[str, ...],
    isolation: Isolation,
) -> None:
    """Confine this process, receive the program, run it, serve calls. Never returns.

    ``output`` becomes stdout and stderr (a memfd the grader reads). With namespaces, this
    process is PID 1 of its own (see :func:`namespaces.fork_init`). The program comes from
    the trusted side over ``sock``, after confinement: the processes this one was forked
    from never held a submission.
    """
    code = 0
    confined = False
    try:
        sock = _to_high_descriptor(sock)
        _confine(limits, scratch, device, hidden_paths, isolation, output)
        confined = True
        protocol.send(sock, {"event": "started"})  # the program's time limits count from here
        message, _ = protocol.recv(sock, max_header=PROGRAM_MESSAGE_BYTES, max_payload=0)
        program = Program.from_dict(message["program"])
        skip = frozenset(message["skip"])
        stopped = {int(index): frozenset(statements) for index, statements in message["stopped"].items()}
        namespace = _new_namespace(program.kind)
        with loading_submission():
            for index, cell in enumerate(program.cells):
                if index not in skip:
                    _run_cell(sock, index, cell, namespace, limits.cell_timeout_s, module=program.kind == "module",
                              skip=stopped.get(index, frozenset()))
        protocol.send(sock, {"event": "ready", "offset": _output_offset()})
        _Server(sock, namespace).serve()
    except BaseException:  # the connection is gone or the runtime itself failed
        code = 70
        if not confined:  # the grader's own failure (CUDA refused in the sandbox, say): the output says why
            traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _to_high_descriptor(sock: socket.socket) -> socket.socket:
    """Move the connection to a descriptor number far above any inherited one.

    The zygote closed every inherited descriptor, but a Python file object that owned
    one may still be alive; when it is garbage-collected it closes its old number, which
    by then may be reused. Nothing stale owns a number this high.
    """
    high = fcntl.fcntl(sock.fileno(), fcntl.F_DUPFD_CLOEXEC, _HIGH_DESCRIPTOR)
    moved = socket.socket(fileno=high)
    sock.close()
    return moved


def _confine(limits: Limits, scratch: Path, device: str, hidden_paths: tuple[str, ...], isolation: Isolation,
             output: int) -> None:
    os.setsid()  # own session and process group: the parent kills the whole group
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.chdir(scratch)
    _hide_imports(hidden_paths)
    _redirect_output(output, limits.output_bytes)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds))
    torch.set_num_threads(limits.threads)
    # Without namespaces, /tmp and /dev/shm are the machine's, shared with every submission.
    writable: tuple[str, ...] = (str(scratch),)
    if isolation.namespaces:
        # From here on: no network, no other processes in sight, a read-only filesystem with
        # size-capped tmpfs to write in, no capabilities. Whatever the student starts dies with this process.
        writable = namespaces.enter(str(scratch), limits.scratch_bytes, limits.scratch_files, hidden_paths)
        die_with_parent()  # again: its change of uid cleared it
    if device.startswith("cuda"):
        _open_cuda(device, limits)
    env = {key: os.environ[key] for key in _KEPT_ENV if key in os.environ}
    # USER and LOGNAME, which getpass.getuser() reads first (torch names its caches after it): the
    # student, as its own /etc/passwd says with namespaces, never the grader's user.
    env.update(HOME=str(scratch), TMPDIR=str(scratch), USER="student", LOGNAME="student", MPLBACKEND="Agg",
               OMP_NUM_THREADS=str(limits.threads))
    _replace_environment(env)
    tempfile.tempdir = None  # the server's imports cached /tmp (torch._dynamo's): TMPDIR decides again
    if isolation.landlock:
        landlock.restrict(writable)  # from here on, the grader's files cannot be opened
    if isolation.seccomp:
        seccomp.restrict()  # tracing, mounting, BPF, io_uring... fail with EPERM
    if not device.startswith("cuda"):
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))


def _open_cuda(device: str, limits: Limits) -> None:
    """Make this process's CUDA context now: in the process that runs the student's code (CUDA
    does not survive a fork), while the grader's environment
    (CUDA_VISIBLE_DEVICES) still holds, and before Landlock, which would refuse to open the
    driver's device files for writing. What is opened here stays usable after it."""
    # RLIMIT_AS breaks CUDA's large virtual mappings; cap the GPU allocator instead.
    index = torch.cuda._utils._get_device_index(torch.device(device), optional=True)  # "cuda": the current one
    total = torch.cuda.get_device_properties(index).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, limits.memory_bytes / total), index)
    # The context (and the unified-memory device it opens) and cuBLAS's handle: their seconds are
    # the grader's, at the start, never a student call's.
    ones = torch.ones(8, 8, device=device)
    (ones @ ones).sum().item()


def _replace_environment(env: dict[str, str]) -> None:
    """The student's process sees only ``env``. A fork also keeps the grader's environment
    in the block the kernel wrote at the grader's exec (``/proc/self/environ``), which is
    zeroed here, and in freed memory, which cannot be: the grader's environment must hold
    no secret."""
    os.environ.clear()  # also posix.environ (the same dict), and unsetenv for each variable,
    os.environ.update(env)  # so nothing points into the original block any more
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    env_start, env_end = int(fields[47]), int(fields[48])  # fields 50 and 51 of proc_pid_stat(5)
    ctypes.memset(env_start, 0, env_end - env_start)


def _hide_imports(hidden_paths: tuple[str, ...]) -> None:
    """Make the reference unimportable by accident. Not a security boundary on its own:
    code in this process can undo it; the filesystem sandbox is what protects the files."""
    sys.path[:] = [entry for entry in sys.path if entry and not _is_hidden(entry, hidden_paths)]
    names = {os.path.basename(path) for path in hidden_paths if os.path.isfile(os.path.join(path, "__init__.py"))}
    # A submodule is imported only after its package, so where no hidden package is in
    # sys.modules there is nothing to remove. Looking costs nothing; going through all of
    # sys.modules (some 1,600 names after torch) copies the pages of every name: 5-7 ms.
    if any(name in sys.modules for name in names):
        for name in [name for name in sys.modules if name.split(".")[0] in names]:
            del sys.modules[name]
    sys.meta_path.insert(0, _RefuseImports(names))


def _is_hidden(entry: str, hidden_paths: tuple[str, ...]) -> bool:
    resolved = os.path.realpath(entry)
    for path in hidden_paths:
        inside = resolved == path or resolved.startswith(path + os.sep)
        # The checkout that holds the reference package, but never site-packages itself.
        holds = resolved == os.path.dirname(path) and not resolved.endswith("-packages")
        if inside or holds:
            return True
    return False


class _RefuseImports:
    def __init__(self, names: set[str]):
        self._names = names

    def find_spec(self, name: str, path=None, target=None):
        if name.split(".")[0] in self._names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


class _BoundedWriter(io.TextIOBase):
    """Python-level stdout/stderr: keeps at most ``limit`` bytes, drops the rest quietly.

    Output past the limit must not raise in the student's code (a chatty training loop
    is not an error), so it is counted, not written; the report says it was truncated.
    """

    def __init__(self, stream, limit: int):
        self._stream = stream
        self._left = limit

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self._left > 0:
            data = text.encode("utf-8", "replace")[: self._left]
            self._stream.write(data)
            self._left -= len(data)
        return len(text)

    def flush(self) -> None:
        self._stream.flush()


def _redirect_output(output: int, limit: int) -> None:
    stdin = os.open(os.devnull, os.O_RDONLY)  # input() gets EOF instead of waiting forever
    os.dup2(stdin, 0)
    os.close(stdin)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.close(output)
    # One byte over the limit lets the parent tell "exactly full" from "truncated".
    stream = open(1, "wb", buffering=0, closefd=False)
    sys.stdout = sys.stderr = _BoundedWriter(stream, limit + 1)


def _output_offset() -> int:
    """How much has been printed so far, so the parent can skip output it already has."""
    sys.stdout.flush()
    return os.fstat(1).st_size


def _new_namespace(kind: str) -> dict:
    # A notebook runs as __main__, as in Jupyter; a module is imported, so its
    # `if __name__ == "__main__":` block does not run.
    name = "__main__" if kind == "notebook" else "submission"
    module = types.ModuleType(name)
    sys.modules[name] = module
    give_jupyter_names(module.__dict__)
    return module.__dict__


def _run_cell(sock: socket.socket, index: int, cell: Cell, namespace: dict, limit_s: float, module: bool,
              skip: frozenset[int]) -> None:
    protocol.send(sock, {"event": "cell_start", "index": index, "offset": _output_offset()})
    run = run_cell(namespace, cell.label, cell.source, limit_s, module=module, skip=skip)
    if run.stood_in:
        protocol.send(sock, {"event": "cell_stand_ins", "index": index, "packages": run.stood_in})
    if run.later_errors is not None:  # a module that went on after its first error: its end comes next
        protocol.send(sock, {"event": "cell_error", "index": index, "went_on": run.later_errors,
                             **describe_exception(run.errors[0])})
    if run.stopped:
        protocol.send(sock, {"event": "cell_stopped", "index": index, "statements": run.stopped})
    elif run.errors and run.later_errors is None:
        protocol.send(sock, {"event": "cell_error", "index": index, **describe_exception(run.errors[0])})
    else:
        protocol.send(sock, {"event": "cell_done", "index": index})


def describe_exception(exc: BaseException) -> dict:
    """Type, message and the student's part of the traceback (not this runtime's frames), and
    whether it is an unfinished part's stub, raised in which function of the submission
    (:func:`_raising_function`)."""
    # Student code is compiled under labels ("mha.py", "cell 4"); library frames have paths.
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if not os.path.isabs(frame.filename)]
    message = exception_message(exc)
    return {
        "type": type(exc).__name__,
        "message": message[:2000],
        # Frames without their lines: the grader adds them from its own copy (errors.with_source_lines).
        "traceback": "".join(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}\n'
                             for frame in frames[-_TRACEBACK_FRAMES:])[:4000],
        "memory": isinstance(exc, MemoryError) or "can't allocate memory" in message
        or isinstance(exc, torch.OutOfMemoryError),
        # A stub's: the function whose raise it was (None: not a stub).
        "raised_in": _raising_function(exc) if isinstance(exc, NotImplementedError) else None,
    }


_RAISES = frozenset({dis.opmap["RAISE_VARARGS"], dis.opmap["RERAISE"]})


def _raising_function(exc: BaseException) -> str | None:
    """The qualified name (``Head.forward``) of the submission's function whose ``raise``
    statement raised ``exc`` (a stub's NotImplementedError, whatever its message says), or None
    where torch raised it under a call of the submission (an operator with no kernel for a dtype,
    "addmm_impl_cpu_" not implemented for 'Long'; nn.Module's missing forward)."""
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    own = not os.path.isabs(code.co_filename) and not code.co_filename.startswith("<")  # not torch's, not a helper's
    raised = own and 0 <= tb.tb_lasti < len(code.co_code) and code.co_code[tb.tb_lasti] in _RAISES
    return code.co_qualname if raised else None


class _Server:
    """Answers the trusted side's requests; objects the student creates stay here as handles."""

    def __init__(self, sock: socket.socket, namespace: dict):
        self._sock = sock
        self._namespace = namespace
        self._objects: dict[int, object] = {}
        self._ids: dict[int, int] = {}  # id(obj) -> handle id, so `.to()` returns the same handle

    def serve(self) -> None:
        while True:
            header, tensors = protocol.recv(self._sock)
            reply, reply_tensors = self._answer(header, tensors)
            sys.stdout.flush()
            protocol.send(self._sock, reply, reply_tensors)

    def _answer(self, header: dict, tensors: dict) -> tuple[dict, dict]:
        try:
            op = getattr(self, f"_op_{header.get('op')}", None)
            if op is None:
                return {"status": Status.BAD_REQUEST, "message": f"unknown op {header.get('op')!r}"}, {}
            encoder = protocol.Encoder(to_handle=self._handle_for)
            # Below the recording, as every call's recording is the mode on top.
            with _on_the_inputs_device() if header.get("meta") is True else contextlib.nullcontext():
                if header.get("record") is not True:
                    return {"status": Status.OK, "value": encoder.encode(op(header, tensors))}, encoder.tensors
                with _recorder_class()(self._sock, self._known_tensors(tensors)) as recorder:
                    value = op(header, tensors)
                    unrecorded = recorder.unrecorded(value["output"] if header.get("op") == "backward" else value)
            return {"status": Status.OK, "value": encoder.encode(value), "unrecorded": unrecorded}, encoder.tensors
        except _NotFound as exc:
            return {"status": Status.NOT_FOUND, "name": str(exc)}, {}
        except protocol.MessageTooLarge as exc:  # the reply: the trusted side would refuse it
            return {"status": Status.BAD_REQUEST, "message": str(exc)}, {}
        except _StepFailed as exc:
            return {"status": Status.EXCEPTION, **describe_exception(exc.__cause__), "step": exc.step}, {}
        except BaseException as exc:
            return {"status": Status.EXCEPTION, **describe_exception(exc)}, {}

    def _known_tensors(self, received: dict) -> list[torch.Tensor]:
        """The tensors a call may use without an operator making them: what the grader sent,
        and what existed before the call, reachable from the submission's names and the
        objects the grader holds (constants, caches, parameters and buffers)."""
        return [*received.values(), *_reachable_tensors([*self._namespace.values(), *self._objects.values()],
                                                        self._namespace.get("__name__"))]

    def _handle_for(self, obj: object) -> Handle:
        handle_id = self._ids.get(id(obj))
        if handle_id is None:
            handle_id = len(self._objects) + 1
            self._objects[handle_id] = obj
            self._ids[id(obj)] = handle_id
        return Handle(handle_id, type(obj).__name__)

    def _resolve(self, header: dict, tensors: dict):
        # Meta tensors and the meta device: the grader's check that code follows its input's device.
        decoded = protocol.decode(header.get("args", {"$tuple": []}), tensors, meta=True)
        args = tuple(self._objects[item.id] if isinstance(item, Handle) else item for item in decoded)
        kwargs = protocol.decode(header.get("kwargs", {"$dict": []}), tensors, meta=True)
        kwargs = {key: self._objects[item.id] if isinstance(item, Handle) else item for key, item in kwargs.items()}
        target = header["target"]
        if isinstance(target, str):
            if target not in self._namespace:
                raise _NotFound(target)
            return self._namespace[target], args, kwargs
        obj = self._objects[target["handle"]]
        if "parameters" in header:  # sent with the call, to load first (RemoteObject.holding)
            with _step("load"):
                _load_parameters(obj, protocol.decode(header["parameters"], tensors))
        return getattr(obj, target["method"]), args, kwargs

    def _op_call(self, header: dict, tensors: dict):
        function, args, kwargs = self._resolve(header, tensors)
        return function(*args, **kwargs)

    def _op_backward(self, header: dict, tensors: dict):
        """Call, then backpropagate ``grad_output``; return output, input and parameter grads.
        With autograd on, whatever an earlier call left it at (``torch.set_grad_enabled(False)``
        in a generate): the gradients asked for are this call's."""
        function, args, kwargs = self._resolve(header, tensors)
        with torch.enable_grad():
            output = function(*args, **kwargs)
            grad_output = protocol.decode(header["grad_output"], tensors)
            torch.autograd.backward(output, grad_output)
        owner = getattr(function, "__self__", None)
        params = dict(owner.named_parameters()) if isinstance(owner, torch.nn.Module) else {}
        return {
            "output": output,
            "input_grads": tuple(arg.grad if isinstance(arg, torch.Tensor) else None for arg in args),
            "param_grads": {name: param.grad for name, param in params.items() if param.grad is not None},
        }

    def _op_define(self, header: dict, tensors: dict):
        """Run grader-provided helper source (a stock model, say) in a module of its own."""
        module = types.ModuleType(f"grader_helper_{header['name']}")
        exec(compile(header["source"], f"<grader helper {header['name']}>", "exec"), module.__dict__)
        return module

    def _op_stand_in(self, header: dict, tensors: dict):
        """Put a grader helper module's definitions in place of the submission's own ``names``
        (stock parts, for telling whether a part fails because of a part it calls)."""
        helper = self._objects[header["handle"]]
        names = [name for name in header["names"] if isinstance(name, str) and name in vars(helper)]
        for name in names:
            self._namespace[name] = vars(helper)[name]
        return names

    def _op_getattr(self, header: dict, tensors: dict):
        return getattr(self._objects[header["handle"]], header["name"])

    def _op_build(self, header: dict, tensors: dict):
        """How a test makes a part, in one request: the class called, the object moved to
        ``device`` and inspected, and given ``parameters`` when its own are exactly theirs by
        name and shape (else the trusted side decides, from the inspection, what to do before it
        loads them itself). A step that raises is reported as that step's."""
        with _step("new"):
            obj = self._op_call(header, tensors)
        with _step("to"):
            obj.to(protocol.decode(header["device"], tensors))
        with _step("inspect"):
            inspection = _inspection(obj)
        parameters = protocol.decode(header.get("parameters", {"$dict": []}), tensors)
        fits = bool(parameters) and inspection["module"] and not inspection["uninitialized"] \
            and inspection["parameters"] == {name: list(p.shape) for name, p in parameters.items()}
        if fits:
            with _step("load"):
                _load_parameters(obj, parameters)
        return {"object": obj, "inspection": inspection, "loaded": fits}

    def _op_inspect(self, header: dict, tensors: dict):
        return _inspection(self._objects[header["handle"]])

    def _op_load_parameters(self, header: dict, tensors: dict):
        _load_parameters(self._objects[header["handle"]], protocol.decode(header["parameters"], tensors))


def _inspection(obj: object) -> dict:
    if not isinstance(obj, torch.nn.Module):
        return {"module": False}
    # A lazy module's (nn.LazyLinear) parameters have no shape until its first forward
    # or load_state_dict: named apart, so the grader can materialize it first.
    # (A parameter and a buffer cannot share a name.)
    tensors = [*obj.named_parameters(), *obj.named_buffers()]
    lazy = {name for name, t in tensors if isinstance(t, torch.nn.parameter.UninitializedTensorMixin)}
    return {
        "module": True,
        "parameters": {name: list(p.shape) for name, p in obj.named_parameters() if name not in lazy},
        "buffers": {name: list(b.shape) for name, b in obj.named_buffers() if name not in lazy},
        "uninitialized": sorted(lazy),
        "training": obj.training,
    }


def _load_parameters(module: torch.nn.Module, parameters: dict) -> None:
    """Copy parameters into the module, keeping its own buffers; strict about names."""
    state = module.state_dict()
    state.update(parameters)
    module.load_state_dict(state, strict=True)


class _StepFailed(Exception):
    """A step of a request that takes several (``build``) raised: its exception is the cause."""

    def __init__(self, step: str):
        super().__init__(step)
        self.step = step


@contextlib.contextmanager
def _step(name: str) -> Iterator[None]:
    try:
        yield
    except _NotFound:
        raise
    except BaseException as exc:
        raise _StepFailed(name) from exc


class _NotFound(Exception):
    pass


class _OpRecorder(TorchDispatchMode):
    """Records the operators that run below every Python-level route to them (aliases,
    ``torch.ops``, another built-in with one inside: a cross-entropy runs ``_log_softmax``).

    Each operator is reported to the grader each time it runs, whatever it is (the grader,
    not this process, decides which ones matter), so nothing the student's code does
    afterwards takes it back, and no record kept here can be edited to silence it. The code
    can switch the recording off beforehand (it runs in this process); what suggests it did
    goes to the grader at the end (:meth:`unrecorded`), as evidence for the instructor, never
    as a verdict: a tensor that entered the computation from outside it, one changed in place while nobody recorded (a version counter that moved,
    from another thread too), a tensor subclass that dispatches on its own, a recording no
    longer in force. Every tensor the call makes stays alive until it returns (an id must not
    be reused): watch small calls."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # else torch wraps __torch_dispatch__ in a torch._dynamo guard: 1.6 s of imports per child

    def __init__(self, sock: socket.socket, known: list[torch.Tensor]):
        super().__init__()
        self._sock = sock
        # id -> (tensor, its version, whether the last recorded write may still count once more)
        self._versions = {id(tensor): (tensor, tensor._version, False) for tensor in known}
        self._evidence: dict[str, None] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name
        protocol.send(self._sock, {"event": "operator", "name": name})  # each time: no state here to undo
        kwargs = kwargs or {}
        for tensor in _tensors((args, kwargs)):
            self._check(name, tensor)
        if name == "aten::set_" and len(args) > 1:  # its writes move a counter of its own, not the owner's
            self._note(f"a tensor of shape {tuple(args[0].shape)} was pointed at another tensor's memory (set_)")
        out = func(*args, **kwargs)
        # Autograd counts a write once this returns (outside inference mode), so a written
        # argument, and every view of its base (they share its version counter), may be one on;
        # not another tensor over the same memory (`set_`), whose counter is its own.
        written = {id(_base(tensor)) for tensor in _written(func, args, kwargs)} if func._schema.is_mutable else set()
        if written:
            self._versions = {key: (tensor, tensor._version, id(_base(tensor)) in written)
                              for key, (tensor, _, _) in self._versions.items()}
        for tensor in _tensors(out):
            self._versions[id(tensor)] = (tensor, tensor._version, id(_base(tensor)) in written)
        return out

    def _check(self, name: str, tensor: torch.Tensor) -> None:
        shape = tuple(tensor.shape)
        if type(tensor) not in (torch.Tensor, torch.nn.Parameter):
            self._note(f"{name} received a {type(tensor).__name__}, a tensor subclass that runs operators of its own")
        entry = self._versions.get(id(tensor))
        if entry is None and name == "aten::lift_fresh" and tensor.numel() > 1:
            self._note(f"a tensor of shape {shape} was built from Python or numpy data (torch.tensor, as_tensor)")
        elif entry is None and tensor.numel() > 1:
            self._note(f"{name} received a tensor of shape {shape} that no recorded operator made")
        elif entry is not None and not _same_version(entry, tensor):
            self._note(f"{name} received a tensor of shape {shape} changed in place by no recorded operator")

    def _note(self, evidence: str) -> None:
        self._evidence.setdefault(evidence, None)

    def __exit__(self, *exc_info):
        try:
            super().__exit__(*exc_info)
        except Exception:  # noqa: BLE001 - the code emptied the mode stack itself: unrecorded() said so
            pass

    def unrecorded(self, value) -> list[str]:
        """What suggests that operators ran unrecorded, as evidence for the instructor."""
        for tensor in _tensors(value):
            entry = self._versions.get(id(tensor))
            if entry is None:
                self._note(f"the returned tensor of shape {tuple(tensor.shape)} was made by no recorded operator")
            elif not _same_version(entry, tensor):
                self._note(f"the returned tensor of shape {tuple(tensor.shape)} was changed in place by no "
                           "recorded operator")
        current = torch.utils._python_dispatch._get_current_dispatch_mode()
        if current is not self:
            self._note(f"the recording was replaced by {type(current).__name__} when the call returned")
        if torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python):
            self._note("the dispatch key the recording listens on was switched off when the call returned")
        if type(self).__dict__.get("__torch_dispatch__") is not _RECORD.get(type(self)):
            self._note("the recording's own code was replaced")
        return list(self._evidence)[:8]


class _OnTheInputsDevice(TorchDispatchMode):
    """A call the grader makes on the ``meta`` device (its stand-in for a GPU, which it may not
    have) fails where a GPU would: an operator that takes a tensor of another device, one the
    code made on a fixed device (``torch.arange(T)`` for positions), raises as CUDA does. Meta
    kernels check that themselves for elementwise operators; these are those that do not.

    A meta tensor moved to another device (``.cpu()``, ``.to("cpu")``, a copy into a CPU
    tensor) holds no data to move: it arrives as zeros of its shape, so the code goes on as on a
    GPU, and what it does with a tensor on the wrong device shows (a mismatch, an output on
    the CPU). Values read that way (``.tolist()``) are zeros, which the grader allows for: an
    output on the input's device of another shape is run again on real data."""

    STRICT = frozenset({"aten::embedding", "aten::index_select", "aten::mm", "aten::bmm", "aten::addmm",
                        "aten::baddbmm", "aten::addbmm", "aten::cat", "aten::_softmax", "aten::_log_softmax",
                        "aten::native_layer_norm", "aten::masked_fill_", "aten::gather", "aten::scatter",
                        "aten::scatter_"})

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as for the recorder: no torch._dynamo imports for a mode that only checks devices

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        if name == "aten::_to_copy" and args[0].is_meta and (kwargs.get("device") or args[0].device).type != "meta":
            return torch.zeros(args[0].shape, dtype=kwargs.get("dtype") or args[0].dtype, device=kwargs["device"])
        if name == "aten::copy_" and args[1].is_meta and not args[0].is_meta:
            return args[0].zero_()
        if name in self.STRICT:
            devices = {str(tensor.device) for tensor in _tensors((args, kwargs)) if tensor.dim() > 0}
            if len(devices) > 1:
                raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                                   f"{' and '.join(sorted(devices))}! (in {func._schema.name})")
        return func(*args, **kwargs)


class _CompiledCodeOnTheInputsDevice(_OnTheInputsDevice):
    """As :class:`_CompiledCodeRecorder` is to the recorder."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return True

    __torch_dispatch__ = _OnTheInputsDevice.__torch_dispatch__


def _on_the_inputs_device() -> _OnTheInputsDevice:
    return (_CompiledCodeOnTheInputsDevice if "torch._dynamo" in sys.modules else _OnTheInputsDevice)()


class _CompiledCodeRecorder(_OpRecorder):
    """The recorder where the submission uses torch.compile: torch._dynamo, already imported,
    must skip the recorder's frames (it would read this file, which the sandbox hides)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return True

    __torch_dispatch__ = _OpRecorder.__torch_dispatch__  # defined here, so torch wraps it for dynamo


def _recorder_class() -> type[_OpRecorder]:
    return _CompiledCodeRecorder if "torch._dynamo" in sys.modules else _OpRecorder


# Each recorder's own code, as torch left it: what a patched recorder no longer has.
_RECORD = {recorder: recorder.__dict__["__torch_dispatch__"] for recorder in (_OpRecorder, _CompiledCodeRecorder)}


def _reachable_tensors(roots: list, submission: str | None, depth: int = 6, most: int = 20_000) -> list[torch.Tensor]:
    """Tensors held by ``roots``, through containers, modules, closures and the objects, classes
    and functions of the module ``submission`` (not through what it imports: torch alone holds
    thousands of objects), in a bounded walk. It follows references as the garbage collector
    sees them, so no code of the submission's (a property, an overridden ``parameters()``) runs
    outside the recording while it looks."""
    found: list[torch.Tensor] = []
    seen: set[int] = set()
    layer = list(roots)
    for _ in range(depth):
        following = []
        for obj in layer:
            if id(obj) in seen or len(seen) >= most:
                continue
            seen.add(id(obj))
            kind = type(obj)
            if issubclass(kind, torch.Tensor):
                found.append(obj)
            elif kind in _CONTAINERS or issubclass(kind, torch.nn.Module) or _module_of(kind) == submission \
                    or (kind is type and _module_of(obj) == submission) \
                    or (kind is types.FunctionType and obj.__module__ == submission):
                following += gc.get_referents(obj)
        layer = following
    return found


_CONTAINERS = (dict, list, tuple, set, frozenset, types.CellType)
_TYPE_MODULE = type.__dict__["__module__"]


def _module_of(cls: type) -> object:
    """``cls.__module__`` read by type's own getter: no metaclass of the submission's runs."""
    try:
        return _TYPE_MODULE.__get__(cls, type)
    except Exception:  # noqa: BLE001 - a class that has none
        return None


def _same_version(entry: tuple[torch.Tensor, int, bool], tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is as the recorder last saw it (``entry``)."""
    _, version, may_count_once_more = entry
    return tensor._version == version or (may_count_once_more and tensor._version == version + 1)


def _base(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor whose version counter ``tensor`` shares: its base if it is a view."""
    return tensor._base if tensor._base is not None else tensor


def _written(func, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors an operator writes to, as its schema says (``self`` of ``add_``, ``out=``)."""
    arguments = func._schema.arguments
    given = [*zip(arguments, args), *((argument, kwargs[argument.name]) for argument in arguments
                                       if argument.kwarg_only and argument.name in kwargs)]
    return [tensor for argument, value in given if argument.alias_info is not None and argument.alias_info.is_write
            for tensor in _tensors(value)]


def _tensors(tree) -> list[torch.Tensor]:
    return [leaf for leaf in torch.utils._pytree.tree_leaves(tree) if isinstance(leaf, torch.Tensor)]
