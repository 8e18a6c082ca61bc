"""Child processes for the installer: argv lists (never a shell), timeouts, a transcript, and a
Ctrl-C that stops the child cleanly before the caller rolls back.

The child runs in its own session, so a Ctrl-C at the terminal reaches only mlprobe; mlprobe then
stops the child (SIGINT, then SIGTERM, then SIGKILL) and only after that restores the environment.
That order matters: restoring while pip still writes would race it.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Deque, Dict, List, Optional, TextIO

from ..urls import mask_credentials

STOP_GRACE_S = 8.0


class StepTimeout(Exception):
    def __init__(self, argv: List[str], seconds: float) -> None:
        super().__init__(f"{argv[0]} did not finish within {seconds:g} s")
        self.argv = argv
        self.seconds = seconds


class Transcript:
    """The install log: every command, its output, and what mlprobe decided. A Transcript without a
    path writes nothing (the dry run must not touch the disk)."""

    def __init__(self, path: Optional[Path]) -> None:
        self.path = path
        self._fh: Optional[TextIO] = None
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            # A transcript holds commands, paths and pip's output: readable by this user only.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._fh = open(fd, "a", encoding="utf-8", errors="replace")

    def write(self, text: str) -> None:
        if self._fh is None:
            return
        text = mask_credentials(text)
        with self._lock:
            self._fh.write(text if text.endswith("\n") else text + "\n")
            self._fh.flush()

    def note(self, text: str) -> None:
        self.write(f"[{time.strftime('%H:%M:%S')}] {text}")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _signal_group(proc: "subprocess.Popen[str]", sig: int) -> None:
    try:
        if os.name == "posix":
            os.killpg(proc.pid, sig)
        elif sig == signal.SIGINT:
            proc.send_signal(signal.CTRL_BREAK_EVENT)  # type: ignore[attr-defined]
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError, OSError):
        pass


class NoInterrupt:
    """Ctrl-C (and SIGTERM) wait while a child is being stopped or an environment put back: a second
    Ctrl-C must not leave pip writing while mlprobe restores."""

    def __enter__(self) -> "NoInterrupt":
        self._old: Dict[int, object] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    self._old[sig] = signal.signal(sig, signal.SIG_IGN)
                except (ValueError, OSError):
                    pass
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def stop_child(proc: "subprocess.Popen[str]") -> None:
    """SIGINT (pip rolls back the package it is on), then SIGTERM, then SIGKILL; always reaps."""
    with NoInterrupt():
        _stop_child(proc)


def _stop_child(proc: "subprocess.Popen[str]") -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        if proc.poll() is not None:
            return
        _signal_group(proc, sig)
        try:
            proc.wait(timeout=STOP_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue
    if proc.poll() is None:
        _signal_group(proc, signal.SIGKILL if os.name == "posix" else signal.SIGTERM)
        proc.wait()


class Result:
    def __init__(self, argv: List[str], rc: int, tail: List[str], seconds: float) -> None:
        self.argv = argv
        self.rc = rc
        self.tail = tail
        self.seconds = seconds

    @property
    def output(self) -> str:
        return "".join(self.tail)


# On Linux a child that changes an environment must not outlive mlprobe (kill -9, a closed terminal),
# nor must its own children (`pip --python` runs a second pip). A small supervisor asks the kernel for
# SIGTERM when mlprobe dies (checking mlprobe's pid after asking, in case it died in between), runs
# the command in its own process group, and on SIGTERM or SIGHUP kills that whole group. Ctrl-C goes
# to the group as before and reaches the command itself.
_SUPERVISOR = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)\n"  # PR_SET_PDEATHSIG
    "if os.getppid() != int(sys.argv[1]): sys.exit(137)\n"
    "def end(signum, frame):\n"
    "    os.killpg(0, signal.SIGKILL)\n"
    "signal.signal(signal.SIGTERM, end)\n"
    "signal.signal(signal.SIGHUP, end)\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "    signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
    "    signal.signal(signal.SIGHUP, signal.SIG_DFL)\n"
    "    try:\n"
    "        os.execvp(sys.argv[2], sys.argv[2:])\n"
    "    except OSError as exc:\n"
    "        sys.stderr.write(str(exc) + '\\n'); os._exit(127)\n"
    "signal.signal(signal.SIGINT, lambda signum, frame: os.kill(pid, signal.SIGINT))\n"  # aimed at it alone
    "while True:\n"
    "    try:\n"
    "        _, status = os.waitpid(pid, 0); break\n"
    "    except InterruptedError:\n"
    "        continue\n"
    "if os.WIFSIGNALED(status):\n"
    "    sig = os.WTERMSIG(status)\n"
    "    signal.signal(sig, signal.SIG_DFL); os.kill(os.getpid(), sig)\n"
    "sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)\n"
)


def die_with_parent(argv: List[str]) -> List[str]:
    """argv wrapped so that the process is killed when mlprobe dies (Linux); argv elsewhere."""
    if not sys.platform.startswith("linux") or not argv:
        return argv
    return [sys.executable, "-I", "-S", "-c", _SUPERVISOR, str(os.getpid()), *argv]


def run_logged(
    argv: List[str],
    *,
    timeout: float,
    transcript: Transcript,
    env: Optional[Dict[str, str]] = None,
    on_line: Optional[Callable[[str], None]] = None,
    on_start: Optional[Callable[["subprocess.Popen[str]"], None]] = None,
    keep_lines: int = 400,
) -> Result:
    """Run argv, streaming its merged output into the transcript (and on_line). Raises StepTimeout,
    or KeyboardInterrupt after the child has stopped."""
    transcript.note("$ " + " ".join(argv))
    tail: Deque[str] = collections.deque(maxlen=keep_lines)
    started = time.perf_counter()
    kwargs: Dict[str, object] = {}
    if os.name == "posix":
        kwargs["start_new_session"] = True
    else:
        kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
    proc = subprocess.Popen(
        die_with_parent(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env=env, text=True, encoding="utf-8", errors="replace", bufsize=1, **kwargs,  # type: ignore[call-overload]
    )
    if on_start is not None:
        on_start(proc)

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line)
            transcript.write(line)
            if on_line is not None:
                try:
                    on_line(line.rstrip("\n"))
                except Exception:
                    pass

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    deadline = started + timeout
    try:
        while True:
            try:
                rc = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if time.perf_counter() > deadline:
                    transcript.note(f"timeout after {timeout:g} s: stopping {argv[0]}")
                    stop_child(proc)
                    reader.join(timeout=2)
                    raise StepTimeout(argv, timeout) from None
    except KeyboardInterrupt:
        transcript.note("interrupted: stopping the child process")
        stop_child(proc)
        reader.join(timeout=2)
        raise
    reader.join(timeout=0.5)
    # the leader is done: anything it left in its group (a daemon, a child holding its output) goes too
    _signal_group(proc, signal.SIGKILL)
    reader.join(timeout=5)
    seconds = time.perf_counter() - started
    transcript.note(f"exit {rc} after {seconds:.1f} s")
    return Result(argv, rc, list(tail), seconds)


def run_quiet(argv: List[str], timeout: float, env: Optional[Dict[str, str]] = None,
              stdin: Optional[str] = None) -> "subprocess.CompletedProcess[str]":
    """A short query (interpreter facts, pip index versions): output captured, nothing logged;
    `stdin` is the text given on standard input (none by default)."""
    kwargs: Dict[str, object] = {}
    if os.name == "posix":
        kwargs["start_new_session"] = True
    else:
        kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL, text=True,
                            encoding="utf-8", errors="replace", env=env, **kwargs)  # type: ignore[call-overload]
    end = time.monotonic() + timeout
    gone: Optional[float] = None  # when the leader exited while something of its group held the output
    given = stdin  # handed over by the first communicate() only (a second may not send input)
    try:
        while True:
            try:
                out, err = proc.communicate(input=given, timeout=max(0.0, min(0.05, end - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                given = None
                now = time.monotonic()
                if proc.poll() is not None:
                    gone = gone or now
                    if now - gone >= 0.2:  # the answer came from the leader: the rest of its group goes
                        _signal_group(proc, signal.SIGKILL)
                        out, err = proc.communicate()
                        break
                if now >= end:
                    _signal_group(proc, signal.SIGKILL)
                    proc.communicate()
                    raise subprocess.TimeoutExpired(argv, timeout) from None
    finally:
        _signal_group(proc, signal.SIGKILL)  # its own group, ended whether the leader still runs or not
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def child_env(extra: Optional[Dict[str, str]] = None, drop: Optional[List[str]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    for k in drop or []:
        env.pop(k, None)
    env.update(extra or {})
    env.setdefault("PYTHONIOENCODING", "utf-8")
    return env


def python_quiet_env() -> Dict[str, str]:
    """For interpreter queries: write no bytecode anywhere."""
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONPATH", None)
    return env

