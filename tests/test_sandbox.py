"""The student's process: limits, isolation and recovery, driven through StudentSession."""

from __future__ import annotations

import collections
import ctypes
import importlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest
import torch

import reference
import reference.multihead
from grader.core import cells
from grader.core.ingest import Cell, Program
from grader.engine import plugin
from grader.sandbox import cgroups, child_process, errors, isolation, landlock, namespaces
from grader.sandbox.errors import (
    SOURCE_LINE_CHARS,
    StudentCrashed,
    StudentException,
    StudentNotFound,
    StudentTimeout,
    with_source_lines,
)
from grader.sandbox.limits import Limits
from grader.sandbox.session import StudentSession
from grader.sandbox.workspace import Workspace
from grader.sandbox.zygote import SERVER_ENV, Child, Zygote, ZygoteServer
from grader.suite.fixtures import SEED_HELPER
from tests import conftest
from tests.conftest import alive, descendants

# Time limits far above what any call here needs, so that a loaded machine fails no test;
# the tests of the limits themselves hang on purpose, under HANGS.
LIMITS = Limits(call_timeout_s=30.0, cell_timeout_s=30.0, memory_bytes=1 * 2**30, output_bytes=1000)
HANGS = replace(LIMITS, call_timeout_s=2.0, cell_timeout_s=1.0)


@pytest.fixture
def session_for():
    """session_for(*cell_sources, kind="notebook", sandbox="basic" or layers=Isolation(...),
    solution=the reference's module, preload=modules the zygote server imports) -> a StudentSession, one submission's; all cleaned up
    after. ``session_for.workspaces``: each session's :class:`Workspace` (its scratch and
    cgroup), in order."""
    opened = []

    def make(*sources: str, kind: str = "notebook", limits: Limits = LIMITS, sandbox: str = "basic",
             layers: isolation.Isolation | None = None, solution: ModuleType | None = None,
             preload: tuple[str, ...] = ()) -> StudentSession:
        program = Program(kind, tuple(Cell(source, f"cell {i + 1}") for i, source in enumerate(sources)))
        layers = layers or isolation.choose(sandbox, reference.PACKAGE_DIR)
        workspace = Workspace.open(layers, limits, preload, "cpu", (str(reference.PACKAGE_DIR),))
        zygote = Zygote.open(workspace.control, workspace.config)
        session = StudentSession(zygote, program, limits, solution)
        opened.append((session, zygote, workspace))
        make.workspaces.append(workspace)
        return session

    make.workspaces = []
    yield make
    for session, zygote, workspace in opened:
        session.close()
        zygote.stop()
        workspace.release()


def test_call_returns_tensors_and_keeps_objects_in_the_child(session_for):
    session = session_for("import torch\ndef double(x):\n    return 2 * x\nmodel = torch.nn.Linear(3, 2)\n"
                          "def get():\n    return model\n")
    assert torch.equal(session.call("double", torch.ones(2)), torch.full((2,), 2.0))
    model = session.call("get")
    assert model.inspect()["parameters"] == {"weight": [2, 3], "bias": [2]}
    assert model(torch.zeros(1, 3)).shape == (1, 2)


BUILDS = """import torch
from torch import nn
class Contract(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)
    def forward(self, x):
        return self.proj(x)
class Sequential(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, d))
    def forward(self, x):
        return self.net(x)
class RaisesInInit(nn.Module):
    def __init__(self, d):
        raise ValueError("d must be even")
class RaisesInTo(Contract):
    def to(self, *args, **kwargs):
        raise RuntimeError("no moving")
class RaisesOnLoad(Contract):
    def _load_from_state_dict(self, *args, **kwargs):
        raise KeyError("refused")
"""


def _counting_requests(session: StudentSession) -> list[str]:
    """The labels of the requests ``session`` sends from now on."""
    labels: list[str] = []
    exchange = session._process.exchange

    def counted(header, tensors, label, limit):
        labels.append(label)
        return exchange(header, tensors, label, limit)

    session._process.exchange = counted
    return labels


def test_a_part_is_built_moved_inspected_and_loaded_in_one_request(session_for):
    session = session_for(BUILDS, kind="module")
    reference = torch.nn.Linear(4, 4)
    parameters = {f"proj.{name}": p.detach() for name, p in reference.named_parameters()}
    requests = _counting_requests(session)
    built = session.build("Contract", (4,), {}, device=torch.device("cpu"), parameters=parameters)
    assert requests == ["Contract"] and built.loaded
    assert built.inspection["parameters"] == {"proj.weight": [4, 4], "proj.bias": [4]}
    x = torch.randn(2, 4)
    assert torch.allclose(built.module(x), reference(x))
    assert built.module.built == ("Contract", (4,), {})

    # Other names: built and inspected, not loaded: what to do is the caller's.
    other = session.build("Sequential", (4,), {}, device=torch.device("cpu"), parameters=parameters)
    assert not other.loaded and other.inspection["parameters"] == {"net.0.weight": [4, 4], "net.0.bias": [4]}
    assert not torch.allclose(other.module(x), reference(x))
    with pytest.raises(StudentException, match="Unexpected key"):  # new_like loads them itself, strictly
        session.new_like(torch.nn.Sequential(collections.OrderedDict(proj=reference)), "Sequential", 4)


@pytest.mark.parametrize(("class_name", "label", "type_name"), [
    ("RaisesInInit", "RaisesInInit", "ValueError"),
    ("RaisesInTo", "RaisesInTo.to", "RuntimeError"),
    ("RaisesOnLoad", "RaisesOnLoad.load_state_dict", "KeyError"),
])
def test_a_step_of_a_build_that_raises_is_reported_as_that_steps_call(session_for, class_name, label, type_name):
    session = session_for(BUILDS, kind="module")
    parameters = {"proj.weight": torch.zeros(4, 4), "proj.bias": torch.zeros(4)}
    with pytest.raises(StudentException) as info:
        session.build(class_name, (4,), {}, device=torch.device("cpu"), parameters=parameters)
    assert (info.value.target, info.value.type_name) == (label, type_name)
    with pytest.raises(StudentNotFound):
        session.build("Missing", (4,), {}, device=torch.device("cpu"), parameters=parameters)


def test_a_build_on_the_meta_device_moves_the_module_under_the_meta_checks(session_for):
    session = session_for(BUILDS, kind="module")
    requests = _counting_requests(session)
    built = session.build("Contract", (4,), {}, device=torch.device("meta"))
    # The constructor runs as ever, then the move goes under the meta device's checks.
    assert requests == ["Contract", "Contract.to", "Contract"] and not built.loaded
    assert built.inspection["parameters"] == {"proj.weight": [4, 4], "proj.bias": [4]}


def test_parameters_held_go_with_the_modules_next_call(session_for):
    session = session_for(BUILDS, kind="module")
    module = session.new("Contract", 4)
    reference, x = torch.nn.Linear(4, 4), torch.randn(2, 4)
    parameters = {f"proj.{name}": p.detach() for name, p in reference.named_parameters()}
    requests = _counting_requests(session)
    with module.holding(parameters):
        assert torch.allclose(module(x), reference(x))
    assert requests == ["Contract.forward"]
    assert torch.allclose(module(x), reference(x))  # and it keeps them

    zeros = {name: torch.zeros_like(p) for name, p in parameters.items()}
    with module.holding(zeros):  # no call in the block: loaded at its end
        pass
    assert requests[-1] == "Contract.load_state_dict" and torch.equal(module(x), torch.zeros(2, 4))
    with pytest.raises(StudentException) as info, module.holding({**parameters, "W_q.weight": torch.zeros(4, 4)}):
        module(x)  # strict: a name it does not have; the load raises where the call is
    assert info.value.target == "Contract.load_state_dict" and "Unexpected key" in info.value.message
    refusing = session.new("RaisesOnLoad", 4)
    with pytest.raises(StudentException) as info, refusing.holding(parameters):
        refusing(x)
    assert (info.value.target, info.value.type_name) == ("RaisesOnLoad.load_state_dict", "KeyError")


def test_parameters_held_load_apart_from_a_call_under_the_meta_checks_or_recorded(session_for):
    session = session_for(BUILDS, kind="module")
    module = session.new("Contract", 4)
    parameters = {"proj.weight": torch.eye(4), "proj.bias": torch.zeros(4)}
    requests = _counting_requests(session)
    with module.holding(parameters), session.watching({"aten::addmm"}) as seen:
        module(torch.ones(1, 4))
    assert requests == ["Contract.load_state_dict", "Contract.forward"] and seen == ["aten::addmm"]
    with module.holding(parameters):
        module.method("to", torch.device("meta"))
    assert requests[2:] == ["Contract.load_state_dict", "Contract.to"]


def test_exceptions_keep_type_message_and_student_frames_only(session_for):
    session = session_for("def bad():\n    raise ValueError('D % H != 0')\n")
    with pytest.raises(StudentException) as info:
        session.call("bad")
    assert (info.value.type_name, info.value.message) == ("ValueError", "D % H != 0")
    assert "cell 1" in info.value.traceback and "_child.py" not in info.value.traceback
    # Each frame shows its line of code, read from the grader's copy of the program.
    assert info.value.traceback.endswith('  File "cell 1", line 2, in bad\n    raise ValueError(\'D % H != 0\')\n')


