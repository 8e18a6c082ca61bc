"""`mlprobe fleet merge`: the fleet report from report files gathered any way (ssh, Slurm,
configuration management).

Each file is read in one pass (fastread: msgspec straight into typed structs) into its node's facts;
nodes with the same report share one summary, so memory grows with the distinct reports (in a real
fleet: the groups and the nodes that drifted), plus a name and a file per node. The files are read
here (`--jobs 1`), in a pool of processes (`--jobs N`, by default one per core once there are
AUTO_JOBS_FILES files or more), or as Ray tasks over runs of files on a cluster that sees the same
files (`--ray`); each way gives the same report. The report is written as it is made
(MergedFleet.chunks: no per-value reflection, nothing the size of the whole output in memory).

`--embed-reports` keeps every node's whole report: that path (merge_embedded) reads each file into a
dict as before."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import msgspec

from .. import __version__
from ..errors import StageError
from ..model.contract import from_json, to_json
from ..model.jsontypes import JsonObject
from ..report.envelope import utc_now
from ..ui import display_path
from .document import FLEET_KIND, FLEET_SCHEMA, assemble, build_fleet
from .fastread import Entry, read_chunk_plain
from .group import build_groups
from .load import iter_names, load_many, select_inputs
from .model import Drift, FleetDocument, FleetNode, FleetSource, FleetSummary, Group, NodeSummary
from .summary import hardware_key, key_id

# From this many files on, `--jobs` left out reads them in a process pool (one per core): below it
# the pool's start (a fresh Python per process) costs more than it saves.
AUTO_JOBS_FILES = 2000
# Files per task: a process pool's or a Ray task's unit of work.
CHUNK_FILES = 250
RAY_CHUNK_FILES = 1000

Progress = Callable[[int, int], None]


def auto_jobs(files: int, jobs: Optional[int]) -> int:
    if jobs is not None:
        return max(1, jobs)
    return max(1, min(os.cpu_count() or 1, 8)) if files >= AUTO_JOBS_FILES else 1


def bad_file(message: str) -> StageError:
    return StageError(
        f"cannot read a report: {message}",
        next_step="pass files written by `mlprobe report -o FILE.json` (or `mlprobe scan --json`),"
                  " or add --skip-bad to leave out the files that are not",
        ref="E902", kind="usage")


@dataclasses.dataclass
class MergedFleet:
    """A merged fleet: per node its name, file and the index of its summary (shared by the nodes of
    the same report); the distinct summaries with their JSON; groups and drift."""

    names: List[str]
    files: List[str]
    sids: List[int]
    summaries: List[NodeSummary]
    facts: List[bytes]
    groups: List[Group]
    drift: List[Drift]
    source: FleetSource
    warnings: List[str]
    generated_at: str

    @property
    def summary(self) -> FleetSummary:
        n = len(self.names)
        return FleetSummary(nodes=n, by_status={"ok": n} if n else {}, groups=len(self.groups),
                            drift_nodes=len({d.node for d in self.drift}))

    def document(self) -> FleetDocument:
        """The same report as a FleetDocument (for the terminal tables, the HTML page, tests)."""
        nodes = [FleetNode(name=name, file=f, status="ok", facts=self.summaries[sid])
                 for name, f, sid in zip(self.names, self.files, self.sids)]
        return assemble(nodes, self.groups, self.drift, self.source, self.warnings, self.generated_at)

    def chunks(self, batch: int = 2000) -> Iterator[bytes]:
        """The fleet report as compact JSON, piece by piece: the same document as
        `fleet_json(self.document().to_json())` for a large fleet. A node is its name, file and group
        put around its summary's JSON, which was encoded once."""
        enc = msgspec.json.encode
        gids = [enc("g-" + key_id(hardware_key(s))) for s in self.summaries]
        yield (b'{"schema":' + enc(FLEET_SCHEMA) + b',"kind":' + enc(FLEET_KIND)
               + b',"mlprobe_version":' + enc(__version__) + b',"generated_at":' + enc(self.generated_at)
               + b',"source":' + enc(to_json(self.source)) + b',"summary":' + enc(to_json(self.summary))
               + b',"nodes":[')
        out: List[bytes] = []
        for i, (name, f, sid) in enumerate(zip(self.names, self.files, self.sids)):
            out.append(b'{"name":' + enc(name) + b',"file":' + enc(f) + b',"status":"ok","error":null,"group":'
                       + gids[sid] + b',"facts":' + self.facts[sid] + b"}")
            if len(out) >= batch:
                yield (b"," if i >= batch else b"") + b",".join(out)
                out = []
        if out:
            yield (b"," if len(self.names) > len(out) else b"") + b",".join(out)
        yield b'],"groups":['
        for i, g in enumerate(self.groups):
            doc = to_json(dataclasses.replace(g, nodes=(), drift_nodes=()))
            doc["nodes"], doc["drift_nodes"] = list(g.nodes), list(g.drift_nodes)
            yield (b"," if i else b"") + enc(doc)
        yield b'],"drift":'
        names = [f.name for f in dataclasses.fields(Drift)]
        yield enc([{k: getattr(d, k) for k in names} for d in self.drift])
        yield b',"warnings":' + enc(self.warnings) + b"}\n"


Answer = Tuple[Sequence[str], Tuple[List[Entry], Dict[str, bytes]]]


def _split(files: Sequence[str], size: int) -> List[Sequence[str]]:
    return [files[i:i + size] for i in range(0, len(files), size)]


