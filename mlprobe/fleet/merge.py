"""`mlprobe fleet merge`: the fleet report from report files gathered any way (ssh, Slurm,
configuration management). Each file is read, boiled down to its summary and dropped, so that memory
grows with the number of nodes, not with the size of their reports."""

from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

from ..model.jsontypes import JsonObject
from .document import build_fleet
from .load import iter_names, load_many, select_inputs
from .model import FleetDocument, FleetNode, FleetSource


def merge_reports(paths: Sequence[str], keep_reports: bool = False, skip_bad: bool = False,
                  on_progress: Optional[Callable[[int, int], None]] = None,
                  now: Optional[str] = None) -> JsonObject:
    """The fleet report of these files (and folders of them), as the JSON `fleet merge` writes."""
    return merge_fleet(paths, keep_reports, skip_bad, on_progress, now).to_json()


def merge_fleet(paths: Sequence[str], keep_reports: bool = False, skip_bad: bool = False,
                on_progress: Optional[Callable[[int, int], None]] = None,
                now: Optional[str] = None) -> FleetDocument:
    """The fleet report of these files (and folders of them)."""
    started = time.monotonic()
    files, notes = select_inputs(paths)
    loaded, problems = load_many(files, keep_reports=keep_reports, skip_bad=skip_bad, on_progress=on_progress)
    names = dict(iter_names([item.path for item in loaded]))
    nodes = [FleetNode(name=names[item.path], file=item.path, status="ok", facts=item.summary, report=item.report)
             for item in loaded]
    warnings = notes + [f"left out: {p}" for p in problems]
    source = FleetSource(kind="merge", files=len(files), seconds=round(time.monotonic() - started, 3))
    return build_fleet(nodes, source, warnings, now=now)