def test_traceback_lines_are_bounded_and_only_the_programs_own():
    program = Program("module", (Cell("x = 1\n" + "y = '" + "a" * 10_000 + "'\n", "mha.py"),))
    traceback = ('  File "mha.py", line 2, in f\n  File "mha.py", line 9, in g\n'
                 '  File "other.py", line 1, in h\n')
    shown = with_source_lines(traceback, program).splitlines()
    assert shown[0] == '  File "mha.py", line 2, in f' and len(shown[1]) <= 4 + SOURCE_LINE_CHARS
    assert shown[1].startswith("    y = 'aaa") and "more characters cut" in shown[1]
    assert shown[2:] == ['  File "mha.py", line 9, in g', '  File "other.py", line 1, in h']


STUBS_AND_TORCHS_OWN = """import torch
def stub(x):
    raise NotImplementedError("split_heads: see the README")
def todo():
    raise NotImplementedError
def via_a_helper(x):
    return todo()
def integers_into_softmax(x):
    return torch.arange(4).softmax(-1)
class NoForward(torch.nn.Module):
    def foward(self, x):
        return x
def missing_forward(x):
    return NoForward()(x)
class Head(torch.nn.Module):
    def forward(self, x):
        raise NotImplementedError("TODO: implement the attention")
def unfinished_method(x):
    return Head()(x)
"""


@pytest.mark.parametrize("name, stub, owner", [
    ("stub", True, "stub"), ("via_a_helper", True, "todo"), ("unfinished_method", True, "Head"),
    ("integers_into_softmax", False, None), ("missing_forward", False, None)])
def test_a_stub_is_a_not_implemented_error_the_code_raises_itself_not_one_torch_raises(session_for, name, stub,
                                                                                        owner):
    # And its owner is the class or function whose raise it was, whatever the message says.
    session = session_for(STUBS_AND_TORCHS_OWN)
    with pytest.raises(StudentException) as info:
        session.call(name, torch.ones(2))
    assert (info.value.type_name, info.value.stub, info.value.stub_owner) == ("NotImplementedError", stub, owner)


def test_undefined_name_is_not_found(session_for):
    with pytest.raises(StudentNotFound):
        session_for("x = 1\n").call("split_heads")


def test_a_preloaded_child_runs_no_student_code_before_it_is_asked_and_the_wait_is_not_the_students(session_for):
    # A budget shorter than the suite's own wait before its first request: that wait is the grader's.
    session = session_for("import time\nloaded_at = time.monotonic()\ndef loaded():\n    return loaded_at\n",
                          kind="module", limits=replace(LIMITS, student_time_s=3.0))
    session.preload()
    time.sleep(3.5)  # the suite getting its first test ready
    asked_at = time.monotonic()
    assert session.call("loaded") >= asked_at  # the program ran once asked, not while nobody watched
    assert session.call("loaded") == session.call("loaded")  # one child served every request


def test_a_top_level_gets_its_cell_limit_however_long_the_grader_takes_to_ask(session_for):
    # The grader's own work before its first request (reading a slow source, say) buys no time.
    busy = "import time\nstart = time.monotonic()\nwhile time.monotonic() - start < 3:\n    pass\n"
    session = session_for(busy, "def fast():\n    return 1\n", limits=replace(HANGS, load_timeout_s=30.0))
    session.preload()
    time.sleep(4)
    assert session.call("fast") == 1
    assert session.notes == [cells.stopped("cell 1", HANGS.cell_timeout_s)]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine whose sandbox cannot open CUDA")
def test_a_child_that_ends_before_it_starts_is_the_graders_failure_not_the_students():
    # Before the child says it started, only the grader's code ran in it: an exhausted machine
    # (no open file left for the sandbox's last steps) or CUDA refused, as here.
    workspace = Workspace.open(isolation.choose("basic", reference.PACKAGE_DIR), LIMITS, (), "cuda",
                               (str(reference.PACKAGE_DIR),))
    zygote = Zygote.open(workspace.control, workspace.config)
    session = StudentSession(zygote, Program("module", (Cell("def f():\n    return 1\n", "m"),)), LIMITS, None)
    try:
        with pytest.raises(child_process.ChildStartFailed, match="before any of the submission's code ran"):
            session.call("f")
        assert plugin.classify(child_process.ChildStartFailed("x")).internal  # a grader error, regraded
        assert not session.notes  # nothing said of the submission's code
    finally:
        session.close()
        zygote.stop()
        workspace.release()


def test_a_preloaded_child_has_its_whole_start_up_time_from_when_it_is_asked(session_for, monkeypatch):
    monkeypatch.setattr(child_process, "STARTUP_TIMEOUT_S", 1.0)
    session = session_for("def fast():\n    return 1\n")
    session.preload()
    time.sleep(1.5)  # past the start-up limit, counted from the spawn
    assert session.call("fast") == 1


def test_a_cell_that_hangs_in_a_preloaded_child_is_stopped_as_in_any_other(session_for):
    session = session_for("defined = 1\nwhile True:\n    pass\n", "def fast():\n    return defined\n", limits=HANGS)
    session.preload()
    assert session.call("fast") == 1  # what the cell defined before its limit stays
    assert session.notes == [cells.stopped("cell 1", HANGS.cell_timeout_s)]


def test_a_cell_that_will_not_stop_at_its_limit_is_skipped_a_grace_later(session_for):
    deaf = "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass\n"
    started = time.monotonic()
    session = session_for(deaf, "def fast():\n    return 1\n", limits=HANGS)
    assert session.call("fast") == 1
    assert session.notes == [cells.skipped("cell 1", cells.would_not_stop(HANGS.cell_timeout_s))]
    assert time.monotonic() - started >= HANGS.cell_timeout_s + child_process.CELL_STOP_GRACE_S


def test_closing_ends_a_child_that_is_still_loading(session_for):
    session = session_for("import time\ntime.sleep(60)\n")
    before = set(descendants(os.getpid()))
    session.preload()
    deadline = time.monotonic() + 30
    while not (started := set(descendants(os.getpid())) - before) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert started, "preload started no process"
    session.close()
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(alive(pid) for pid in started)


def test_the_seed_helper_makes_the_students_dropout_repeat(session_for):
    session = session_for("import torch\ndef drop():\n    return torch.nn.functional.dropout(torch.ones(64), 0.5)\n")
    seed = session.define("seed", SEED_HELPER)
    seed.method("seed", 3)
    first = session.call("drop")
    assert not torch.equal(session.call("drop"), first)  # unseeded, the units dropped differ
    seed.method("seed", 3)
    assert torch.equal(session.call("drop"), first)


def test_sleeping_call_times_out_and_a_fresh_child_serves_the_next(session_for):
    session = session_for("import time\ndef slow():\n    time.sleep(60)\ndef fast():\n    return 1\n", limits=HANGS)
    started = time.monotonic()
    with pytest.raises(StudentTimeout, match="time limit of 2 s"):
        session.call("slow")
    assert time.monotonic() - started < 30  # killed, not waited for
    assert session.call("fast") == 1


def test_a_reply_the_trusted_side_stops_reading_part_way_ends_its_child(session_for, monkeypatch):
    # The trusted side's own bound (CPU, memory) can stop it inside a reply: the rest of that
    # reply must not be read as the next request's.
    session = session_for("def one():\n    return 1\ndef two():\n    return 2\n")
    assert session.call("one") == 1
    real_recv = child_process.protocol.recv
    stopped = []

    def stop_once(*args, **kwargs):
        if not stopped:
            stopped.append(True)
            raise MemoryError("the trusted side's bound")
        return real_recv(*args, **kwargs)

    monkeypatch.setattr(child_process.protocol, "recv", stop_once)
    generation = session._process.generation
    with pytest.raises(MemoryError):
        session.call("one")
    assert session.call("two") == 2
    assert session._process.generation == generation + 1  # a fresh child answered


def test_memory_limit_stops_a_huge_allocation_with_a_clear_message(session_for):
    session = session_for("import torch\ndef hog():\n    return torch.empty(4 * 2**30, dtype=torch.uint8).fill_(1)\n"
                          "def fine():\n    return 3\n")
    with pytest.raises(StudentException, match="memory limit of 1 GiB exceeded"):
        session.call("hog")
    assert session.call("fine") == 3


def test_output_is_captured_once_and_truncated(session_for):
    session = session_for("print('loading')\ndef chatty():\n    print('x' * 5000)\n    return 0\n",
                          "import os\nos._exit(1)\n")
    session.call("chatty")
    session.close()
    output = session.output()
    assert output.count("loading") == 1
    assert output.startswith("loading\n") and "[output truncated after 1e+03 B]" in output


def test_no_process_outlives_the_session(session_for):
    session = session_for("import subprocess, os\n"
                          "p = subprocess.Popen(['sleep', '300'])\n"
                          "def pids():\n    return (os.getpid(), p.pid)\n")
    child, _ = session.call("pids")
    started = [pid for pid in descendants(os.getpid()) if _is_sleep(pid)]
    assert started
    session.close()
    deadline = time.monotonic() + 2
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [pid for pid in started if alive(pid)]


def test_the_zygote_server_is_a_fresh_interpreter_with_almost_no_environment(monkeypatch):
    # What every student process starts from: not a fork of the grader, which holds the
    # hidden suites, the reference, other submissions and its environment.
    monkeypatch.setenv("GRADER_TOKEN", "s3cret")
    server = ZygoteServer.start()
    try:
        deadline = time.monotonic() + 10  # /proc shows the new program once exec has finished
        while b"serve_forever" not in Path(f"/proc/{server.pid}/cmdline").read_bytes():  # exec'd, not forked
            assert time.monotonic() < deadline and server.alive()
            time.sleep(0.01)
        environ = Path(f"/proc/{server.pid}/environ").read_bytes().split(b"\0")
        names = {entry.split(b"=")[0].decode() for entry in environ if entry}
        assert names <= {*SERVER_ENV, "PYTHONPATH", "PYTORCH_NVML_BASED_CUDA_CHECK"} and "GRADER_TOKEN" not in names
    finally:
        server.stop()
    assert not alive(server.pid)


