"""Running an argv list (never a shell) with a hard timeout that ends the whole process group, and
a cap on what is kept of its output: the pipes are read as the tool writes, and a tool that prints
more than the cap is stopped there (a `rocminfo` printing a gigabyte, an `nvidia-smi` that never
stops), so memory stays near the cap instead of growing with the output.

Every child started here is tracked until mlprobe exits: its process group is ended when it is
done (whether its leader is still alive or already exited: a child of the tool that holds its
output, a daemon it forked), when the thread waiting for it is abandoned (a probe past the scan's
deadline), and at exit. A thread that was abandoned starts no further tool."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import weakref
from typing import IO, Any, Dict, Iterable, List, Optional

# What is kept of a tool's output unless the caller says otherwise (a capture's own max_bytes).
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
# stderr is only read for an error message: its head is kept, the rest read and dropped.
MAX_STDERR_BYTES = 256 * 1024
_CHUNK = 64 * 1024
# A tool whose leader exited while something it started still holds its output open: how long that
# output is still read before the group is ended (the answer came from the leader).
LEADER_GONE_GRACE_S = 0.2

# pid -> (the child, the thread waiting for it): every child started here, until its group is ended
_children: "Dict[int, tuple[subprocess.Popen[Any], Optional[threading.Thread]]]" = {}
_abandoned: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()
_lock = threading.Lock()
_atexit_registered = False


class NotStarted(OSError):
    """A tool was asked for by a thread that was abandoned (its probe passed the scan's deadline)."""


def track(proc: "subprocess.Popen[Any]") -> None:
    """Keep `proc` (which leads its own process group) until its group is ended; at exit at the latest."""
    global _atexit_registered
    with _lock:
        _children[proc.pid] = (proc, threading.current_thread())
        if not _atexit_registered:
            import atexit

            atexit.register(end_all)
            _atexit_registered = True


def _wait_for(proc: "subprocess.Popen[Any]") -> None:
    """The current thread waits for `proc`: abandoning this thread ends the child."""
    with _lock:
        if proc.pid in _children:
            _children[proc.pid] = (proc, threading.current_thread())


def end_group(proc: "subprocess.Popen[Any]") -> None:
    """End the child's whole process group, whether its leader still runs or has exited (a child of
    the tool may still hold its output). The group's id stays the leader's pid for as long as any
    member lives, and Linux does not hand that pid to a new process meanwhile; once the group is
    empty, killpg finds nothing (ESRCH)."""
    if os.name == "posix":
        import signal

        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    if proc.poll() is None:
        try:
            proc.kill()
        except OSError:
            pass
    with _lock:
        _children.pop(proc.pid, None)


def abandon(threads: Iterable[threading.Thread]) -> int:
    """These threads are given up on (the scan's deadline passed): the children they wait for are ended
    with their groups, and they start no further tool. Returns how many children were ended."""
    gone = set(threads)
    with _lock:
        for t in gone:
            _abandoned.add(t)
        ended = [p for p, owner in _children.values() if owner in gone]
    for proc in ended:
        end_group(proc)
    return len(ended)


def end_all() -> None:
    """At exit: the group of every child still tracked is ended; nothing mlprobe started outlives it."""
    with _lock:
        procs = [p for p, _ in _children.values()]
    for proc in procs:
        end_group(proc)


class OutputCapped(Exception):
    """The tool printed more than the cap on stdout; it was stopped. Holds what was kept."""

    def __init__(self, stdout: bytes, stderr: bytes, limit: int, returncode: Optional[int]) -> None:
        super().__init__(f"more than {limit} bytes of output")
        self.stdout, self.stderr, self.limit, self.returncode = stdout, stderr, limit, returncode


def run_argv(argv: list[str], timeout: float, env: Optional[Dict[str, str]] = None,
             cwd: Optional[str] = None, max_bytes: int = DEFAULT_MAX_BYTES) -> "tuple[int, bytes, bytes]":
    """Run an argv list (never a shell) with a hard timeout that also ends its children.

    subprocess.run(timeout=...) kills only the direct child and then waits for the pipes, which a
    grandchild (a wrapper script's `sleep`, a daemon) can hold open forever; so the child gets its
    own process group and the whole group is killed. Raises subprocess.TimeoutExpired, and
    OutputCapped when stdout passes max_bytes (the tool is stopped at once)."""
    return finish_argv(start_argv(argv, env, cwd), timeout, max_bytes)


def start_argv(argv: list[str], env: Optional[Dict[str, str]] = None,
               cwd: Optional[str] = None) -> "subprocess.Popen[bytes]":
    """Start an argv list (never a shell) in its own process group, its output piped; tracked until its
    group is ended. NotStarted when the calling thread was abandoned."""
    if threading.current_thread() in _abandoned:
        raise NotStarted(f"{os.path.basename(argv[0])} not started: the scan's deadline had passed")
    kwargs: Dict[str, Any] = {}
    if os.name == "posix":
        kwargs["start_new_session"] = True
    else:
        kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=env, cwd=cwd, **kwargs)
    track(proc)
    return proc


