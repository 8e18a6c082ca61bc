"""Running an argv list (never a shell) with a hard timeout that ends the whole process group."""

from __future__ import annotations

import os
import subprocess
from typing import Any, Dict, Optional


def run_argv(argv: list[str], timeout: float, env: Optional[Dict[str, str]] = None,
             cwd: Optional[str] = None) -> "tuple[int, bytes, bytes]":
    """Run an argv list (never a shell) with a hard timeout that also ends its children.

    subprocess.run(timeout=...) kills only the direct child and then waits for the pipes, which a
    grandchild (a wrapper script's `sleep`, a daemon) can hold open forever; so the child gets its
    own process group and the whole group is killed. Raises subprocess.TimeoutExpired."""
    return finish_argv(start_argv(argv, env, cwd), timeout)


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


def finish_argv(proc: "subprocess.Popen[bytes]", timeout: float) -> "tuple[int, bytes, bytes]":
    """Wait for a started argv (at most `timeout` seconds; past it its process group is killed and
    subprocess.TimeoutExpired raised): (returncode, stdout, stderr)."""
    out, err = communicate_or_kill(proc, timeout)
    return proc.returncode, out, err


def communicate_or_kill(proc: "subprocess.Popen[bytes]", timeout: float) -> "tuple[bytes, bytes]":
    """proc.communicate() with a limit; past it the child's whole process group is killed (so its
    pipes close) and subprocess.TimeoutExpired is raised."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        try:
            proc.communicate(timeout=2)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            pass
        raise


def kill_tree(proc: "subprocess.Popen[bytes]") -> None:
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
