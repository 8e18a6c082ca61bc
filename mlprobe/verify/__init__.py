"""`mlprobe verify`: a tiny CNN, run in the target interpreter, proves or disproves acceleration.

`run_verify` (runner.py) is the entry point for commands (verify, install --apply, report).
"""

from __future__ import annotations

from .runner import run_verify

__all__ = ["run_verify"]