def finish_argv(proc: "subprocess.Popen[bytes]", timeout: float,
                max_bytes: int = DEFAULT_MAX_BYTES) -> "tuple[int, bytes, bytes]":
    """Wait for a started argv (at most `timeout` seconds; past it its process group is killed and
    subprocess.TimeoutExpired raised): (returncode, stdout, stderr), stdout capped as run_argv's."""
    out, err = communicate_or_kill(proc, timeout, max_bytes)
    return proc.returncode, out, err


class _Reader(threading.Thread):
    """Reads one pipe to its end in chunks, keeping at most `keep` bytes; `over` is set when more came."""

    def __init__(self, pipe: IO[bytes], keep: int, over: Optional[threading.Event]) -> None:
        super().__init__(daemon=True, name="mlprobe-pipe")
        self.pipe, self.keep, self.over = pipe, keep, over
        self.chunks: List[bytes] = []
        self.size = 0

    def run(self) -> None:
        read = getattr(self.pipe, "read1", self.pipe.read)
        try:
            while True:
                chunk = read(_CHUNK)
                if not chunk:
                    return
                room = self.keep - self.size
                if room > 0:
                    self.chunks.append(chunk[:room])
                    self.size += min(room, len(chunk))
                if len(chunk) > room and self.over is not None:
                    self.over.set()
                    return  # the tool is being stopped; nothing more is read
        except (OSError, ValueError):
            return

    def data(self) -> bytes:
        return b"".join(self.chunks)


def communicate_or_kill(proc: "subprocess.Popen[bytes]", timeout: float,
                        max_bytes: int = DEFAULT_MAX_BYTES,
                        exit_grace: Optional[float] = None) -> "tuple[bytes, bytes]":
    """The child's (stdout, stderr), read as it writes, within `timeout` seconds. Past the time limit
    the child's whole process group is killed (so its pipes close) and subprocess.TimeoutExpired is
    raised; past `max_bytes` of stdout it is killed the same way and OutputCapped is raised with
    the first max_bytes.

    exit_grace: a child that closes both pipes before it exits (its answer is complete; what is left
    is its own teardown, such as a GPU driver's) is waited for at most this long after that; then
    the output is returned with proc.returncode still None, and the child ends on its own."""
    over = threading.Event()
    out_r = _Reader(proc.stdout, max_bytes, over) if proc.stdout is not None else None
    err_r = _Reader(proc.stderr, MAX_STDERR_BYTES, None) if proc.stderr is not None else None
    readers = [r for r in (out_r, err_r) if r is not None]
    for r in readers:
        r.start()
    _wait_for(proc)
    deadline = time.monotonic() + timeout
    # The pipes close when the tool exits (or, with exit_grace, when it is done writing): waiting on
    # the readers wakes the moment that happens. (Popen.wait(timeout) polls, at most every 50 ms: a
    # 30 ms nvidia-smi query would often cost 50.) A grandchild that keeps a pipe open is waited for
    # until the deadline, then killed with the group.
    # While a pipe is open the leader is also looked at (every 50 ms): when it has exited but something
    # it started holds the pipe, the group is ended after a short grace and the output read so far kept.
    leader_gone: Optional[float] = None
    for r in readers:
        while r.is_alive() and not over.is_set():
            now = time.monotonic()
            if now >= deadline:
                break
            r.join(timeout=min(deadline - now, 0.05))
            if r.is_alive() and proc.poll() is not None:
                leader_gone = leader_gone or time.monotonic()
                if time.monotonic() - leader_gone >= LEADER_GONE_GRACE_S:
                    end_group(proc)  # the pipes close with the group: the readers end
                    r.join(timeout=2)
        if over.is_set():
            break
    capped = over.is_set()
    closed_at: Optional[float] = None
    if not capped and not any(r.is_alive() for r in readers):
        closed_at = time.monotonic()
        grace = max(0.0, deadline - closed_at)
        if exit_grace is not None:
            grace = min(grace, exit_grace)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            if exit_grace is None:
                closed_at = None  # closed its output but would not end: it ran out of time
    finished = closed_at is not None and (proc.returncode is not None or exit_grace is not None)
    if not finished:
        kill_tree(proc)
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
    elif proc.returncode is not None:
        end_group(proc)  # the leader is done: anything it left running in its group goes with it
    for r in readers:
        r.join(timeout=2)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass
    out = out_r.data() if out_r is not None else b""
    err = err_r.data() if err_r is not None else b""
    if capped:
        raise OutputCapped(out, err, max_bytes, proc.returncode)
    if not finished:
        raise subprocess.TimeoutExpired(proc.args, timeout, output=out, stderr=err)
    return out, err


def kill_tree(proc: "subprocess.Popen[Any]") -> None:
    end_group(proc)