def _state(pid: int) -> str | None:
    try:  # the field after the command, which may hold spaces and parentheses
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_a_child_stays_unreaped_until_the_grader_has_killed_it_and_forgets_it():
    # Until it is reaped, no other process can take the child's pid (or its process group's),
    # so the grader's kills by pid, after it asked how the child ended, reach only the child.
    workspace = Workspace.open(isolation.choose("basic", reference.PACKAGE_DIR), LIMITS, (), "cpu",
                               (str(reference.PACKAGE_DIR),))
    zygote = Zygote.open(workspace.control, workspace.config)
    try:
        child = zygote.spawn()
        os.kill(child.pid, signal.SIGKILL)  # ends on its own, as far as the grader knows
        assert zygote.exit_status(child.pid) == signal.SIGKILL
        assert _state(child.pid) == "Z"  # ended, its pid still its own
        child.kill()
        assert _state(child.pid) == "Z"
        zygote.forget(child)
        deadline = time.monotonic() + 5
        while _state(child.pid) is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(child.pid) is None
        child.close_output()
    finally:
        zygote.stop()
        workspace.release()


def test_a_child_whose_pid_was_reaped_and_taken_is_not_signalled_through_it():
    decoy = subprocess.Popen(["sleep", "60"], start_new_session=True)  # leads a group, as a child does
    ended = subprocess.Popen(["true"])
    pidfd = os.pidfd_open(ended.pid)
    ended.wait()  # reaped: its pid may be any process's next
    ours, theirs = socket.socketpair()
    try:
        Child(decoy.pid, ours, -1, pidfd=pidfd).kill()  # as if the decoy had taken that pid
        time.sleep(0.05)
        assert decoy.poll() is None
    finally:
        decoy.kill()
        decoy.wait()
        theirs.close()


@pytest.mark.parametrize("still_listed", [True, False])
def test_killing_a_cgroup_reaches_only_processes_still_in_it(monkeypatch, still_listed):
    # Listed, then (False) gone from the cgroup by the time its pidfd is open: its pid was
    # reaped and taken by a process of another's, which must live.
    process = subprocess.Popen(["sleep", "60"])
    listings = iter([{process.pid}, {process.pid} if still_listed else set()])
    cgroup = cgroups.SubmissionCgroup(())
    monkeypatch.setattr(cgroup, "processes", lambda: next(listings, set()))
    try:
        cgroup.kill_all(wait_s=1)
        if still_listed:
            assert process.wait(timeout=5) == -signal.SIGKILL
        else:
            time.sleep(0.05)
            assert process.poll() is None
    finally:
        process.kill()
        process.wait()


