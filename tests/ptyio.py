"""Reading a child's pseudo-terminal until it closes it, exits or runs out of time (tests that
check what a person sees on a real terminal)."""

from __future__ import annotations

import os
import select
import subprocess
import time


def drain(master: int, proc: "subprocess.Popen[bytes]", timeout: float) -> bytes:
    """Everything the child writes to the terminal whose master side is `master`."""
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    return seen
