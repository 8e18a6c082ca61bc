"""`mlprobe fleet scan`: one scan task per alive node of a Ray cluster, pinned to that node
(NodeAffinitySchedulingStrategy, soft=False: never run elsewhere), with one time limit for all.

Ray is an optional extra (`mlprobe[ray]`) imported only here. The task is mlprobe.fleet.task.scan_node,
sent by reference, so a node whose Python cannot import mlprobe fails with an import error that is
reported as `no-mlprobe`. While waiting, the cluster's node table is read about once a second: a node
that died (or left) during its scan is `lost` at once instead of at the deadline. At the deadline the
tasks still running are cancelled (their workers killed) and reported as `timeout`."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

from ..errors import StageError, error_text
from ..model.jsontypes import JsonObject
from .document import build_fleet
from .model import AgentInfo, FleetDocument, FleetNode, FleetSource, NodeSummary
from .summary import summarize

# (node name, status, seconds, detail) as each node finishes
NodeEvent = Callable[[str, str, Optional[float], str], None]

# How often the node table is read while tasks run (a killed node is noticed this fast, once the
# cluster itself has marked it dead).
POLL_S = 0.5


def import_ray(for_merge: bool = False) -> Any:
    from ..origin import extra_install_command

    try:
        import ray
    except ImportError as exc:
        raise StageError(
            "Ray is not installed in this Python", why=str(exc),
            next_step=f"install the extra the way this mlprobe was installed: {extra_install_command('ray')} "
                      "(on every node, with its own copy of mlprobe), or "
                      + ("merge on this machine alone: leave out --ray" if for_merge else
                         "gather `mlprobe report` files another way and use `mlprobe fleet merge`"),
            ref="E903", kind="usage") from None
    return ray


def _resolve(address: str) -> Optional[str]:
    """HOST:PORT of the cluster's GCS, or None where it cannot be told without Ray itself."""
    if address.startswith("ray://"):
        return None
    if address == "auto":
        try:  # where `ray start` recorded this machine's cluster (an internal helper: best effort)
            from ray._private.services import canonicalize_bootstrap_address_or_die

            return str(canonicalize_bootstrap_address_or_die("auto"))
        except BaseException:  # noqa: B036 - it exits (SystemExit) or raises when there is none
            return None
    return address


def unreachable(address: str, timeout: float) -> Optional[str]:
    """Why nothing answers at the cluster's address, or None. Ray's own connect retries for minutes
    against an address where nothing listens, past any --timeout, so a plain TCP connect goes first."""
    import socket

    target = _resolve(address)
    if not target:
        return None
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        return f"{target!r} is not HOST:PORT"
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=max(0.5, min(timeout, 5.0))).close()
    except OSError as exc:
        return f"nothing answers at {target}: {exc.strerror or exc}"
    return None


def connect(ray: Any, address: str, timeout: float = 5.0, for_merge: bool = False) -> None:
    step = ("start one (`ray start --head` on the head node, `ray start --address HEAD:6379` on "
            "the others) or pass its address with --address HOST:PORT"
            + ("; or merge on this machine alone: leave out --ray" if for_merge else ""))
    why = unreachable(address, timeout)
    if why:
        raise StageError(f"cannot connect to a Ray cluster at {address}", why=why, next_step=step,
                         ref="E904", kind="usage")
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False, ignore_reinit_error=True,
                 configure_logging=True)
    except Exception as exc:  # ConnectionError, RuntimeError, ValueError: all mean no cluster there
        raise StageError(
            f"cannot connect to a Ray cluster at {address}", why=f"{type(exc).__name__}: {exc}"[:500],
            next_step=step, ref="E904", kind="usage") from None


class RayNode(NamedTuple):
    """A node of the cluster, from Ray's node table (`ray.nodes()`)."""

    node_id: str
    address: Optional[str]  # the raylet's address (NodeManagerAddress)
    port: object  # the raylet's port (NodeManagerPort), as Ray gives it
    alive: bool


def ray_nodes(ray: Any) -> List[RayNode]:
    """The cluster's node table, read once here: the rows with a node id."""
    out = []
    for n in ray.nodes():
        if isinstance(n, dict) and isinstance(n.get("NodeID"), str):
            address = n.get("NodeManagerAddress")
            out.append(RayNode(n["NodeID"], address if isinstance(address, str) else None,
                               n.get("NodeManagerPort"), bool(n.get("Alive"))))
    return out


def node_names(nodes: List[RayNode]) -> Dict[str, str]:
    """node id -> a name a person recognises: its address, with the raylet's port where several
    nodes share one address (several raylets on one machine)."""
    addrs = [n.address or n.node_id[:12] for n in nodes]
    out = {}
    for n, a in zip(nodes, addrs):
        out[n.node_id] = f"{a}:{n.port}" if addrs.count(a) > 1 else a
    return out