def _local(files: Sequence[str], jobs: int) -> Iterator[Answer]:
    chunks = _split(files, CHUNK_FILES)
    if jobs <= 1 or len(chunks) <= 1:
        for c in chunks:
            yield c, read_chunk_plain(c)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn: a fresh interpreter (fork of a process with threads is unsafe, and not the default
    # everywhere); the workers import mlprobe once each
    ex = ProcessPoolExecutor(max_workers=min(jobs, len(chunks)), mp_context=multiprocessing.get_context("spawn"))
    try:
        yield from zip(chunks, ex.map(read_chunk_plain, chunks))
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def _on_ray(files: Sequence[str], address: str, on_start: Optional[Callable[[int], None]] = None) -> Iterator[Answer]:
    from .ray_scan import connect, import_ray

    ray = import_ray(for_merge=True)
    if address == "local":  # a Ray of this machine alone, started for this merge
        ray.init(logging_level="ERROR", log_to_driver=False, include_dashboard=False)
    else:
        connect(ray, address, for_merge=True)
    try:
        cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
        if on_start is not None:
            on_start(cpus)
        # runs of files: at least four per CPU of the cluster, at most RAY_CHUNK_FILES each
        chunks = _split(files, max(1, min(RAY_CHUNK_FILES, -(-len(files) // (4 * cpus)))))
        task = ray.remote(num_cpus=1, max_retries=2)(read_chunk_plain)
        window: Deque[Any] = deque()
        todo = iter(chunks)
        for c in todo:  # a bounded number of tasks in flight, their answers taken in order
            window.append(task.remote(list(c)))
            if len(window) >= 2 * cpus:
                break
        sent: Deque[Sequence[str]] = deque(chunks[:len(window)])
        while window:
            result = ray.get(window.popleft())
            nxt = next(todo, None)
            if nxt is not None:
                window.append(task.remote(list(nxt)))
                sent.append(nxt)
            yield sent.popleft(), result
    finally:
        ray.shutdown()


def merge(paths: Sequence[str], skip_bad: bool = False, on_progress: Optional[Progress] = None,
          now: Optional[str] = None, jobs: Optional[int] = None, ray_address: Optional[str] = None,
          on_ray: Optional[Callable[[int], None]] = None) -> MergedFleet:
    """The merged fleet of these files (and folders of them)."""
    started = time.monotonic()
    files, notes = select_inputs(paths)
    results: Iterable[Answer]
    if ray_address:
        results = _on_ray(files, ray_address, on_ray)
    else:
        results = _local(files, auto_jobs(len(files), jobs))
    shown: List[str] = []
    sids: List[int] = []
    summaries: List[NodeSummary] = []
    facts: List[bytes] = []
    sid_of: Dict[str, int] = {}
    problems: List[str] = []
    done = 0
    it = iter(results)
    try:
        for chunk, (entries, new) in it:
            for path, (kind, value) in zip(chunk, entries):
                done += 1
                if on_progress is not None and done % 500 == 0:
                    on_progress(done, len(files))
                if kind != "ok":
                    if not skip_bad:
                        raise bad_file(value)
                    problems.append(value)
                    continue
                sid = sid_of.get(value)
                if sid is None:
                    sid = sid_of[value] = len(summaries)
                    summaries.append(from_json(NodeSummary, json.loads(new[value])))
                    facts.append(new[value])
                shown.append(display_path(path))
                sids.append(sid)
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()  # ends the pool or the Ray connection at once on an error
    names = [name for _, name in iter_names(shown)]
    groups, drift = build_groups(zip(names, (summaries[s] for s in sids)))
    source = FleetSource(kind="merge", files=len(files), seconds=round(time.monotonic() - started, 3))
    return MergedFleet(names=names, files=shown, sids=sids, summaries=summaries, facts=facts,
                       groups=list(groups), drift=list(drift), source=source,
                       warnings=notes + [f"left out: {p}" for p in problems], generated_at=now or utc_now())


def merge_embedded(paths: Sequence[str], skip_bad: bool = False, on_progress: Optional[Progress] = None,
                   now: Optional[str] = None) -> FleetDocument:
    """`--embed-reports`: every node's whole report kept in the fleet report."""
    started = time.monotonic()
    files, notes = select_inputs(paths)
    loaded, problems = load_many(files, keep_reports=True, skip_bad=skip_bad, on_progress=on_progress)
    names = dict(iter_names([item.path for item in loaded]))
    nodes = [FleetNode(name=names[item.path], file=item.path, status="ok", facts=item.summary, report=item.report)
             for item in loaded]
    warnings = notes + [f"left out: {p}" for p in problems]
    source = FleetSource(kind="merge", files=len(files), seconds=round(time.monotonic() - started, 3))
    return build_fleet(nodes, source, warnings, now=now)


def merge_fleet(paths: Sequence[str], keep_reports: bool = False, skip_bad: bool = False,
                on_progress: Optional[Progress] = None, now: Optional[str] = None,
                jobs: Optional[int] = None, ray_address: Optional[str] = None) -> FleetDocument:
    """The fleet report of these files (and folders of them)."""
    if keep_reports:
        return merge_embedded(paths, skip_bad, on_progress, now)
    return merge(paths, skip_bad, on_progress, now, jobs, ray_address).document()


def merge_reports(paths: Sequence[str], keep_reports: bool = False, skip_bad: bool = False,
                  on_progress: Optional[Progress] = None, now: Optional[str] = None,
                  jobs: Optional[int] = None) -> JsonObject:
    """The fleet report of these files (and folders of them), as the JSON `fleet merge` writes."""
    return merge_fleet(paths, keep_reports, skip_bad, on_progress, now, jobs).to_json()
