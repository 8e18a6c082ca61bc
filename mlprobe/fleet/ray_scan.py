"""`mlprobe fleet scan`: one scan task per alive node of a Ray cluster, pinned to that node
(NodeAffinitySchedulingStrategy, soft=False: never run elsewhere), with one time limit for all.

Ray is an optional extra (`mlprobe[ray]`) imported only here. The task is mlprobe.fleet.task.scan_node,
sent by reference, so a node whose Python cannot import mlprobe fails with an import error that is
reported as `no-mlprobe`. While waiting, the cluster's node table is read about once a second: a node
that died (or left) during its scan is `lost` at once instead of at the deadline. At the deadline the
tasks still running are cancelled (their workers killed) and reported as `timeout`."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ..errors import StageError, error_text
from .document import build_fleet
from .summary import summarize

# (node name, status, seconds, detail) as each node finishes
Event = Callable[[str, str, Optional[float], str], None]

# How often the node table is read while tasks run (a killed node is noticed this fast, once the
# cluster itself has marked it dead).
POLL_S = 0.5


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise StageError(
            "Ray is not installed in this Python", why=str(exc),
            next_step="install the extra: python -m pip install 'mlprobe[ray]' (on every node), or gather "
                      "`mlprobe report` files another way and use `mlprobe fleet merge`",
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


def connect(ray: Any, address: str, timeout: float = 5.0) -> None:
    why = unreachable(address, timeout)
    if why:
        raise StageError(
            f"cannot connect to a Ray cluster at {address}", why=why,
            next_step="start one (`ray start --head` on the head node, `ray start --address HEAD:6379` on "
                      "the others) or pass its address with --address HOST:PORT",
            ref="E904", kind="usage")
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False, ignore_reinit_error=True,
                 configure_logging=True)
    except Exception as exc:  # ConnectionError, RuntimeError, ValueError: all mean no cluster there
        raise StageError(
            f"cannot connect to a Ray cluster at {address}", why=f"{type(exc).__name__}: {exc}"[:500],
            next_step="start one (`ray start --head` on the head node, `ray start --address HEAD:6379` on "
                      "the others) or pass its address with --address HOST:PORT",
            ref="E904", kind="usage") from None


def node_names(nodes: List[Dict[str, Any]]) -> Dict[str, str]:
    """node id -> a name a person recognises: its address, with the raylet's port where several
    nodes share one address (several raylets on one machine)."""
    addrs = [str(n.get("NodeManagerAddress") or n["NodeID"][:12]) for n in nodes]
    out = {}
    for n, a in zip(nodes, addrs):
        out[n["NodeID"]] = f"{a}:{n.get('NodeManagerPort')}" if addrs.count(a) > 1 else a
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
        return {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
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


def scan_cluster(address: str, timeout: float, verify: bool = False, on_event: Optional[Event] = None,
                 now: Optional[str] = None, keep_agents_s: float = 0.0) -> Dict[str, Any]:
    with stdout_to_stderr():
        return _scan_cluster(address, timeout, verify, on_event, now, keep_agents_s)


def _scan_cluster(address: str, timeout: float, verify: bool, on_event: Optional[Event],
                  now: Optional[str], keep_agents_s: float = 0.0) -> Dict[str, Any]:
    ray = import_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from .task import NodeAgent, scan_node

    started = time.monotonic()
    connect(ray, address, timeout)
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        names = node_names(nodes)
        remote = ray.remote(scan_node)
        agent_cls = ray.remote(NodeAgent) if keep_agents_s > 0 else None
        agents: Dict[str, Any] = {}
        retried: set[str] = set()
        pending: Dict[Any, Dict[str, Any]] = {}

        def submit_to_agent(nid: str) -> Any:
            # a detached actor, found again by name by the next scan (get_if_exists)
            assert agent_cls is not None
            agents[nid] = agent_cls.options(
                name=agent_name(nid), namespace=AGENT_NAMESPACE, lifetime="detached", get_if_exists=True,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=nid, soft=False), num_cpus=0,
                max_restarts=0, max_task_retries=0,
            ).remote(keep_agents_s)
            return agents[nid].scan.remote(verify, keep_agents_s)

        entries: Dict[str, Dict[str, Any]] = {}
        for n in nodes:
            nid = n["NodeID"]
            entries[nid] = {"name": names[nid], "ray_node_id": nid, "address": n.get("NodeManagerAddress"),
                            "status": "timeout", "error": None, "seconds": None, "group": None, "facts": None}
            pin = NodeAffinitySchedulingStrategy(node_id=nid, soft=False)
            if agent_cls is not None:
                ref = submit_to_agent(nid)
            else:
                ref = remote.options(
                    scheduling_strategy=pin, num_cpus=0, max_retries=0, retry_exceptions=False,
                    name=f"mlprobe-fleet-scan-{names[nid]}",
                ).remote(verify)
            pending[ref] = {"node": nid, "submitted": time.monotonic()}

        def finish(nid: str, status: str, error: Optional[str], result: Optional[Dict[str, Any]]) -> None:
            e = entries[nid]
            e["seconds"] = round(time.monotonic() - started, 3)
            if result is not None:
                facts, why = accept(result)
                if facts is None:
                    status, error, result = "error", why, None
                else:
                    secs = result.get("seconds")
                    if isinstance(secs, (int, float)) and not isinstance(secs, bool) and 0 <= secs < 1e9:
                        e["seconds"] = secs
                    e["report"] = result["report"]
                    if isinstance(result.get("agent"), dict):
                        e["agent"] = result["agent"]
                    e["facts"] = facts
            e["status"], e["error"] = status, error
            if on_event is not None:
                on_event(e["name"], status, e["seconds"], error or _where(result))

        deadline = started + timeout
        last_poll = 0.0
        alive: Optional[set[str]] = {n["NodeID"] for n in nodes}
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=min(left, POLL_S))
            if time.monotonic() - last_poll >= POLL_S:
                alive = _alive_ids(ray) or alive
                last_poll = time.monotonic()
            for ref in ready:
                nid = pending.pop(ref)["node"]
                try:
                    result = ray.get(ref)
                except Exception as exc:
                    node_alive = alive is None or nid in alive
                    if nid in agents and nid not in retried and node_alive and agent_died(exc):
                        # the kept agent ended (its idle time ran out as this scan reached it, or it
                        # was killed): once, a new one
                        retried.add(nid)
                        pending[submit_to_agent(nid)] = {"node": nid, "submitted": time.monotonic()}
                        continue
                    status, error = classify(exc, node_alive)
                    finish(nid, status, error, None)
                else:
                    finish(nid, "ok", None, result)
            for ref, info in list(pending.items()):
                if alive is not None and info["node"] not in alive:
                    pending.pop(ref)
                    _cancel(ray, ref, agents.get(info["node"]))
                    finish(info["node"], "lost", "the node died or left the cluster during the scan", None)
        alive = _alive_ids(ray) or alive
        for ref, info in pending.items():
            _cancel(ray, ref, agents.get(info["node"]))
            if alive is not None and info["node"] not in alive:
                finish(info["node"], "lost", "the node died or left the cluster during the scan", None)
            else:
                finish(info["node"], "timeout", f"no answer within {timeout:g} s", None)
        source: Dict[str, Any] = {"kind": "ray", "address": address, "timeout_s": timeout,
                                  "seconds": round(time.monotonic() - started, 3)}
        if keep_agents_s > 0:
            source["keep_agents_s"] = keep_agents_s
        return build_fleet(list(entries.values()), source, now=now)
    finally:
        try:
            ray.shutdown()
        except Exception:
            pass


def accept(result: Any) -> Tuple[Optional[Dict[str, Any]], str]:
    """(the report's fleet summary, "") for a node's answer that is a readable report, else (None,
    why): an answer that is not the task's dict, a report of the wrong shape, numbers no document
    holds (10**400, NaN), a summary that fails. One odd node is that node's error, never the scan's."""
    from ..model import jsondoc
    from ..model.validate import DocumentError, check_document

    if not isinstance(result, dict):
        return None, f"the node's answer is not a report (a {type(result).__name__})"
    report = result.get("report")
    if not isinstance(report, dict):
        return None, f"the node's answer holds no report (its report is {type(report).__name__})"
    try:
        jsondoc.check(report)
        check_document(report, "the node's report")
        return summarize(report), ""
    except (DocumentError, ValueError) as exc:
        return None, _first_line(f"the node's report is not one mlprobe can read: {exc}")
    except (RecursionError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        return None, _first_line(f"the node's report is not one mlprobe can read "
                                 f"({type(exc).__name__}: {exc})")


def _where(result: Optional[Dict[str, Any]]) -> str:
    if not result:
        return ""
    src = ((result.get("report") or {}).get("scan") or {}).get("source") or {}
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
