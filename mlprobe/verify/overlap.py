"""Several verify children at once, their timed loops one at a time.

Importing a framework, enumerating its devices, checking correctness, learning and warming up take
most of a verify run and measure nothing that a neighbour can distort, so the children of different
frameworks (and the CPU peers) run side by side. Only the speed stage's timed loops must have the
machine to themselves: a child asks before them (the payload's `timing` event, when it runs
`gated`) and waits for a "go" line on stdin; the gate gives it in turn (FIFO) while every other
running child waits at the gate or is paused (Linux: SIGSTOP, then SIGCONT when the loops are done),
and a new child starts only while nobody times. A waiting or paused child is idle, so its stall clock
and time limit stop meanwhile (verify/child.py)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, TypeVar

if TYPE_CHECKING:
    import subprocess

T = TypeVar("T")


# Linux: a child that asks for the gate does not wait for the others to reach theirs; the others are
# paused (SIGSTOP to each one's process group) while it times, and go on (SIGCONT) when it is done.
# Each gated child asks the kernel to kill it when mlprobe dies (the payload's PR_SET_PDEATHSIG), so
# a paused child cannot outlive a `kill -9` of mlprobe. Elsewhere, and for a child without a process
# to pause, the gate is a barrier: the holder times while every other live child waits at the gate.
PAUSE_OTHERS = sys.platform.startswith("linux") and os.environ.get("MLPROBE_VERIFY_BARRIER") != "1"


class TimingGate:
    """Mutual exclusion of timed loops across the children of one verify run: the holder times while
    every other live child waits at the gate or is paused."""

    def __init__(self, pause: Optional[bool] = None) -> None:
        self.pause = PAUSE_OTHERS if pause is None else pause
        self._cv = threading.Condition()
        self._live: List[object] = []
        self._waiting: List[object] = []
        self._holder: Optional[object] = None
        self._procs: Dict[object, "subprocess.Popen[str]"] = {}
        self._stopped: Dict[object, float] = {}  # child -> when it was paused
        self._paused: Dict[object, float] = {}  # child -> seconds paused before the current pause

    def join(self, child: object) -> None:
        """A child is about to start: it waits while another one times (its start-up would share
        the machine with those loops)."""
        with self._cv:
            while self._holder is not None:
                self._cv.wait()
            self._live.append(child)

    def attach(self, child: object, proc: "subprocess.Popen[str]") -> None:
        """The process of a child that joined: with pausing on, it is paused, not waited for, while
        another child times. It leads its own process group (start_new_session)."""
        with self._cv:
            if self.pause and os.name == "posix" and child in self._live:
                self._procs[child] = proc
            self._cv.notify_all()

    def leave(self, child: object) -> None:
        """A child ended (finished, crashed, killed): it no longer holds or blocks the gate."""
        with self._cv:
            if child in self._live:
                self._live.remove(child)
            if child in self._waiting:
                self._waiting.remove(child)
            self._procs.pop(child, None)
            self._stopped.pop(child, None)
            if self._holder is child:
                self._holder = None
                self._resume_all()
            self._cv.notify_all()

    def _may_go(self, child: object) -> bool:
        return (self._holder is None and bool(self._waiting) and self._waiting[0] is child
                and all(c in self._waiting or c in self._procs for c in self._live))

    def acquire(self, child: object) -> None:
        """Block until `child` may run its timed loops alone."""
        with self._cv:
            self._waiting.append(child)
            self._cv.notify_all()
            while not self._may_go(child):
                self._cv.wait()
            self._waiting.pop(0)
            self._holder = child
            for other in self._live:
                if other is not child and other not in self._waiting and other in self._procs:
                    self._signal(other, signal.SIGSTOP)
                    self._stopped[other] = time.monotonic()

    def release(self, child: object) -> None:
        with self._cv:
            if self._holder is child:
                self._holder = None
                self._resume_all()
            self._cv.notify_all()

    def paused_s(self, child: object) -> float:
        """How long this child has been paused so far (its stall clock and time limit stop meanwhile)."""
        with self._cv:
            since = self._stopped.get(child)
            return self._paused.get(child, 0.0) + (time.monotonic() - since if since is not None else 0.0)

    def _resume_all(self) -> None:
        now = time.monotonic()
        for other, since in list(self._stopped.items()):
            self._paused[other] = self._paused.get(other, 0.0) + now - since
            self._signal(other, signal.SIGCONT)
        self._stopped.clear()

    def _signal(self, child: object, sig: "signal.Signals") -> None:
        proc = self._procs.get(child)
        if proc is None:
            return
        try:
            os.killpg(proc.pid, sig)
        except (OSError, ProcessLookupError):
            pass


def run_lanes(lanes: Dict[str, List[Callable[[], T]]], parallel: bool = True) -> Dict[str, List["Future[T]"]]:
    """Run each lane's jobs in order, the lanes side by side (one thread each); `parallel=False`
    runs every lane after the other. Returns each lane's futures, in the order given."""
    out: Dict[str, List["Future[T]"]] = {name: [Future() for _ in jobs] for name, jobs in lanes.items()}

    def lane(name: str) -> None:
        for job, fut in zip(lanes[name], out[name]):
            try:
                fut.set_result(job())
            except BaseException as exc:  # handed to whoever reads the future
                fut.set_exception(exc)

    if not parallel:
        for name in lanes:
            lane(name)
        return out
    pool = ThreadPoolExecutor(max_workers=max(1, len(lanes)), thread_name_prefix="verify")
    for name in lanes:
        pool.submit(lane, name)
    pool.shutdown(wait=False)
    return out
