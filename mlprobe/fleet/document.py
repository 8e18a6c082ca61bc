"""The fleet report: one versioned document for many nodes.

    {"fleet_version": 1, "kind": "mlprobe-fleet", "mlprobe_version": ..., "generated_at": ...,
     "source": {"kind": "ray", ...} | {"kind": "merge", ...},
     "summary": {"nodes": N, "by_status": {...}, "groups": G, "drift_nodes": D},
     "nodes": [{"name", "status", "error", "group", "facts", "report"?, "ray_node_id"?, ...}],
     "groups": [{"id", "label", "hardware", "count", "nodes", "software", "plan", "installed",
                 "drift_nodes"}],
     "drift": [{"node", "group", "field", "value", "majority", ...}],
     "warnings": [...]}

Its JSON Schema is fleet.schema.json (`mlprobe schema fleet`).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

from .. import __version__
from ..report.envelope import utc_now
from .group import build_groups

FLEET_VERSION = 1
FLEET_KIND = "mlprobe-fleet"
# ok: a report; error: the scan failed on the node; timeout: no answer within the time limit;
# lost: the node died (or left the cluster) during the scan; no-mlprobe: the node's Python cannot
# import mlprobe.
STATUSES = ("ok", "error", "timeout", "lost", "no-mlprobe")

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fleet.schema.json")


def build_fleet(nodes: List[Dict[str, Any]], source: Dict[str, Any], warnings: Optional[List[str]] = None,
                now: Optional[str] = None) -> Dict[str, Any]:
    """The fleet report from node entries (each with `name`, `status` and, when ok, `facts`, the
    summary of its report). Sets each node's `group`."""
    ok = [(n["name"], n["facts"]) for n in nodes if n.get("status") == "ok" and n.get("facts")]
    groups, drift = build_groups(ok)
    group_of = {name: g["id"] for g in groups for name in g["nodes"]}
    by_status: Dict[str, int] = {}
    for n in nodes:
        n["group"] = group_of.get(n["name"])
        by_status[n["status"]] = by_status.get(n["status"], 0) + 1
    return {
        "fleet_version": FLEET_VERSION,
        "kind": FLEET_KIND,
        "mlprobe_version": __version__,
        "generated_at": now or utc_now(),
        "source": source,
        "summary": {
            "nodes": len(nodes),
            "by_status": by_status,
            "groups": len(groups),
            "drift_nodes": len({d["node"] for d in drift}),
        },
        "nodes": nodes,
        "groups": groups,
        "drift": drift,
        "warnings": list(warnings or []),
    }


def fleet_schema() -> Dict[str, Any]:
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        doc = json.load(fh)
    assert isinstance(doc, dict)
    return doc


def is_fleet(doc: Any) -> bool:
    return isinstance(doc, dict) and "fleet_version" in doc and isinstance(doc.get("nodes"), list)