def classify(exc: BaseException, node_alive: bool) -> Tuple[str, str]:
    """(status, error text) for an exception that ray.get raised for a node's task."""
    import ray.exceptions as rex

    text = f"{type(exc).__name__}: {exc}"
    lost_types = tuple(t for t in (getattr(rex, n, None) for n in (
        "NodeDiedError", "ObjectLostError", "OwnerDiedError", "LocalRayletDiedError",
        "TaskUnschedulableError", "ActorUnschedulableError")) if isinstance(t, type))
    if isinstance(exc, lost_types) or (not node_alive and isinstance(exc, getattr(rex, "WorkerCrashedError", ()))):
        return "lost", _first_line(text)
    cause = getattr(exc, "cause", None)
    for e in (cause, exc):
        if isinstance(e, ImportError) and "mlprobe" in str(e):
            return "no-mlprobe", _first_line(f"{type(e).__name__}: {e}")
    if "No module named 'mlprobe" in text:
        return "no-mlprobe", "ModuleNotFoundError: No module named 'mlprobe' on this node"
    if not node_alive:
        return "lost", _first_line(text)
    if cause is not None:
        return "error", _first_line(error_text(cause))
    return "error", _first_line(text)


def agent_died(exc: BaseException) -> bool:
    import ray.exceptions as rex

    died = getattr(rex, "ActorDiedError", None)
    return isinstance(died, type) and isinstance(exc, died)


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return (lines[0] if lines else text)[:500]


def _alive_ids(ray: Any) -> Optional[set[str]]:
    try:
        return {n.node_id for n in ray_nodes(ray) if n.alive}
    except Exception:  # the GCS busy for a moment: no news is not death
        return None


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Ray's driver prints cluster events ("(raylet) Raylet is terminated ...") to standard output,
    from Python and from C++; while it runs, file descriptor 1 points at standard error so that the
    answer on stdout (`--json`) stays one clean document."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 1)
        os.close(saved)


AGENT_NAMESPACE = "mlprobe"


def agent_name(node_id: str) -> str:
    """One agent per node and mlprobe version: a node whose mlprobe changed gets a new agent (the old
    one ends when its keep time runs out)."""
    from .. import __version__

    return f"mlprobe-agent-{__version__}-{node_id[:16]}"


def scan_cluster(address: str, timeout: float, verify: bool = False, on_event: Optional[NodeEvent] = None,
                 now: Optional[str] = None, keep_agents_s: float = 0.0) -> JsonObject:
    """The fleet report of one scan task per alive node of the cluster, as the JSON `fleet scan`
    writes."""
    return scan_fleet(address, timeout, verify, on_event, now, keep_agents_s).to_json()


def scan_fleet(address: str, timeout: float, verify: bool = False, on_event: Optional[NodeEvent] = None,
               now: Optional[str] = None, keep_agents_s: float = 0.0) -> FleetDocument:
    """The fleet report of one scan task per alive node of the cluster."""
    with stdout_to_stderr():
        return _scan_cluster(address, timeout, verify, on_event, now, keep_agents_s)