def _is_sleep(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep")
    except OSError:
        return False


def test_child_inherits_no_descriptor_of_the_grader(session_for):
    read_end, write_end = os.pipe()  # stands for the pipe that carries results to the grader
    try:
        session = session_for("import os\ndef fds():\n    return sorted(int(f) for f in os.listdir('/proc/self/fd'))\n")
        fds = session.call("fds")
    finally:
        os.close(read_end)
        os.close(write_end)
    # stdin, stdout, stderr, the connection to the grader, and the listdir handle itself.
    assert len(fds) <= 5 and write_end not in fds[4:]


def test_child_runs_in_scratch_with_a_scrubbed_environment_and_no_reference(session_for, monkeypatch):
    monkeypatch.setenv("GRADER_SECRET", "hunter2")
    session = session_for(
        "import os, importlib.util, sys\n"
        "def where():\n    return os.getcwd()\n"
        "def env():\n    return sorted(os.environ)\n"
        "def can_import_reference():\n"
        "    try:\n        import reference.multihead\n        return True\n"
        "    except ImportError:\n        return False\n")
    assert "child-" in session.call("where")
    assert "GRADER_SECRET" not in session.call("env")
    assert session.call("can_import_reference") is False


@pytest.mark.parametrize("raised_in, owner", [
    ("Head.forward", "Head"), ("split_heads", "split_heads"), ("MultiHead.forward.<locals>.attend", "MultiHead"),
    ("<module>", None), ("x" * 101, None), ("\x1b[2J.forward", None), ("K\u00f6pf.forward", None), (7, None), (None, None),
])
def test_a_stub_s_owner_as_the_child_reports_it_is_an_identifier_or_nothing(raised_in, owner):
    # What the child says (honest, or forged) only ever names a bounded plain identifier.
    assert errors.function_owner(raised_in) == owner


def test_hiding_the_reference_drops_every_module_of_it_a_forked_process_holds(monkeypatch, tmp_path):
    # The child skips going through sys.modules when no hidden package is there; where one is
    # (a zygote that imported it), the package and all its submodules go, and nothing else.
    from grader.sandbox import _child

    hidden = tmp_path / "reference"
    hidden.mkdir()
    (hidden / "__init__.py").write_text("")  # a package, as the reference is
    for name, modules in [("held", {"reference": ModuleType("reference"), "reference.multihead": ModuleType("m"),
                                    "reference.hidden.a03": ModuleType("a"), "references": ModuleType("r")}),
                          ("not held", {"references": ModuleType("r")})]:
        monkeypatch.setattr(sys, "modules", {**sys.modules, **modules})
        monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
        monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
        _child._hide_imports((str(hidden),))
        assert not [m for m in sys.modules if m == "reference" or m.startswith("reference.")], name
        assert "references" in sys.modules and "torch" in sys.modules, name
        assert str(tmp_path) not in sys.path, name
        with pytest.raises(ImportError):
            importlib.import_module("reference.layers")


def test_a_hidden_folder_that_is_no_package_hides_no_module_of_its_name(monkeypatch, tmp_path):
    # A class's folder is hidden from the child too; named like a module ("torch"), it must not
    # take that module away.
    from grader.sandbox import _child

    folder = tmp_path / "torch"
    folder.mkdir()
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    _child._hide_imports((str(folder),))
    assert "torch" in sys.modules and importlib.import_module("torch.nn") is sys.modules["torch.nn"]


def without_namespaces() -> isolation.Isolation:
    """This machine's layers but the namespaces: only outside them may a process's own signal
    end it (inside, it is PID 1 of its own, which the kernel sends none it has no handler for)."""
    return replace(isolation.choose("basic", reference.PACKAGE_DIR), namespaces=False)


def test_cell_that_kills_the_process_is_skipped_and_later_cells_run(session_for):
    session = session_for("a = 1\n", "import ctypes\nctypes.string_at(0)\n",  # a real fault, whatever the layers
                          "def value():\n    return a + 1\n")
    assert session.call("value") == 2
    assert any("cell 2" in note and "segmentation fault" in note for note in session.notes)


def test_a_process_killed_by_a_signal_without_a_name_is_described_by_its_number(session_for):
    signum = signal.SIGRTMIN + 6  # a real-time signal: signal.Signals has no member for it
    session = session_for("a = 1\n", f"import os\nos.kill(os.getpid(), {int(signum)})\n",
                          "def value():\n    return a + 1\n", layers=without_namespaces())
    assert session.call("value") == 2
    assert any("cell 2" in note and f"killed by signal {int(signum)}" in note for note in session.notes), session.notes


def test_a_cpu_limit_signal_the_code_sent_itself_is_not_called_the_cpu_limit(session_for):
    session = session_for("a = 1\n", "import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)\n",
                          "def value():\n    return a + 1\n", layers=without_namespaces())
    assert session.call("value") == 2
    note = next(note for note in session.notes if "cell 2" in note)
    assert "the code sent it" in note and "limit of 600 s exceeded" not in note, note


def test_the_cpu_limit_is_named_where_the_cpu_time_allows_it():
    killed = signal.SIGXCPU  # the raw wait status of a process ended by it
    limits = Limits(cpu_seconds=60)
    assert child_process.describe_exit(killed, limits, cpu_seconds=61.0) == "CPU time limit of 60 s exceeded"
    assert child_process.describe_exit(killed, limits, cpu_seconds=None) == "CPU time limit of 60 s exceeded"
    assert "the code sent it" in child_process.describe_exit(killed, limits, cpu_seconds=0.2)


def test_module_that_exits_at_import_defines_nothing(session_for):
    session = session_for("import os\nos._exit(0)\ndef f():\n    return 1\n", kind="module")
    with pytest.raises(StudentNotFound):
        session.call("f")
    assert any("exit code 0" in note for note in session.notes)


def test_forged_reply_is_rejected(session_for):
    session = session_for(
        "import socket, os, struct, json\n"
        "def forge():\n"
        "    for fd in sorted(int(name) for name in os.listdir('/proc/self/fd'))[3:]:\n"
        "        try:\n            s = socket.socket(fileno=os.dup(fd))\n        except OSError:\n            continue\n"
        "        header = b'{\"status\": \"ok\", \"value\": {\"$evil\": 1}}'\n"
        "        s.sendall(struct.pack('>QQ', len(header), 0) + header)\n"
        "    import time; time.sleep(60)\n")
    with pytest.raises(StudentCrashed, match="invalid reply"):
        session.call("forge")


@pytest.mark.parametrize("call", [
    "torch.softmax(x, -1)", "F.softmax(x, dim=-1)", "nn.Softmax(dim=-1)(x)", "x.softmax(-1)",
    "sm(x, -1)", "torch.log_softmax(x, -1).exp()", "torch.special.softmax(x, -1)",
    "torch.ops.aten._softmax(x, -1, False)",
])
def test_watching_sees_a_builtin_softmax_however_it_is_called(session_for, call):
    session = session_for("import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
                          "from torch.nn.functional import softmax as sm\n"
                          f"def softmax(x, dim=-1):\n    return {call}\n"
                          "def by_hand(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
                          "    return e / e.sum(dim, keepdim=True)\n")
    watched = {"aten::_softmax", "aten::_log_softmax"}
    with session.watching(watched) as seen:
        session.call("softmax", torch.randn(2, 3))
    assert seen and set(seen) <= watched
    with session.watching(watched) as seen:
        session.call("by_hand", torch.randn(2, 3))
    assert seen == []
    assert session.flags == []


def test_an_operator_is_reported_as_it_runs_so_the_code_cannot_take_it_back(session_for):
    # The recording's own account, emptied and then switched off after the softmax ran: the
    # grader already has the operator, and flags the recording that was gone at the return.
    session = session_for("import torch\nfrom torch.utils import _python_dispatch\n"
                          "def softmax(x, dim=-1):\n    out = torch.softmax(x, dim)\n"
                          "    recorder = _python_dispatch._get_current_dispatch_mode()\n"
                          "    recorder._versions.clear()\n"
                          "    _python_dispatch._pop_mode()\n"
                          "    return out\n")
    with session.watching({"aten::_softmax"}) as seen:
        session.call("softmax", torch.randn(2, 3))
    assert seen == ["aten::_softmax"]
    assert {flag.detail for flag in session.flags} == {
        "the returned tensor of shape (2, 3) was made by no recorded operator",
        "the recording was replaced by NoneType when the call returned"}


def test_looking_for_the_tensors_a_call_may_use_runs_no_code_of_the_submissions(session_for):
    # Before a recorded call, the child lists the tensors that already exist (constants, caches):
    # code of the submission's running then would run unrecorded, so none may.
    session = session_for("import torch\n"
                          "class Box:\n    @property\n    def __dict__(self):\n"
                          "        print('__dict__ ran')\n        return {}\n"
                          "class Net(torch.nn.Module):\n    def parameters(self, recurse=True):\n"
                          "        print('parameters ran')\n        return iter(())\n"
                          "box, net, table = Box(), Net(), {'ones': torch.ones(3)}\n"
                          "def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp() * table['ones']\n"
                          "    return e / e.sum(dim, keepdim=True)\n")
    with session.watching({"aten::_softmax"}) as seen:
        session.call("softmax", torch.randn(2, 3))
    session.close()
    assert seen == [] and session.flags == []  # the module-level table was known to exist
    assert "ran" not in session.output()


def test_an_operator_event_in_a_call_not_recorded_is_a_crash(session_for):
    session = session_for("import os, socket, struct, json\n"
                          "def lie(x):\n"
                          "    sock = socket.socket(fileno=os.dup(512))\n"
                          "    header = json.dumps({'event': 'operator', 'name': 'aten::_softmax'}).encode()\n"
                          "    sock.sendall(struct.pack('>QQ', len(header), 0) + header)\n"
                          "    return x\n")
    with pytest.raises(StudentCrashed, match="invalid reply"):
        session.call("lie", torch.randn(2))


def test_defined_helpers_build_objects_the_student_code_can_use(session_for):
    session = session_for("def step(model, optimizer, x):\n    optimizer.zero_grad()\n"
                          "    loss = model(x).pow(2).sum()\n    loss.backward()\n    optimizer.step()\n"
                          "    return loss.item()\n")
    helpers = session.define("stock", "import torch\ndef make():\n    torch.manual_seed(0)\n"
                                      "    model = torch.nn.Linear(4, 1)\n"
                                      "    return model, torch.optim.SGD(model.parameters(), lr=0.01)\n")
    model, optimizer = helpers.method("make")
    x = torch.randn(8, 4)
    losses = [session.call("step", model, optimizer, x) for _ in range(5)]
    assert all(later < earlier for earlier, later in zip(losses, losses[1:]))


def test_backward_through_a_plain_function(session_for):
    session = session_for("def square(x):\n    return x * x\n")
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    got = session.backward("square", x, grad_output=torch.ones(3))
    assert torch.equal(got.output, x.detach() ** 2)
    assert torch.equal(got.input_grads[0], 2 * x.detach())


def test_an_object_from_a_child_that_ended_is_reported_gone_not_blamed_on_the_student(session_for):
    session = session_for("import torch, time\ndef make():\n    return torch.nn.Linear(2, 2)\n"
                          "def hang():\n    time.sleep(60)\n", limits=HANGS)
    model = session.call("make")
    with pytest.raises(StudentTimeout):
        session.call("hang")
    with pytest.raises(StudentCrashed, match="created in a student process that has since ended"):
        model(torch.zeros(1, 2))
    assert session.call("make")(torch.zeros(1, 2)).shape == (1, 2)  # a new object works


TRY_OPEN = ("import os\n"
            "def try_open(path, mode='r'):\n"
            "    try:\n        open(path, mode).close()\n        return 'opened'\n"
            "    except OSError as exc:\n        return type(exc).__name__\n")


@pytest.mark.needs_layer("landlock")
def test_landlock_keeps_the_grader_files_out_of_reach(session_for, tmp_path):
    reference_file = str(Path(reference.__file__).parent / "multihead.py")
    outside = str(tmp_path / "planted.txt")
    session = session_for(TRY_OPEN + "def in_scratch():\n    return try_open(os.path.join(os.getcwd(), 'notes.txt'), 'w')\n",
                          layers=isolation.Isolation(landlock=True, namespaces=False))
    assert session.call("try_open", reference_file) == "PermissionError"
    assert session.call("try_open", outside, "w") == "PermissionError" and not Path(outside).exists()
    assert session.call("in_scratch") == "opened"
    assert session.call("try_open", os.devnull, "w") == "opened"
    unconfined = session_for(TRY_OPEN, sandbox="off")
    assert unconfined.call("try_open", reference_file) == "opened"  # what the layer prevents


NAMESPACES_ONLY = isolation.Isolation(landlock=False, namespaces=True)
needs_namespaces = pytest.mark.needs_layer("namespaces")


@needs_namespaces
def test_namespaces_alone_hide_the_reference_and_make_the_filesystem_read_only(session_for):
    reference_file = str(Path(reference.__file__).parent / "multihead.py")
    planted = Path(tempfile.mkdtemp(dir="/var/tmp")) / "planted.txt"
    try:
        session = session_for(TRY_OPEN, layers=NAMESPACES_ONLY)
        # Its root holds only its Python and the system's folders: no checkout, no /var.
        assert session.call("try_open", reference_file) == "FileNotFoundError"
        assert session.call("try_open", str(planted), "w") == "FileNotFoundError" and not planted.exists()
        assert session.call("try_open", "/etc/planted.txt", "w") == "OSError"  # EROFS
        assert not Path("/etc/planted.txt").exists()
        assert session.call("try_open", sys.executable) == "opened"  # its Python is all there
        assert session.call("try_open", "notes.txt", "w") == "opened"  # the scratch tmpfs
    finally:
        shutil.rmtree(planted.parent)


IDENTITY = """
import getpass, os, socket

def identity():
    import grp, pwd
    return (os.getuid(), os.getgid(), os.getgroups(), getpass.getuser(), pwd.getpwuid(os.getuid()).pw_name,
            grp.getgrgid(os.getgid()).gr_name, pwd.getpwuid(os.getuid()).pw_dir == os.getcwd())

def try_read(path):
    try:
        return open(path).read()
    except OSError as exc:
        return type(exc).__name__

held = []

def hold_in_flight():
    # Descriptors sent and never received count against the sender's uid's budget, up to its
    # RLIMIT_NOFILE (256): spend all of it.
    ours, theirs = socket.socketpair()
    held.append((ours, theirs))
    sent = 0
    while True:
        try:
            socket.send_fds(ours, [b'x'], [ours.fileno()] * 64)
        except OSError as exc:
            return sent, os.strerror(exc.errno)
        sent += 64

def pass_a_descriptor():
    ours, theirs = socket.socketpair()
    try:
        socket.send_fds(ours, [b'x'], [ours.fileno()])
        return 'passed'
    except OSError as exc:
        return os.strerror(exc.errno)
    finally:
        ours.close()
        theirs.close()
"""


@needs_namespaces
def test_the_student_s_process_is_a_user_of_its_own_not_root(session_for):
    secret = Path(tempfile.mkdtemp(dir="/etc")) / "key.pem"  # a key only root may read, as TLS keeps one
    secret.write_text("PRIVATE")
    secret.chmod(0o600)
    try:
        first, second = session_for(IDENTITY), session_for(IDENTITY)  # graded at the same time
        uid, gid, groups, *names = first.call("identity")
        assert uid != 0 and gid == uid and names == ["student", "student", "student", True]
        assert groups == namespaces.gpu_groups()  # none but those that own the GPU's devices, if any
        assert second.call("identity")[0] not in (0, uid)
        assert first.call("try_read", str(secret)) == "PermissionError"
        assert first.call("try_read", "/etc/passwd").startswith("root:")  # what every user may read
        # The kernel's budget of descriptors in flight is per user: one submission's cannot be spent
        # for another's (torch's DataLoader workers pass their batches that way).
        assert first.call("hold_in_flight") == (320, "Too many references: cannot splice")
        assert first.call("pass_a_descriptor") != "passed"
        assert second.call("pass_a_descriptor") == "passed"
    finally:
        shutil.rmtree(secret.parent)


UNIX_CONNECT = """
import socket

def connect(path):
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(path)
            return 'connected'  # as root, to whatever serves there
    except OSError as exc:
        return type(exc).__name__
"""


@needs_namespaces
def test_no_service_s_unix_socket_on_the_machine_can_be_reached(session_for):
    # A service's socket (D-Bus, Docker, systemd in /run) would see the student's code as root;
    # a read-only mount does not stop a connect. Listeners where services and the grader keep
    # theirs (only the folders it may read, /etc and its Python's, still show their sockets):
    checkout = reference.PACKAGE_DIR.parent
    places = [Path(tempfile.mkdtemp(dir=folder)) for folder in ("/var/tmp", "/tmp", "/run", checkout)]
    listeners = []
    try:
        for place in places:
            listener = socket.socket(socket.AF_UNIX)
            listener.bind(str(place / "service.sock"))
            listener.listen()
            listeners.append(listener)
        session = session_for(UNIX_CONNECT)
        for place in places:
            assert session.call("connect", str(place / "service.sock")) == "FileNotFoundError", place
    finally:
        for listener in listeners:
            listener.close()
        for place in places:
            shutil.rmtree(place)


@needs_namespaces
def test_the_child_sees_no_other_process_and_holds_no_capability(session_for):
    session = session_for("import os\n"
                          "def processes():\n    return sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
                          "def capabilities():\n"
                          "    lines = open('/proc/self/status').read().splitlines()\n"
                          "    return {l.split(':')[0]: int(l.split()[1], 16) for l in lines if l.startswith('Cap')}\n"
                          "def signal_everyone():\n"
                          "    try:\n        os.kill(-1, 9)\n    except OSError as exc:\n        return type(exc).__name__\n",
                          layers=NAMESPACES_ONLY)
    assert session.call("processes") == [1]  # itself, PID 1 of its namespace; not the grader
    assert set(session.call("capabilities").values()) == {0}
    assert session.call("signal_everyone") == "ProcessLookupError"  # nothing it may signal
    assert session.call("processes") == [1]


@needs_namespaces
def test_signals_the_code_sends_its_own_process_do_not_end_it(session_for):
    # It is PID 1 of its namespace: the kernel ends it for a fault or a limit, the grader for
    # a time-out, and nothing else, so the words for how it ended are never the code's claim.
    session = session_for("import os\n"
                          "def send(signum):\n    os.kill(os.getpid(), signum)\n    return 'alive'\n",
                          layers=NAMESPACES_ONLY)
    for signum in (signal.SIGXCPU, signal.SIGXFSZ, signal.SIGSEGV, signal.SIGRTMIN + 6, signal.SIGKILL):
        assert session.call("send", int(signum)) == "alive", signum


@needs_namespaces
def test_each_child_gets_a_new_pid_namespace_and_its_forker_keeps_its_own():
    # In a throwaway fork: fork_init changes, for a moment, where this process's children go.
    read, write = os.pipe()
    forker = os.fork()
    if forker == 0:
        try:
            os.close(read)
            for _ in range(2):
                if namespaces.fork_init() == 0:  # PID 1 of a new namespace
                    os.write(write, f"init {os.getpid()} {os.readlink('/proc/self/ns/pid')}\n".encode())
                    os._exit(0)
                os.wait()
            if os.fork() == 0:  # an ordinary child, after the inits
                os.write(write, f"plain {os.getppid()} {os.readlink('/proc/self/ns/pid')}\n".encode())
                os._exit(0)
            os.wait()
            os._exit(0)
        except BaseException:
            os._exit(1)
    os.close(write)
    with os.fdopen(read) as lines:
        seen = [line.split() for line in lines]
    assert os.waitstatus_to_exitcode(os.waitpid(forker, 0)[1]) == 0
    ours = os.readlink("/proc/self/ns/pid")
    assert [(kind, pid) for kind, pid, _ in seen] == [("init", "1"), ("init", "1"), ("plain", str(forker))]
    first, second, plain = (namespace for _, _, namespace in seen)
    assert len({first, second, ours}) == 3 and plain == ours


@needs_namespaces
def test_the_machines_secrets_are_out_of_sight(session_for):
    session = session_for("import os\n"
                          "def look(path):\n"
                          "    try:\n"
                          "        return os.listdir(path) if os.path.isdir(path) else open(path).read()\n"
                          "    except OSError as exc:\n        return type(exc).__name__\n"
                          "def peek(path):\n    with open(path, 'rb') as file:\n        return len(file.read(64))\n",
                          layers=NAMESPACES_ONLY)
    for path in ("/etc/shadow", "/etc/gshadow"):
        if Path(path).is_file():
            assert session.call("look", path) == "", path  # readable by uid 0 without capabilities, else
    assert session.call("look", "/sys/fs/cgroup") == "PermissionError"  # every submission's cgroup
    # Every physical page's flags and owner (uid 0 reads them without capabilities), every timer's process.
    for path in ("/proc/kpageflags", "/proc/kpagecount", "/proc/kpagecgroup", "/proc/timer_list"):
        if Path(path).is_file():
            assert session.call("peek", path) == 0, path
    assert session.call("peek", "/proc/self/stat") > 0  # the process's own /proc as it was
    # The kernel's settings: writing the current value back would change nothing, were it allowed.
    rewrite = session_for("def rewrite(path):\n"
                          "    value = open(path).read()\n"
                          "    try:\n        open(path, 'w').write(value)\n        return 'written'\n"
                          "    except OSError as exc:\n        return exc.strerror\n", layers=NAMESPACES_ONLY)
    for setting in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname"):
        assert rewrite.call("rewrite", setting) == "Read-only file system", setting
    assert "root" in session.call("look", "/etc/passwd")  # the rest of /etc as it was


@needs_namespaces
def test_the_childs_dev_holds_only_what_code_opens(session_for):
    session = session_for("import os\n"
                          "def dev():\n    return sorted(os.listdir('/dev'))\n"
                          "def use():\n"
                          "    with open('/dev/null', 'w') as null:\n        null.write('gone')\n"
                          "    return len(open('/dev/urandom', 'rb').read(16)), len(os.urandom(16)), list(open('/dev/zero', 'rb').read(2))\n"
                          "def open_any(path):\n"
                          "    try:\n        os.close(os.open(path, os.O_RDONLY))\n        return 'opened'\n"
                          "    except OSError as exc:\n        return type(exc).__name__\n",
                          layers=NAMESPACES_ONLY)
    gpu = {name for name in os.listdir("/dev") if name.startswith(namespaces.GPU_DEVICES)}
    kept = {name for name in namespaces.DEVICES if Path("/dev", name).exists()}
    assert set(session.call("dev")) == kept | gpu | {"fd", "shm", "stdin", "stdout", "stderr"}
    assert session.call("use") == (16, 16, [0, 0])
    # The machine's disks, terminals, KVM: not there, whatever this machine has.
    for name in ("loop0", "vda", "sda", "nvme0n1", "kvm", "ptmx", "mem", "userfaultfd", "tty"):
        assert session.call("open_any", f"/dev/{name}") == "FileNotFoundError", name


@needs_namespaces
@pytest.mark.parametrize("folder", [".", "/dev/shm"])
def test_the_scratch_disk_and_shared_memory_are_capped(session_for, folder):
    limits = Limits(call_timeout_s=5.0, scratch_bytes=8 * 2**20, scratch_files=64)
    session = session_for("import os\n"
                          "def fill(folder, size, count):\n"
                          "    try:\n"
                          "        for i in range(count):\n"
                          "            with open(f'{folder}/f{i}', 'wb') as f:\n                f.write(b'x' * size)\n"
                          "    except OSError as exc:\n        return os.strerror(exc.errno)\n"
                          "    return 'wrote all'\n",
                          layers=NAMESPACES_ONLY, limits=limits)
    assert session.call("fill", folder, 2**20, 20) == "No space left on device"  # 20 MiB into 8
    assert session.call("fill", folder, 1, 200) == "No space left on device"  # 200 files into 64 inodes


DATA_LOADER = """
import torch
from torch.utils.data import DataLoader, TensorDataset

def total(workers):
    # Workers hand each batch back through shared memory (/dev/shm), a queue's semaphore and
    # a descriptor server whose socket lies in the temporary directory.
    loader = DataLoader(TensorDataset(torch.arange(64.0).view(16, 4)), batch_size=4, num_workers=workers)
    return float(sum(batch.sum() for (batch,) in loader))
"""


@needs_namespaces
def test_a_data_loader_with_worker_processes_works_under_every_layer(session_for):
    # Honest code from any tutorial: it must not lose points to the sandbox. Preloaded as every
    # suite's zygote server does: torch._dynamo's import leaves tempfile's choice, /tmp, cached.
    session = session_for(DATA_LOADER, preload=("torch._dynamo",))
    assert session.call("total", 2) == session.call("total", 0) == float(sum(range(64)))


TMP = """
import os, tempfile

def write(name, text):
    try:
        with open(f'/tmp/{name}', 'w') as file:
            file.write(text)
    except OSError as exc:
        return os.strerror(exc.errno)
    return 'wrote'

def read(name):
    try:
        return open(f'/tmp/{name}').read()
    except OSError as exc:
        return os.strerror(exc.errno)

def temporary():
    with tempfile.NamedTemporaryFile('w') as file:
        return os.path.dirname(file.name) == os.environ['TMPDIR']
"""


@needs_namespaces
def test_tmp_is_the_student_s_own_and_tempfile_follows_its_tmpdir(session_for):
    first = session_for(TMP, preload=("torch._dynamo",))
    second = session_for(TMP, preload=("torch._dynamo",))  # a classmate's, graded at the same time
    assert first.call("temporary") and second.call("temporary")
    assert first.call("write", "grader-leak", "secret") == "wrote"  # a tutorial's checkpoint, say
    assert first.call("read", "grader-leak") == "secret"
    assert second.call("read", "grader-leak") == "No such file or directory"
    assert not Path("/tmp/grader-leak").exists()  # nor on the machine


def test_without_namespaces_the_machine_s_shared_memory_stays_closed(session_for):
    # There /dev/shm is the machine's, which every submission graded beside this one shares.
    if not landlock.abi_version():
        pytest.skip("needs Landlock")
    session = session_for(IPC, layers=without_namespaces())
    assert session.call("leave_posix_shm", "secret") in ("Permission denied", "Read-only file system")


@needs_namespaces
def test_the_child_cannot_reach_the_network_not_even_this_machine(session_for):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        session = session_for(
            "import socket\n"
            "def connect(port):\n"
            "    try:\n"
            "        socket.create_connection(('127.0.0.1', port), timeout=1).close()\n"
            "        return 'connected'\n"
            "    except OSError as exc:\n"
            "        return type(exc).__name__\n")
        assert session.call("connect", port) != "connected"
    finally:
        listener.close()


@needs_namespaces
def test_processes_that_leave_the_process_group_still_end_with_the_session(session_for):
    session = session_for("import os, subprocess\n"
                          "p = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
                          "def me():\n    return os.getpid()\n")
    session.call("me")
    escaped = [pid for pid in descendants(os.getpid()) if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep")]
    assert escaped, "the escaping process did not start"
    nspid = next(line for line in Path(f"/proc/{escaped[0]}/status").read_text().splitlines() if line.startswith("NSpid"))
    assert len(nspid.split()) == 3, nspid  # "NSpid: <host pid> <pid in the child's namespace>"
    session.close()
    deadline = time.monotonic() + 2
    while any(alive(pid) for pid in escaped) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [pid for pid in escaped if alive(pid)]


def test_strict_refuses_to_grade_without_every_layer(monkeypatch):
    monkeypatch.setattr(landlock, "abi_version", lambda: 0)
    with pytest.raises(isolation.SandboxUnavailable, match="Landlock"):
        isolation.choose("strict", reference.PACKAGE_DIR)


def test_basic_warns_about_a_missing_layer_and_grades_with_the_others(monkeypatch):
    monkeypatch.setattr(landlock, "abi_version", lambda: 0)
    with pytest.warns(isolation.SandboxWarning, match="Landlock"):
        chosen = isolation.choose("basic", reference.PACKAGE_DIR)
    assert not chosen.landlock and "landlock" not in " ".join(chosen.layers())
    assert chosen.namespaces == namespaces.namespaces_available()


@pytest.mark.needs_layer("landlock")
def test_a_reference_inside_a_readable_directory_is_not_called_protected(monkeypatch, tmp_path):
    monkeypatch.setattr(landlock, "readable_roots", lambda: [str(tmp_path)])
    with pytest.raises(isolation.SandboxUnavailable, match="reference readable"):
        isolation.choose("strict", tmp_path / "reference")
    with pytest.warns(isolation.SandboxWarning):
        layers = isolation.choose("basic", tmp_path / "reference").layers()
    assert any(layer.startswith("landlock (reference readable") for layer in layers)


def test_off_uses_no_optional_layer():
    assert isolation.choose("off", reference.PACKAGE_DIR).layers() == isolation.BASE_LAYERS


@pytest.mark.needs_layer("landlock-signals")
def test_landlock_alone_stops_signals_to_the_grader(session_for):
    session = session_for("import os\n"
                          "def signal(pid):\n"
                          "    try:\n        os.kill(pid, 0)\n        return 'allowed'\n"
                          "    except OSError as exc:\n        return type(exc).__name__\n",
                          layers=isolation.Isolation(landlock=True, namespaces=False))
    assert session.call("signal", os.getpid()) == "PermissionError"


@pytest.mark.needs_layer("pids-cgroup", "namespaces")
def test_a_fork_bomb_stops_at_the_process_limit_and_the_next_child_still_starts(session_for):
    limits = replace(HANGS, processes=32)
    session = session_for("import os, time\n"
                          "def bomb(forever):\n"
                          "    started = 0\n"
                          "    while True:\n"
                          "        try:\n"
                          "            if os.fork() == 0:\n                time.sleep(60)\n                os._exit(0)\n"
                          "            started += 1\n"
                          "        except OSError:\n"
                          "            if not forever:\n                return started\n"
                          "def ping():\n    return 'pong'\n",
                          layers=isolation.Isolation(landlock=False, namespaces=True, pids_cgroup=True), limits=limits)
    assert 0 < session.call("bomb", False) < 32
    with pytest.raises(StudentTimeout):
        session.call("bomb", True)
    assert session.call("ping") == "pong"  # a new child, though the last one filled the cgroup


@pytest.mark.parametrize("controller, named", [("pids", "fork bombs"), ("memory", "memory of a submission's processes"),
                                               ("cpu", "CPU share of a submission's processes")])
def test_strict_names_a_missing_cgroup_controller_and_basic_warns(monkeypatch, controller, named):
    real = cgroups.available
    monkeypatch.setattr(cgroups, "available", lambda wanted: wanted != controller and real(wanted))
    with pytest.raises(isolation.SandboxUnavailable, match=f"{controller} cgroup"):
        isolation.choose("strict", reference.PACKAGE_DIR)
    with pytest.warns(isolation.SandboxWarning, match=named):
        chosen = isolation.choose("basic", reference.PACKAGE_DIR)
    assert controller not in chosen.cgroup_controllers() and f"{controller}-cgroup" not in chosen.layers()


@pytest.mark.needs_layer("seccomp")
def test_seccomp_refuses_what_a_submission_never_needs_and_allows_the_rest(session_for):
    session = session_for("import ctypes, mmap, os, sys, torch\n"
                          "libc = ctypes.CDLL(None, use_errno=True)\n"
                          "def attempt(number, *args):\n"
                          "    if libc.syscall(number, *args) == -1:\n        return os.strerror(ctypes.get_errno())\n"
                          "    return 'allowed'\n"
                          "def on_a_file(number, *args):\n"  # a file every process may read: the page cache's
                          "    fd = os.open(sys.executable, os.O_RDONLY)\n"
                          "    try:\n        return attempt(number, fd, *args)\n    finally:\n        os.close(fd)\n"
                          "libc.mmap.restype = ctypes.c_void_p\n"
                          "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, *[ctypes.c_int] * 3, ctypes.c_long]\n"
                          "def on_a_mapping(advice):\n"  # madvise on a page of that file
                          "    fd = os.open(sys.executable, os.O_RDONLY)\n"
                          "    address = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 0)\n"
                          "    os.close(fd)\n"
                          "    return attempt(28, ctypes.c_void_p(address), 4096, advice)\n"
                          "def clone(flags):\n"
                          "    pid = libc.syscall(56, flags | 17, 0, 0, 0, 0)\n"  # SIGCHLD: as fork() does
                          "    if pid == 0:\n        os._exit(0)\n"
                          "    if pid == -1:\n        return os.strerror(ctypes.get_errno())\n"
                          "    os.waitpid(pid, 0)\n"
                          "    return 'allowed'\n"
                          "def ordinary():\n"
                          "    import socket, subprocess, threading\n"
                          "    pid = os.fork()\n"
                          "    if pid == 0:\n        os._exit(0)\n"
                          "    os.waitpid(pid, 0)\n"
                          "    ran = []\n"
                          "    thread = threading.Thread(target=lambda: ran.append(1))\n"  # clone3 refused: clone
                          "    thread.start()\n    thread.join()\n"
                          "    socket.socket(socket.AF_INET).close()\n    socket.socketpair()[0].close()\n"
                          "    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()\n"  # NETLINK_ROUTE
                          "    out = subprocess.run(['echo', 'spawned'], capture_output=True, text=True).stdout\n"
                          "    return float(torch.randn(64, 64).softmax(-1).sum()), ran, out.strip()\n",
                          layers=isolation.Isolation(landlock=False, namespaces=False, seccomp=True))
    unshare_user, ptrace_traceme, io_uring_setup = (272, 0x10000000), (101, 0), (425, 1, 0)
    # socket(AF_VSOCK, SOCK_STREAM, 0): a VM's line to its host
    vsock, inotify, mq_open, io_setup = (41, 40, 1, 0), (253,), (240, 0, 0, 0, 0), (206, 1, 0)
    uevents = (41, 16, 2, 15)  # socket(AF_NETLINK, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT): the machine's devices
    x32_getpid = (0x40000000 | 39,)
    no_death_signal = (157, 1, 0)  # prctl(PR_SET_PDEATHSIG, 0)
    for call in (unshare_user, ptrace_traceme, io_uring_setup, x32_getpid, vsock, inotify, mq_open, io_setup, uevents,
                 no_death_signal):
        assert session.call("attempt", *call) == "Operation not permitted", call
    assert session.call("attempt", 435, 0, 0) == "Function not implemented"  # clone3: the C library falls back
    for flag in (0x10000000, 0x40000000, 0x20000000, 0x00020000):  # a new user, network, PID, mount namespace
        assert session.call("clone", flag) == "Operation not permitted", hex(flag)
    assert session.call("clone", 0) == "allowed"
    assert session.call("attempt", 157, 3) == "allowed"  # prctl(PR_GET_DUMPABLE): other options pass
    # What tells or sets which pages of a file are cached (a channel between processes), and
    # the same calls' ordinary uses.
    mincore, cachestat, process_madvise = (27, 0, 4096, 0), (451, 0, 0, 0, 0), (440, 0, 0, 0, 21, 0)
    for call in (mincore, cachestat, process_madvise):
        assert session.call("attempt", *call) == "Operation not permitted", call
    fadvise, preadv2 = 221, 327
    for advice in (4, 5):  # POSIX_FADV_DONTNEED, NOREUSE
        assert session.call("on_a_file", fadvise, 0, 0, advice) == "Operation not permitted", advice
    assert session.call("on_a_file", fadvise, 0, 0, 2) == "allowed"  # POSIX_FADV_SEQUENTIAL
    assert session.call("on_a_file", preadv2, 0, 0, 0, 0, 8) == "Operation not permitted"  # RWF_NOWAIT
    assert session.call("on_a_file", preadv2, 0, 0, 0, 0, 0) == "allowed"
    for advice in (20, 21):  # MADV_COLD, MADV_PAGEOUT
        assert session.call("on_a_mapping", advice) == "Operation not permitted", advice
    assert session.call("on_a_mapping", 4) == "allowed"  # MADV_DONTNEED: this process's own pages
    assert session.call("ordinary") == (pytest.approx(64.0), [1], "spawned")
    unfiltered = session_for("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                             "def attempt(number, *args):\n    return libc.syscall(number, *args)\n", sandbox="off")
    assert unfiltered.call("attempt", *unshare_user) == 0  # what the filter prevents, as root


def test_a_seccomp_jump_too_far_for_its_byte_is_refused_not_wrapped():
    from grader.sandbox import seccomp

    near = [(seccomp._JEQ_K, ("end",), 0, 1), *[(seccomp._RET_K, 0, 0, 0)] * 255, "end", (seccomp._RET_K, 0, 0, 0)]
    assert seccomp._resolve(near)[0][1] == 255
    with pytest.raises(ValueError, match="does not fit"):
        seccomp._resolve([*near[:1], (seccomp._RET_K, 0, 0, 0), *near[1:]])


@pytest.mark.needs_layer("namespaces", "seccomp")
def test_a_student_process_ends_with_its_zygote_whatever_its_code_does(session_for):
    # PID 1 of its namespace ignores every signal but SIGKILL from its parent's death; code that
    # clears that signal would outlive a grader killed with its zygotes (kill -9 of its group).
    session = session_for("import ctypes, os\n"
                          "cleared = ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n"
                          "def ping():\n    return cleared\n")
    assert session.call("ping") == -1
    student = session._process._child.pid
    os.kill(session._process._zygote.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while alive(student) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not alive(student)


def test_after_a_timeout_the_session_gives_calls_that_may_run_the_hung_code_the_shorter_limit(session_for):
    session = session_for("def split_heads(x, num_heads):\n"
                          "    while num_heads == 6:\n        pass\n    return x\n",
                          "def attend(x):\n    return split_heads(x, 2)\n",
                          "def unrelated(x):\n    return x\n",
                          limits=replace(HANGS, call_floor_s=1.0, hung_call_timeout_s=0.5))
    given: list[tuple[str, float]] = []
    exchange = session._process.exchange

    def spy(header, tensors, label, limit=None, **options):
        given.append((label, limit.first_s))
        return exchange(header, tensors, label, limit, **options)

    session._process.exchange = spy
    # The session has no reference to time the call by: past the floor, the full limit.
    with pytest.raises(StudentTimeout, match=r"^split_heads: time limit of 2 s exceeded$"):
        session.call("split_heads", torch.ones(2), 6)
    for name in ("split_heads", "attend", "unrelated"):
        session.call(name, torch.ones(2), *([2] if name == "split_heads" else []))
    assert given == [("split_heads", 1.0), ("split_heads", 0.5), ("attend", 0.5), ("unrelated", 1.0)]
    with pytest.raises(StudentTimeout, match=r"time limit of 0.5 s exceeded \(split_heads ran past"):
        session.call("split_heads", torch.ones(2), 6)


def test_a_call_past_the_floor_gets_what_the_reference_s_time_for_it_gives(session_for):
    # A while True in split_heads stops at the floor: the reference splits these heads in
    # microseconds. The floor is all a hang costs, instead of the full per-call limit.
    session = session_for("def split_heads(x, num_heads):\n    while True:\n        pass\n",
                          limits=replace(HANGS, call_timeout_s=30.0, call_floor_s=1.0), solution=reference.multihead)
    started = time.monotonic()
    with pytest.raises(StudentTimeout, match=r"^split_heads: time limit of 1 s exceeded \(a call may take 3000 times"):
        session.call("split_heads", torch.ones(2, 3, 8), 2)
    assert time.monotonic() - started < 30  # not the per-call limit


# ---- limits per submission, not per process -------------------------------------------------

SYSV_KEY = 0x67726164  # "grad": a shared memory segment's key, as a student would pick one
MQUEUE = "/grader-leak"
IPC = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p

def leave(key, size, queue):
    segment = libc.shmget(key, size, 0o1600)  # IPC_CREAT; never removed
    ctypes.memmove(libc.shmat(segment, None, 0), b'secret', 6)
    libc.mq_open(queue.encode(), os.O_CREAT | os.O_RDWR, 0o600, None)  # never unlinked
    return look(key, queue)

def look(key, queue):
    segment = libc.shmget(key, 0, 0)
    if segment == -1:
        shm = os.strerror(ctypes.get_errno())
    else:
        shm = ctypes.string_at(libc.shmat(segment, None, 0o10000), 6).decode()  # SHM_RDONLY
    mq = 'opened' if libc.mq_open(queue.encode(), os.O_RDONLY) >= 0 else os.strerror(ctypes.get_errno())
    return shm, mq

def leave_posix_shm(data):
    try:
        with open('/dev/shm/grader-leak', 'w') as file:  # never unlinked
            file.write(data)
    except OSError as exc:
        return os.strerror(exc.errno)
    return look_posix_shm()

def look_posix_shm():
    try:
        with open('/dev/shm/grader-leak') as file:
            return file.read()
    except OSError as exc:
        return os.strerror(exc.errno)
"""


def _host_shm_keys() -> set[int]:
    """The keys of the System V shared memory segments in this (the grader's) IPC namespace."""
    return {int(line.split()[0]) for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]}


@needs_namespaces
def test_ipc_objects_die_with_the_submission_and_no_other_submission_sees_them(session_for):
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        # Namespaces alone (Landlock refuses to open a POSIX message queue at all).
        first = session_for(IPC, layers=NAMESPACES_ONLY)
        assert first.call("leave", SYSV_KEY, 2**20, MQUEUE) == ("secret", "opened")  # its own, while it lives
        assert first.call("leave_posix_shm", "secret") == "secret"  # POSIX shared memory is a file
        second = session_for(IPC, layers=NAMESPACES_ONLY)  # a classmate's, graded at the same time
        assert second.call("look", SYSV_KEY, MQUEUE) == ("No such file or directory",) * 2
        assert second.call("look_posix_shm") == "No such file or directory"
        assert not Path("/dev/shm/grader-leak").exists()  # nor on the machine
        first.close()
        assert SYSV_KEY not in _host_shm_keys()  # nothing left on the machine
        assert second.call("look", SYSV_KEY, MQUEUE) == ("No such file or directory",) * 2
    finally:  # what a grader without IPC namespaces leaves on the machine
        segment = libc.shmget(SYSV_KEY, 0, 0)
        if segment != -1:
            libc.shmctl(segment, 0, None)  # IPC_RMID
        libc.mq_unlink(MQUEUE.encode())


FORKED_HELPERS = """
import os, time

def helpers(count, size):
    read_end, write_end = os.pipe()
    pids = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            try:
                held = b'x' * size  # every page written: resident
                os.write(write_end, b'+')
                time.sleep(60)
            finally:
                os._exit(0)
        pids.append(pid)
    os.close(write_end)
    os.set_blocking(read_end, False)
    holding, dead, deadline = 0, set(), time.monotonic() + 20
    while holding + len(dead) < count and time.monotonic() < deadline:
        time.sleep(0.05)
        try:
            holding += len(os.read(read_end, count))
        except BlockingIOError:
            pass
        dead |= {pid for pid in pids if pid not in dead and os.waitpid(pid, os.WNOHANG)[0]}
    time.sleep(0.5)  # the kernel may still be ending some
    dead |= {pid for pid in pids if pid not in dead and os.waitpid(pid, os.WNOHANG)[0]}
    return holding, count - len(dead)

def ping():
    return 'pong'
"""


@pytest.mark.needs_layer("memory-cgroup")
def test_forked_helpers_stay_within_the_submissions_memory_limit_together(session_for):
    limits = replace(LIMITS, memory_bytes=2 * 2**30)  # per process too: each helper fits on its own
    session = session_for(FORKED_HELPERS, limits=limits)
    try:
        _, alive = session.call("helpers", 6, 600 * 2**20)  # 3.5 GiB in all
    except StudentCrashed as exc:  # the kernel picked the student's own process
        assert "memory limit of 2 GiB exceeded by all of your code's processes together" in str(exc)
    else:
        assert alive * 600 * 2**20 < limits.memory_bytes
    assert session_for.workspaces[-1].cgroup.oom_kills() > 0
    assert session.call("ping") == "pong"  # the submission goes on, and so does the grader


@pytest.mark.needs_layer("memory-cgroup")
def test_a_child_closed_after_its_helpers_ran_out_of_memory_does_not_blame_the_next_childs_end(session_for):
    limits = replace(LIMITS, memory_bytes=2 * 2**30)
    session = session_for(FORKED_HELPERS + "\nimport signal\ndef leave():\n    os.kill(os.getpid(), signal.SIGKILL)\n",
                          limits=limits, layers=without_namespaces())
    try:
        session.call("helpers", 6, 600 * 2**20)  # the kernel kills helpers (the largest) for the limit
    except StudentCrashed:
        pass
    assert session_for.workspaces[-1].cgroup.oom_kills() > 0
    session.close()  # as after a test with answers: nobody asks how that child ended
    with pytest.raises(StudentCrashed) as crash:
        session.call("leave")
    assert "killed" in str(crash.value) and "memory" not in str(crash.value)


BUSY = """
import os, time

def burn(processes, seconds):
    started = time.monotonic()
    for _ in range(processes):
        if os.fork() == 0:
            while time.monotonic() < started + seconds:
                pass
            os._exit(0)
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break
    times = os.times()
    return time.monotonic() - started, times.children_user + times.children_system
"""


def _cpu_settings(directory: Path) -> tuple[int, int] | None:
    """The CFS quota and period of a cgroup directory (v1 or v2); None where it has no cpu controller."""
    if (directory / "cpu.max").is_file():
        quota, period = (directory / "cpu.max").read_text().split()
        return (-1 if quota == "max" else int(quota)), int(period)
    if (directory / "cpu.cfs_quota_us").is_file():
        return int((directory / "cpu.cfs_quota_us").read_text()), int((directory / "cpu.cfs_period_us").read_text())
    return None


def _cpu_usage_s(directory: Path) -> float | None:
    """The CPU time a cgroup directory accounts to its processes (v1's cpuacct, v2's cpu.stat)."""
    if (directory / "cpuacct.usage").is_file():
        return int((directory / "cpuacct.usage").read_text()) / 1e9
    for line in (directory / "cpu.stat").read_text().splitlines() if (directory / "cpu.stat").is_file() else ():
        if line.startswith("usage_usec "):
            return int(line.split()[1]) / 1e6
    return None


@pytest.mark.needs_layer("cpu-cgroup")
def test_a_cpu_hog_gets_the_submissions_cpu_share_however_many_processes_it_starts(session_for):
    # Load-independent: a quota caps what the submission's processes get together (a classmate
    # graded beside it keeps the rest of the machine); a busy machine only gives them less.
    session = session_for(BUSY, limits=replace(LIMITS, threads=1))
    cgroup = session_for.workspaces[-1].cgroup
    assert [settings for settings in map(_cpu_settings, cgroup.directories) if settings] == [(100_000, 100_000)]
    cpu = next(directory for directory in cgroup.directories if _cpu_settings(directory))
    weight = cpu.parent / ("cpu.weight" if (cpu.parent / "cpu.weight").is_file() else "cpu.shares")
    # All submissions together weigh as one busy process per CPU against the machine's others.
    assert int(weight.read_text()) in (1024 * os.cpu_count(), min(100 * os.cpu_count(), 10_000))
    wall, cpu = session.call("burn", 8, 1.5)
    assert cpu <= wall * 1 + 0.3, (wall, cpu)  # one CPU's worth of time, one CFS period of slack
    accounted = [usage for usage in map(_cpu_usage_s, cgroup.directories) if usage is not None]
    assert accounted and accounted[0] >= cpu * 0.9  # its usage is accounted to the submission


class _Marked:
    """What conftest's hook reads of a test item: its needs_layer markers."""

    def __init__(self, *layers: str):
        self.marker = pytest.mark.needs_layer(*layers).mark

    def iter_markers(self, name: str):
        return [self.marker] if name == self.marker.name else []


def test_a_test_needing_a_missing_layer_skips_here_and_fails_where_every_layer_is_required(monkeypatch):
    monkeypatch.setitem(conftest.LAYERS, "seccomp", lambda: False)  # as on a machine without it
    monkeypatch.delenv("REQUIRE_SANDBOX", raising=False)
    with pytest.raises(pytest.skip.Exception, match="lacks the sandbox layers seccomp"):
        conftest.pytest_runtest_setup(_Marked("namespaces", "seccomp"))
    monkeypatch.setenv("REQUIRE_SANDBOX", "1")  # CI
    with pytest.raises(pytest.fail.Exception, match="REQUIRE_SANDBOX=1, but this machine lacks the sandbox layers seccomp"):
        conftest.pytest_runtest_setup(_Marked("seccomp"))


COUNTER = "N = 0\n\ndef bump():\n    global N\n    N += 1\n    return N\n"


def test_answers_leave_with_their_process_unless_the_next_test_sends_the_same(session_for):
    session = session_for(COUNTER)
    assert session.call("bump") == 1
    session.define("trained", "WEIGHTS = 42\n", answers=True)
    session.end_test(answers_carry_on=True)  # the next test sends the same answers: one process serves both
    assert session.call("bump") == 2
    session.end_test()  # the test after that does not: the process that holds them ends
    assert session.call("bump") == 1
    session.end_test(answers_carry_on=True)  # nothing held: the process goes on as for any test
    assert session.call("bump") == 2
    session.define("trained", "WEIGHTS = 42\n", answers=True)
    session.end_test()
    assert session.call("bump") == 1


PRINTER = "def show(text):\n    print(text, flush=True)\n"


def test_what_a_process_prints_after_it_received_answers_stays_out_of_the_report(session_for):
    """Answers (stock parts, a model the reference trained) printed into the report would reach
    the student's next submission: a red team printed the stock train_step's bytecode so."""
    session = session_for(PRINTER)
    session.call("show", "before the answers")
    session.define("stock", "WEIGHTS = [4, 2]\n", answers=True)
    session.call("show", "the answers: [4, 2]")
    session.end_test()  # that process ends; the next one holds no answers
    session.call("show", "in a fresh process")
    model = session.define("model", "import torch\nmodel = torch.nn.Linear(2, 1)\n").attr("model")
    model.load_parameters({"weight": torch.ones(1, 2), "bias": torch.zeros(1)}, answers=True)
    session.call("show", "the trained weights: ones")
    session.close()
    output = session.output()
    assert "before the answers" in output and "in a fresh process" in output
    assert "[4, 2]" not in output and "ones" not in output
    assert "not shown: the output that followed the grader's stock parts" in output


def test_a_process_given_no_answers_shows_all_it_printed(session_for):
    session = session_for(PRINTER)
    session.call("show", "first")
    session.define("helpers", "X = 1\n")  # a helper, not answers
    session.call("show", "second")
    session.close()
    assert "first" in session.output() and "second" in session.output()
    assert "not shown" not in session.output()


REWRITER = """
import os

START = 0

def pad():
    global START
    START = os.lseek(1, 0, os.SEEK_CUR)
    os.write(1, b"." * 64)

def rewrite(text):
    os.pwrite(1, text.encode(), START)
"""


def test_answers_written_over_what_a_process_printed_before_them_stay_out_of_the_report(session_for):
    """A red team padded its output before the stock parts arrived, then wrote their source
    over the padding with os.pwrite: output read when the process ended carried it."""
    session = session_for(REWRITER)
    session.call("pad")
    session.define("stock", "def split_heads(x, h):\n    return x\n", answers=True)
    session.call("rewrite", "def split_heads(x, h)")
    session.close()
    assert "." * 64 in session.output() and "split_heads" not in session.output()


def test_a_checkout_the_student_s_process_may_read_is_hidden_but_for_what_it_runs_on(tmp_path, monkeypatch):
    # A checkout inside a folder its process may read (under /usr, say; or graded from its
    # root): hiding it whole would hide the virtual environment the process runs on, so each
    # other entry is hidden: the .git and tests that hold the suite's text, other classes' folders.
    from grader.sandbox import workspace

    checkout = tmp_path / "grader-checkout"
    for folder in (".venv/lib/site-packages", ".git/objects", "tests", "reference", "section-a/bob"):
        (checkout / folder).mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("")
    (checkout / "elsewhere").symlink_to("/usr")  # an empty mount over a link would cover /usr
    monkeypatch.setattr(landlock, "readable_roots", lambda: ["/usr", str(checkout / ".venv/lib/site-packages")])
    workspace._holds_python_or_grader.cache_clear()
    try:
        assert workspace._coverable(str(checkout), tmp_path / "scratch") == [
            str(checkout / name) for name in (".git", "pyproject.toml", "reference", "section-a", "tests")]
        assert workspace._coverable(str(checkout / "section-a"), tmp_path / "scratch") == [str(checkout / "section-a")]
    finally:
        workspace._holds_python_or_grader.cache_clear()


def test_the_student_s_uid_is_nobody_s_where_the_user_namespace_maps_no_such_uid(monkeypatch):
    # A rootless container maps 65,536 uids: 2**24 + pid is not among them, and setresuid would fail.
    import builtins
    import io

    real_open = builtins.open
    maps = {"/proc/self/uid_map": "0 1000 1\n1 100000 65536\n", "/proc/self/gid_map": "0 1000 1\n1 100000 65536\n"}
    monkeypatch.setattr(builtins, "open", lambda path, *a, **k: io.StringIO(maps[path]) if path in maps
                        else real_open(path, *a, **k))
    assert namespaces.student_uid() == namespaces.NOBODY
    maps["/proc/self/uid_map"] = maps["/proc/self/gid_map"] = "0 0 4294967295\n"  # the machine's own
    assert namespaces.student_uid() == namespaces.STUDENT_UID_BASE + os.getpid()
