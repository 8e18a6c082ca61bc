"""Several verify children at once, their timed loops one at a time.

Importing a framework, enumerating its devices, checking correctness, learning and warming up take
most of a verify run and measure nothing that a neighbour can distort, so the children of different
frameworks (and the CPU peers) run side by side. Only the speed stage's timed loops must have the
machine to themselves: a child asks before them (the payload's `timing` event, when it runs
`gated`) and waits for a "go" line on stdin; the gate gives it once every other running child is
waiting at the gate too (FIFO), and a new child starts only while nobody times. A waiting child is
idle, so its stall clock stops meanwhile (verify/child.py)."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Dict, List, Optional, TypeVar

T = TypeVar("T")


class TimingGate:
    """Mutual exclusion of timed loops across the children of one verify run (a barrier: the
    holder times while every other live child waits at the gate)."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._live: List[object] = []
        self._waiting: List[object] = []
        self._holder: Optional[object] = None

    def join(self, child: object) -> None:
        """A child is about to start: it waits while another one times (its start-up would share
        the machine with those loops)."""
        with self._cv:
            while self._holder is not None:
                self._cv.wait()
            self._live.append(child)

    def leave(self, child: object) -> None:
        """A child ended (finished, crashed, killed): it no longer holds or blocks the gate."""
        with self._cv:
            if child in self._live:
                self._live.remove(child)
            if child in self._waiting:
                self._waiting.remove(child)
            if self._holder is child:
                self._holder = None
            self._cv.notify_all()

    def acquire(self, child: object) -> None:
        """Block until `child` may run its timed loops alone."""
        with self._cv:
            self._waiting.append(child)
            self._cv.notify_all()
            while not (self._holder is None and self._waiting[0] is child
                       and all(c in self._waiting for c in self._live)):
                self._cv.wait()
            self._waiting.pop(0)
            self._holder = child

    def release(self, child: object) -> None:
        with self._cv:
            if self._holder is child:
                self._holder = None
            self._cv.notify_all()


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
