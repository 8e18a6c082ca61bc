"""Running an argv list (never a shell) with a hard timeout that ends the whole process group, and
a cap on what is kept of its output: the pipes are read as the tool writes, and a tool that prints
more than the cap is stopped there (a `rocminfo` printing a gigabyte, an `nvidia-smi` that never
stops), so memory stays near the cap instead of growing with the output."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from typing import IO, Any, Dict, List, Optional

# What is kept of a tool's output unless the caller says otherwise (a capture's own max_bytes).
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
# stderr is only read for an error message: its head is kept, the rest read and dropped.
MAX_STDERR_BYTES = 256 * 1024
_CHUNK = 64 * 1024


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
    """Start an argv list (never a shell) in its own process group, its output piped."""
    kwargs: Dict[str, Any] = {}
    if os.name == "posix":
        kwargs["start_new_session"] = True
    else:
        kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=env, cwd=cwd, **kwargs)


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
    deadline = time.monotonic() + timeout
    # The pipes close when the tool exits (or, with exit_grace, when it is done writing): waiting on
    # the readers wakes the moment that happens. (Popen.wait(timeout) polls, at most every 50 ms: a
    # 30 ms nvidia-smi query would often cost 50.) A grandchild that keeps a pipe open is waited for
    # until the deadline, then killed with the group.
    for r in readers:
        r.join(timeout=max(0.0, deadline - time.monotonic()))
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
    if os.name == "posix":
        import signal

        try:
            os.killpg(proc.pid, signal.SIGKILL)
            return
        except OSError:
            pass
    try:
        proc.kill()
    except OSError:
        pass
