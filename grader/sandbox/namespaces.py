"""Linux namespaces for the student's process: its own view of the machine, with nothing in it.

:func:`enter` moves the rest of the student's process into new namespaces:

- **network**: only a loopback interface that is down; sockets can be created but reach
  nothing, not even the grader's machine through 127.0.0.1;
- **PID**: the student's process is PID 1 of a new PID namespace, forked straight into it by
  :func:`fork_init`. It cannot name, signal or trace the grader's processes, and when it
  ends the kernel kills every process in the namespace, including those that called
  ``setsid()`` to leave the process group. As PID 1, it is sent no signal from inside its
  namespace (its own code, or its children) that it has no handler for: only the kernel
  (a fault, a limit) and the grader end it, so the grader's words for how it ended stay exact;
- **IPC**: System V shared memory, semaphores and message queues, and POSIX message
  queues, of its own. The kernel destroys them with the namespace, once the student's
  process and whatever it started have ended: none outlives it (shared memory left on the
  machine) or reaches the next submission's process. POSIX shared memory and semaphores are
  files in ``/dev/shm``, which is the process's own below;
- **mount**: a root of its own, built afresh: an empty tmpfs holding, read-only, only what
  Landlock lets it read (its Python, wherever it lives, and the system's folders), so that
  nothing else on the machine exists for it: not the grader's checkouts or the class's
  folders, nor a service's unix socket in /run or /var (a read-only mount would not stop a
  connect, and the service would see root); a fresh ``/proc`` that lists only the namespace's
  processes (so neither the grader's memory nor its environment is one path away); its own
  ``/dev``; a size-capped tmpfs over its scratch directory, another as ``/tmp`` (code that writes
  there: a tutorial's checkpoint, torch's caches) and another as ``/dev/shm`` (where torch's
  DataLoader workers and ``multiprocessing`` share tensors and semaphores), the only writable
  places (the disk cap), all gone with the process; and an empty, unreadable tmpfs over each
  hidden path (the reference) that lies inside what it may read, whatever else protects it.

Then the process drops every capability and becomes a uid of its own, no user of the
machine's: unable to mount, unmount, trace or override file permissions, it reads only what
every user may (its Python's folders are reached through its root's own, open ones), and a
service that trusts its callers' uid sees nobody. Needs root; :func:`namespaces_available`
probes once.
"""

from __future__ import annotations

import ctypes
import functools
import os
import tempfile
import time

from grader.sandbox import cgroups, landlock

CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWIPC = 0x00020000, 0x40000000, 0x20000000, 0x08000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT, _MS_BIND = 1, 2, 4, 8, 32, 4096
_MS_REC, _MS_PRIVATE = 1 << 14, 1 << 18
_SYS_MOUNT_SETATTR, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = 442, 0x8000, 0x1
_SYS_PIVOT_ROOT, _MNT_DETACH = 155, 2
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, _PR_SET_DUMPABLE = 24, 47, 4, 4
STUDENT_UID_BASE = 1 << 24  # above any uid a machine gives its users; plus a pid (< 2**22)
NOBODY = 65534
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
DEVICES = ("null", "zero", "full", "random", "urandom")  # what a submission's code may open in /dev
GPU_DEVICES = ("nvidia", "dri", "kfd")  # CUDA: nvidiactl, nvidia0, nvidia-uvm, nvidia-caps/...; ROCm: kfd, dri/
# What the student's uid 0 could read without any capability, and no submission needs: the
# machine's password hashes and SSH keys (their owner's permissions are root's), the kernel's
# trace buffers, the cgroups, which list every submission graded beside it and its usage, the
# flags and owners of every physical page (a channel between submissions graded at the same
# time), and every process's timers, by pid and name.
MACHINE_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/ssh",
                   "/sys/kernel/tracing", "/sys/kernel/debug", "/sys/fs/cgroup",
                   "/proc/kpageflags", "/proc/kpagecount", "/proc/kpagecgroup", "/proc/timer_list")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _unshare(flags: int) -> None:
    _check(_libc().unshare(flags), "unshare")


