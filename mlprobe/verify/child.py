"""Start the verify payload in a target interpreter and read its event lines, with a deadline and a
stall limit. A child that crashes, hangs or prints garbage ends as a `ChildResult` saying so; no
exception from the child reaches the caller."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional

from ..model.jsontypes import JsonObject

if TYPE_CHECKING:
    from .overlap import TimingGate

# The payload package, run by its path in the target interpreter (its __main__ keeps sys.path free of
# the folder and of mlprobe itself).
PAYLOAD = Path(__file__).with_name("payload") / "__main__.py"
MARK = "@@mlprobe-verify@@ "
# The payload's event lines are small (a result is a few kB). Anything longer is not one, and a child
# that prints this much besides its events (a spewing `--python` target, a framework's endless log)
# is stopped: the output is read as it comes, never held whole.
MAX_LINE = 1024 * 1024
MAX_OTHER_OUTPUT = 64 * 1024 * 1024
MAX_STDERR_BYTES = 64 * 1024 * 1024
_OVERFLOW = "\0overflow"

# One event line of the payload, decoded: JSON from another interpreter, so a reader narrows each value
# (isinstance) before it uses it.
Event = JsonObject
EventSink = Callable[[Event], None]

# Windows NTSTATUS codes a crashed native extension leaves as the exit code.
_NT_CRASH = {0xC0000005: "access violation", 0xC00000FD: "stack overflow", 0xC000001D: "illegal instruction",
             0xC0000409: "stack buffer overrun", 0xC0000374: "heap corruption"}


@dataclass
class ChildResult:
    # The decoded event lines (each an Event). Typed loosely for verify/runner.py, which reads them without
    # narrowing; the other readers (devicecheck, doctor's enumeration) pass each one on as an Event.
    events: List[Dict[str, Any]] = field(default_factory=list)
    returncode: Optional[int] = None
    ended: str = "exit"  # exit | crash | hang | timeout | start-failed | overflow
    detail: str = ""  # signal name, or what failed to start
    stderr_tail: str = ""
    wall_s: float = 0.0

    @property
    def clean(self) -> bool:
        return self.ended == "exit" and any(e.get("event") == "done" for e in self.events)

    def how(self) -> str:
        """'crashed (SIGSEGV)', 'hung (no progress for 60 s)', ... for sentences."""
        if self.ended == "crash":
            return f"crashed ({self.detail})"
        if self.ended == "hang":
            return f"hung ({self.detail})"
        if self.ended == "timeout":
            return f"ran out of time ({self.detail})"
        if self.ended == "start-failed":
            return f"could not start ({self.detail})"
        if self.ended == "overflow":
            return f"was stopped ({self.detail})"
        if self.returncode:
            return f"exited with status {self.returncode} before finishing"
        return "stopped before finishing"

    def last_error_line(self) -> str:
        lines = [ln.strip() for ln in self.stderr_tail.splitlines() if ln.strip()]
        for ln in reversed(lines):
            if any(w in ln for w in ("Error", "error", "Fatal", "fatal", "Exception", "Abort", "abort")):
                return ln[:300]
        return lines[-1][:300] if lines else ""


def _crash_name(rc: int) -> Optional[str]:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    if os.name == "nt" and (rc & 0xFFFFFFFF) in _NT_CRASH:
        return _NT_CRASH[rc & 0xFFFFFFFF]
    return None


def _kill_tree(proc: "subprocess.Popen[str]") -> None:
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)  # the child leads its own session (start_new_session)
        else:
            proc.kill()
    except (OSError, ProcessLookupError):
        pass


def run_child(
    python: str,
    args: List[str],
    env: Optional[Mapping[str, str]] = None,
    timeout: float = 600.0,
    stall: float = 180.0,
    on_event: Optional[EventSink] = None,
    gate: Optional["TimingGate"] = None,
) -> ChildResult:
    """Run `python payload/__main__.py *args`; collect MARK-prefixed JSON lines from its stdout. With a
    `gate`, the child runs beside others and its timed loops wait for the gate (verify/overlap.py)."""
    if gate is None:
        return _run_child(python, args, env, timeout, stall, on_event, None)
    token = object()
    gate.join(token)
    try:
        return _run_child(python, args, env, timeout, stall, on_event, (gate, token))
    finally:
        gate.leave(token)


def _note_pauses(ev: Dict[str, Any], gated: "tuple[TimingGate, object]", stage_paused: List[float]) -> None:
    """A stage's record says how long the child was paused in it (`paused_s`) while another child
    timed: its own clock (a learning stage's `seconds`, every `stage_s`) counts that time too."""
    kind = ev.get("event")
    if kind == "stage":
        stage_paused[0] = gated[0].paused_s(gated[1])
    elif kind == "result" and isinstance(ev.get("data"), dict):
        during = gated[0].paused_s(gated[1]) - stage_paused[0]
        if during >= 0.001:
            ev["data"]["paused_s"] = round(during, 3)


def _run_child(
    python: str,
    args: List[str],
    env: Optional[Mapping[str, str]],
    timeout: float,
    stall: float,
    on_event: Optional[EventSink],
    gated: Optional["tuple[TimingGate, object]"],
) -> ChildResult:
    res = ChildResult()
    t0 = time.monotonic()
    full_env = dict(os.environ if env is None else env)
    full_env.setdefault("PYTHONIOENCODING", "utf-8")
    err = tempfile.TemporaryFile()
    kwargs: Dict[str, Any] = {}
    if os.name == "posix":
        kwargs["start_new_session"] = True
    else:
        kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    try:
        proc = subprocess.Popen(
            [python, str(PAYLOAD), *args], stdin=subprocess.PIPE if gated else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=err,
            env=full_env, encoding="utf-8", errors="replace", **kwargs,
        )
    except OSError as exc:
        err.close()
        res.ended, res.detail = "start-failed", str(exc)
        return res
    if gated is not None:
        gated[0].attach(gated[1], proc)
    paused = 0.0  # time paused by the gate (another child timing), already added to the clocks
    stage_paused = [0.0]  # the pause total when the current stage began

    lines: "queue.Queue[Optional[str]]" = queue.Queue()
    seen = [t0]  # when the child last printed a line that is no event

    def pump() -> None:
        """Lines of stdout, each at most MAX_LINE characters (the rest of a longer one is dropped), until
        the end or until MAX_OTHER_OUTPUT characters that are no event line have come."""
        assert proc.stdout is not None
        other = 0
        skipping = False  # inside a line longer than MAX_LINE
        try:
            while True:
                line = proc.stdout.readline(MAX_LINE)
                if not line:
                    break
                whole = line.endswith("\n")
                if skipping or not whole and len(line) >= MAX_LINE:
                    skipping = not whole
                    other += len(line)
                elif line.startswith(MARK):
                    lines.put(line)
                    continue
                else:
                    other += len(line)
                    seen[0] = time.monotonic()  # progress of a kind: the child is alive
                if other > MAX_OTHER_OUTPUT:
                    lines.put(_OVERFLOW)
                    return
        except (OSError, ValueError):
            pass
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    deadline = t0 + timeout
    last = t0
    allowed = stall  # a tick may announce a longer quiet spell (`next_s`): a slow device is not a hung one
    eof = False
    while not eof:
        if gated is not None:
            more = gated[0].paused_s(gated[1]) - paused
            if more > 0:  # paused while another child timed: neither its stall clock nor its limit ran
                paused += more
                last += more
                deadline += more
        now = time.monotonic()
        wait = min(deadline - now, last + allowed - now)
        if wait <= 0:
            _kill_tree(proc)
            if deadline - now <= 0:
                res.ended, res.detail = "timeout", f"no result within {timeout:g} s"
            else:
                res.ended, res.detail = "hang", f"no progress for {allowed:g} s"
            break
        try:
            err_size = os.fstat(err.fileno()).st_size
        except OSError:
            err_size = 0
        if err_size > MAX_STDERR_BYTES:
            _kill_tree(proc)
            res.ended, res.detail = "overflow", f"more than {MAX_STDERR_BYTES >> 20} MiB on stderr"
            break
        try:
            line = lines.get(timeout=min(wait, 0.5))
        except queue.Empty:
            last = max(last, seen[0])
            continue
        if line is None:
            eof = True
            break
        if line == _OVERFLOW:
            _kill_tree(proc)
            res.ended = "overflow"
            res.detail = f"more than {MAX_OTHER_OUTPUT >> 20} MiB of output that is not verify's"
            break
        last = time.monotonic()
        if not line.startswith(MARK):
            continue
        try:
            ev = json.loads(line[len(MARK):])
        except ValueError:
            continue
        if isinstance(ev, dict):
            if gated is not None:
                _note_pauses(ev, gated, stage_paused)
            next_s = ev.get("next_s")
            allowed = max(stall, 3.0 * float(next_s)) if isinstance(next_s, (int, float)) else stall
            if ev.get("event") == "timing":
                if gated is None:
                    continue
                if ev.get("on"):
                    waited = time.monotonic()
                    gated[0].acquire(gated[1])  # idle meanwhile: neither its stall clock nor its limit runs
                    deadline += time.monotonic() - waited
                    last = time.monotonic()
                    _say(proc, "go\n")
                else:
                    gated[0].release(gated[1])
                continue
            res.events.append(ev)
            if on_event is not None:
                on_event(ev)
    try:
        proc.wait(timeout=10 if eof else 5)
    except subprocess.TimeoutExpired:
        _kill_tree(proc)
        proc.wait()
        if res.ended == "exit":
            res.ended, res.detail = "hang", "did not exit after its last result"
    _kill_tree(proc)  # done: what it left running in its group (a daemon, a worker) ends with it
    reader.join(timeout=2)
    if proc.stdout is not None:
        proc.stdout.close()
    if proc.stdin is not None:
        try:
            proc.stdin.close()
        except OSError:
            pass
    res.returncode = proc.returncode
    if res.ended == "exit":
        name = _crash_name(proc.returncode or 0)
        if name:
            res.ended, res.detail = "crash", name
    try:
        err.seek(0, os.SEEK_END)
        err.seek(max(0, err.tell() - 4000))
        data = err.read(4000)
    except OSError:
        data = b""
    err.close()
    res.stderr_tail = data.decode("utf-8", "replace")
    res.wall_s = round(time.monotonic() - t0, 3)
    return res


def _say(proc: "subprocess.Popen[str]", line: str) -> None:
    """A line on the child's stdin; a child that is gone meanwhile reads nothing, which is fine."""
    try:
        assert proc.stdin is not None
        proc.stdin.write(line)
        proc.stdin.flush()
    except (OSError, ValueError):
        pass


def child_env(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if extra:
        env.update(extra)
    return env