def _scan_cluster(address: str, timeout: float, verify: bool, on_event: Optional[NodeEvent],
                  now: Optional[str], keep_agents_s: float = 0.0) -> FleetDocument:
    ray = import_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from .task import NodeAgent, scan_node

    started = time.monotonic()
    connect(ray, address, timeout)
    try:
        nodes = [n for n in ray_nodes(ray) if n.alive]
        names = node_names(nodes)
        remote = ray.remote(scan_node)
        agent_cls = ray.remote(NodeAgent) if keep_agents_s > 0 else None
        agents: Dict[str, Any] = {}  # node id -> its agent's actor handle
        retried: set[str] = set()
        pending: Dict[Any, str] = {}  # object ref -> node id

        def submit_to_agent(nid: str) -> Any:
            # a detached actor, found again by name by the next scan (get_if_exists)
            assert agent_cls is not None
            agents[nid] = agent_cls.options(
                name=agent_name(nid), namespace=AGENT_NAMESPACE, lifetime="detached", get_if_exists=True,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=nid, soft=False), num_cpus=0,
                max_restarts=0, max_task_retries=0,
            ).remote(keep_agents_s)
            return agents[nid].scan.remote(verify, keep_agents_s)

        entries: Dict[str, FleetNode] = {}
        for n in nodes:
            nid = n.node_id
            entries[nid] = FleetNode(name=names[nid], ray_node_id=nid, address=n.address, status="timeout")
            pin = NodeAffinitySchedulingStrategy(node_id=nid, soft=False)
            if agent_cls is not None:
                ref = submit_to_agent(nid)
            else:
                ref = remote.options(
                    scheduling_strategy=pin, num_cpus=0, max_retries=0, retry_exceptions=False,
                    name=f"mlprobe-fleet-scan-{names[nid]}",
                ).remote(verify)
            pending[ref] = nid

        def finish(nid: str, status: str, error: Optional[str], result: object = None) -> None:
            """The node's entry, from how its task ended and, for one that answered, its answer."""
            seconds = round(time.monotonic() - started, 3)
            answer: Optional[NodeAnswer] = None
            if status == "ok":
                answer, why = accept(result)
                if answer is None:
                    status, error = "error", why
            e = entries[nid] = dataclasses.replace(
                entries[nid], status=status, error=error,
                seconds=seconds if answer is None or answer.seconds is None else answer.seconds,
                facts=answer.facts if answer else None, report=answer.report if answer else None,
                agent=answer.agent if answer else None)
            if on_event is not None:
                on_event(e.name, status, e.seconds, error or _where(answer))

        deadline = started + timeout
        last_poll = 0.0
        alive: Optional[set[str]] = {n.node_id for n in nodes}
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=min(left, POLL_S))
            if time.monotonic() - last_poll >= POLL_S:
                alive = _alive_ids(ray) or alive
                last_poll = time.monotonic()
            for ref in ready:
                nid = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as exc:
                    node_alive = alive is None or nid in alive
                    if nid in agents and nid not in retried and node_alive and agent_died(exc):
                        # the kept agent ended (its idle time ran out as this scan reached it, or it
                        # was killed): once, a new one
                        retried.add(nid)
                        pending[submit_to_agent(nid)] = nid
                        continue
                    status, error = classify(exc, node_alive)
                    finish(nid, status, error)
                else:
                    finish(nid, "ok", None, result)
            for ref, nid in list(pending.items()):
                if alive is not None and nid not in alive:
                    pending.pop(ref)
                    _cancel(ray, ref, agents.get(nid))
                    finish(nid, "lost", "the node died or left the cluster during the scan")
        alive = _alive_ids(ray) or alive
        for ref, nid in pending.items():
            _cancel(ray, ref, agents.get(nid))
            if alive is not None and nid not in alive:
                finish(nid, "lost", "the node died or left the cluster during the scan")
            else:
                finish(nid, "timeout", f"no answer within {timeout:g} s")
        source = FleetSource(kind="ray", address=address, timeout_s=timeout,
                             seconds=round(time.monotonic() - started, 3),
                             keep_agents_s=keep_agents_s if keep_agents_s > 0 else None)
        return build_fleet(list(entries.values()), source, now=now)
    finally:
        try:
            ray.shutdown()
        except Exception:
            pass


@dataclasses.dataclass(frozen=True)
class NodeAnswer:
    """A node's answer to its scan task (task.scan_node's dict, across the process boundary), read:
    the summary of its report, the report itself, how long it took there, its kept agent."""

    facts: NodeSummary
    report: JsonObject
    seconds: Optional[float]
    agent: Optional[AgentInfo]


def accept(result: object) -> Tuple[Optional[NodeAnswer], str]:
    """(the answer, "") for a node's answer that is a readable report, else (None, why): an answer
    that is not the task's dict, a report of the wrong shape, numbers no document holds (10**400,
    NaN), a summary that fails. One odd node is that node's error, never the scan's."""
    from ..model import jsondoc
    from ..model.validate import DocumentError, check_document

    if not isinstance(result, dict):
        return None, f"the node's answer is not a report (a {type(result).__name__})"
    report = result.get("report")
    if not isinstance(report, dict):
        return None, f"the node's answer holds no report (its report is {type(report).__name__})"
    try:
        jsondoc.check(report)  # JSON: text keys, finite numbers, nothing but JSON values
        check_document(report, "the node's report")
        facts = summarize(report)
    except (DocumentError, ValueError) as exc:
        return None, _first_line(f"the node's report is not one mlprobe can read: {exc}")
    except (RecursionError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        return None, _first_line(f"the node's report is not one mlprobe can read "
                                 f"({type(exc).__name__}: {exc})")
    secs = result.get("seconds")
    agent = result.get("agent")
    return NodeAnswer(
        facts=facts, report=report,
        seconds=secs if isinstance(secs, (int, float)) and not isinstance(secs, bool) and 0 <= secs < 1e9 else None,
        agent=AgentInfo(scans=agent["scans"], pid=agent["pid"])
        if isinstance(agent, dict) and all(isinstance(agent.get(k), int) for k in ("scans", "pid")) else None,
    ), ""


def _where(answer: Optional[NodeAnswer]) -> str:
    if answer is None:
        return ""
    src = answer.facts.source or {}
    if src.get("kind") == "replay":
        return f"replay of {src.get('bundle')}" + (f" ({src['via']})" if src.get("via") else "")
    return "live"


def _cancel(ray: Any, ref: Any, agent: Any = None) -> None:
    """Stop a node's scan: a task is cancelled (its worker killed); an agent's method cannot be
    force-cancelled, so the agent itself is killed (the next scan starts a new one)."""
    try:
        if agent is not None:
            ray.kill(agent, no_restart=True)
        else:
            ray.cancel(ref, force=True)
    except Exception:  # already finished, or its node is gone
        pass