def _mount(source: str, target: str, fstype: str | None, flags: int, options: str | None = None) -> None:
    _check(_libc().mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                         options.encode() if options else None), f"mount {target}")


def _build_view(scratch: str, scratch_bytes: int, scratch_files: int, hidden_paths: tuple[str, ...],
                owner: int) -> tuple[str, ...]:
    """The student's filesystem, a root of its own (see the module's docstring), its writable
    places ``owner``'s; returns them. Runs in the first process of the new PID namespace, so
    the fresh /proc shows that namespace."""
    _set_read_only("/", recursive=True, private=True)  # the machine's mounts, all of them
    caps = f"size={scratch_bytes},nr_inodes={scratch_files},uid={owner},gid={owner}"
    new = scratch  # the new root's mount point, for now: a directory no process else uses
    _mount("root", new, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,nr_inodes=4096,mode=755")
    # Its own /tmp first: a Python or virtual environment under the machine's /tmp is bound into it.
    os.mkdir(f"{new}/tmp")
    _mount("tmp", f"{new}/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, f"{caps},mode=1777")
    shown: list[str] = []
    # Real folders first, parents before children, then those reached through a link.
    roots = [path for path in landlock.readable_roots() if path not in ("/proc", "/dev")]  # its own, below
    for path in sorted(roots, key=lambda path: (os.path.realpath(path) != path, path.count("/"), path)):
        _show(new, path, shown)
    # Read-only: the kernel's settings under /proc/sys check only their files' modes, which
    # give root's uid 0 write access without any capability (a core_pattern that pipes to a
    # program of the student's would run it as root, outside every namespace).
    os.mkdir(f"{new}/proc")
    _mount("proc", f"{new}/proc", "proc", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    _own_dev(new, caps)
    _name_the_user(new, owner, scratch)
    _enter_root(new)
    # From here on, paths are the new root's (a link there leads where it leads for the student).
    os.makedirs(scratch, mode=0o700, exist_ok=True)
    _mount("scratch", scratch, "tmpfs", _MS_NOSUID | _MS_NODEV, f"{caps},mode=700")
    for path in (*hidden_paths, *MACHINE_SECRETS):  # where one lies inside what it may read
        if os.path.isdir(path):
            _mount("hidden", path, "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "size=4k,mode=000")
        elif os.path.isfile(path):
            _mount(os.devnull, path, None, _MS_BIND)
    _set_read_only("/", recursive=False)  # the new root itself; the mounts on it keep their own modes
    return scratch, "/tmp", "/dev/shm"


def _show(new: str, path: str, shown: list[str], depth: int = 0) -> None:
    """Make ``path`` resolve under ``new`` as it does on the machine: each symbolic link on the
    way copied as a link (merged /usr's /lib, a virtual environment linked from elsewhere), the
    directory it reaches bound read-only, with everything beneath it."""
    if depth > 40 or any(path == done or path.startswith(done.rstrip("/") + "/") for done in shown):
        return
    parts = path.strip("/").split("/")
    for index in range(1, len(parts) + 1):
        prefix = "/" + "/".join(parts[:index])
        if os.path.islink(prefix):
            link = os.readlink(prefix)
            os.makedirs(os.path.dirname(f"{new}{prefix}"), exist_ok=True)
            if not os.path.lexists(f"{new}{prefix}"):
                os.symlink(link, f"{new}{prefix}")
            target = os.path.normpath(os.path.join(os.path.dirname(prefix), link, *parts[index:]))
            _show(new, target, shown, depth + 1)
            return
    if not os.path.isdir(path):
        return
    os.makedirs(f"{new}{path}", exist_ok=True)
    _mount(path, f"{new}{path}", None, _MS_BIND | _MS_REC)
    _set_read_only(f"{new}{path}", recursive=True)
    shown.append(path)


def _name_the_user(new: str, owner: int, home: str) -> None:
    """The machine's /etc/passwd and /etc/group with ``owner`` in them as ``student``, so that
    code that looks its user up (``pwd.getpwuid(os.getuid())``, ``whoami``) finds one."""
    for name, entry in (("passwd", f"student:x:{owner}:{owner}:student:{home}:/bin/sh\n"),
                        ("group", f"student:x:{owner}:\n")):
        source = f"{new}/{name}"
        try:
            with open(f"/etc/{name}") as machine:
                text = machine.read()
            with open(source, "w") as file:
                file.write(text if text.endswith("\n") or not text else text + "\n")
                file.write(entry)
            _mount(source, f"{new}/etc/{name}", None, _MS_BIND)
        except OSError:
            pass  # no such file here, or one too large for the root's tmpfs: a user without a name
        finally:
            if os.path.lexists(source):
                os.unlink(source)  # a mount keeps it


def _enter_root(new: str) -> None:
    """Make ``new`` this process's root, and the machine's root unreachable."""
    os.chdir(new)
    _check(_libc().syscall(_SYS_PIVOT_ROOT, b".", b"."), "pivot_root")  # the old root now lies beneath "."
    _check(_libc().umount2(b".", _MNT_DETACH), "umount the machine's root")
    os.chdir("/")


def _set_read_only(path: str, recursive: bool, private: bool = False) -> None:
    """The mount at ``path`` read-only (and, ``recursive``, every mount beneath it); ``private``:
    and no mount event of this namespace reaching the grader's, nor one of the grader's this."""
    attr = _MountAttr(attr_set=_MOUNT_ATTR_RDONLY, propagation=_MS_PRIVATE if private else 0)
    _check(_libc().syscall(_SYS_MOUNT_SETATTR, -100, path.encode(), _AT_RECURSIVE if recursive else 0,
                           ctypes.byref(attr), ctypes.sizeof(attr)), f"mount_setattr {path}")


def _own_dev(new: str, shm_caps: str) -> None:
    """A /dev of the student's own, under the new root ``new``: the devices code opens, a GPU's
    where the machine has one, an empty ``/dev/shm`` capped by ``shm_caps`` (a tmpfs's size,
    nr_inodes and owner), and nothing else. The machine's /dev holds its disks, whose owner's permissions let uid 0
    read them without any capability (every file on them, the reference's included, past
    every mount that covers one), and devices whose ioctls reach far into the kernel (KVM,
    loop devices, userfaultfd) or that all processes share (ptys: a submission opened every one)."""
    dev = f"{new}/dev"
    kept = [name for name in os.listdir("/dev") if name in DEVICES or name.startswith(GPU_DEVICES)]
    os.mkdir(dev)
    _mount("dev", dev, "tmpfs", _MS_NOSUID | _MS_NOEXEC, "size=64k,nr_inodes=256,mode=755")
    for name in kept:
        source, target = f"/dev/{name}", f"{dev}/{name}"
        if os.path.isdir(source):
            os.mkdir(target)
        else:
            open(target, "x").close()  # where the device is bound
        _mount(source, target, None, _MS_BIND | _MS_REC)
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{number}", f"{dev}/{name}")
    os.symlink("/proc/self/fd", f"{dev}/fd")
    os.mkdir(f"{dev}/shm")  # POSIX shared memory, this process's alone: its mount namespace's
    _mount("shm", f"{dev}/shm", "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, f"{shm_caps},mode=1777")
    _mount("dev", dev, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NOEXEC)


def student_uid() -> int:
    """A uid (and gid) of the student's process's own, from its pid on the machine: no file is
    its, so only what every user may read stays readable (not a key only root may read), a
    service that trusts its callers' uid sees nobody, and the kernel's budgets per user (pipe
    buffers, descriptors in flight, epoll watches) are its alone. ``nobody`` where this user
    namespace maps no such uid (a rootless container). Read before its /proc replaces the machine's."""
    uid = STUDENT_UID_BASE + int(os.readlink("/proc/self"))
    with open("/proc/self/uid_map") as ranges, open("/proc/self/gid_map") as group_ranges:
        mapped = [[(int(start), int(count)) for start, _, count in (line.split() for line in lines)]
                  for lines in (ranges, group_ranges)]
    return uid if all(any(start <= uid < start + count for start, count in each) for each in mapped) else NOBODY


def gpu_groups() -> list[int]:
    """The groups, root's aside, that own the machine's GPU devices (``render`` and ``video``
    where ROCm's and some CUDA installs open them only to those): the student's process keeps
    them, so it can still use the GPU it is graded on. Read before its /dev replaces the machine's."""
    paths = [f"/dev/{name}" for name in os.listdir("/dev") if name.startswith(GPU_DEVICES)]
    paths += [os.path.join(path, name) for path in paths if os.path.isdir(path) for name in os.listdir(path)]
    return sorted({os.stat(path).st_gid for path in paths if os.path.exists(path)} - {0})


def drop_privileges(uid: int, groups: list[int]) -> None:
    """No capability left, now or after an exec (the bounding set is emptied too), ``uid`` as
    every uid and gid, and only ``groups`` besides."""
    libc = _libc()
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        _check(libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), "PR_CAPBSET_DROP")
    _check(libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "PR_CAP_AMBIENT")
    os.setgroups(groups)
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # which also empties the permitted and effective capabilities
    # A process whose uid changed is no longer dumpable, which gives its /proc/self to root:
    # its own descriptors (/proc/self/fd, /dev/stdin) would be out of its reach.
    _check(libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "PR_SET_DUMPABLE")
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; two 32-bit words each
    _check(libc.capset(header, data), "capset")


def fork_init(wait_s: float = 2.0) -> int:
    """fork, the child as PID 1 of a new PID namespace, which its later children join.
    This process's own later children stay in its namespace. Retries while the pids cgroup is
    full (of a killed child's processes that have not finished dying)."""
    own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            # Room first: a failed first fork into a new PID namespace breaks it for good
            # (every later fork gets ENOMEM).
            cgroups.wait_for_room(1, max(0.0, deadline - time.monotonic()))
            _unshare(CLONE_NEWPID)
            pid = -1
            try:
                pid = os.fork()
                return pid
            except BlockingIOError:  # EAGAIN: the cgroup is full; that namespace is now broken
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)
            finally:
                if pid != 0:  # back to this process's own namespace for its next children
                    _check(_libc().setns(own, CLONE_NEWPID), "setns")
    finally:
        os.close(own)


def enter(scratch: str, scratch_bytes: int, scratch_files: int, hidden_paths: tuple[str, ...]) -> tuple[str, ...]:
    """In the child of :func:`fork_init`: continue in new network, mount and IPC namespaces,
    with a fresh tmpfs as ``scratch`` and as the working directory, no capability, and a uid
    of its own (:func:`student_uid`). Returns the directories it may write: ``scratch``,
    ``/tmp`` and ``/dev/shm``, each a tmpfs of its own, capped alike."""
    _unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC)
    uid, groups = student_uid(), gpu_groups()
    writable = _build_view(scratch, scratch_bytes, scratch_files, hidden_paths, uid)
    drop_privileges(uid, groups)
    os.chdir(scratch)  # the tmpfs, not the directory it covers
    return writable


@functools.cache
def namespaces_available() -> bool:
    """Whether a child of this process can build the student's namespaces (probed, in full,
    in a throwaway fork)."""
    scratch = tempfile.mkdtemp(prefix="namespaces-probe-")
    try:
        pid = os.fork()
        if pid == 0:
            try:
                if fork_init() == 0:
                    try:
                        enter(scratch, 2**20, 64, ())
                    except BaseException:
                        os._exit(1)
                    os._exit(0)
                _, status = os.waitpid(-1, 0)
                os._exit(os.waitstatus_to_exitcode(status))
            except BaseException:
                os._exit(1)
        _, status = os.waitpid(pid, 0)
    finally:
        os.rmdir(scratch)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
