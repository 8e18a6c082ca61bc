"""The fleet report: one versioned document for many nodes.

    {"fleet_version": 1, "kind": "mlprobe-fleet", "mlprobe_version": ..., "generated_at": ...,
     "source": {"kind": "ray", ...} | {"kind": "merge", ...},
     "summary": {"nodes": N, "by_status": {...}, "groups": G, "drift_nodes": D},
     "nodes": [{"name", "status", "error", "group", "facts", "report"?, "ray_node_id"?, ...}],
     "groups": [{"id", "label", "hardware", "count", "nodes", "software", "plan", "installed",
                 "drift_nodes"}],
     "drift": [{"node", "group", "field", "value", "majority", ...}],
     "warnings": [...]}

Its typed form is fleet/model.py's FleetDocument; its JSON Schema is fleet.schema.json
(`mlprobe schema fleet`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional, Sequence

from .. import __version__
from ..model.jsontypes import JsonObject
from ..report.envelope import utc_now
from .group import build_groups
from ..model.docversion import parse, schema_id
from .model import Drift, FleetDocument, FleetNode, FleetSource, FleetSummary, Group

FLEET_SCHEMA = schema_id("fleet")
FLEET_KIND = "mlprobe-fleet"

# ok: a report; error: the scan failed on the node; timeout: no answer within the time limit;
# lost: the node died (or left the cluster) during the scan; no-mlprobe: the node's Python cannot
# import mlprobe.
STATUSES = ("ok", "error", "timeout", "lost", "no-mlprobe")

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fleet.schema.json")


def build_fleet(nodes: Sequence[FleetNode], source: FleetSource, warnings: Optional[List[str]] = None,
                now: Optional[str] = None) -> FleetDocument:
    """The fleet report from its nodes (each with `facts`, the summary of its report, when its status
    is ok), each node with its group set."""
    ok = [(n.name, n.facts) for n in nodes if n.status == "ok" and n.facts is not None]
    groups, drift = build_groups(ok)
    return assemble(nodes, groups, drift, source, warnings, now)


def assemble(nodes: Sequence[FleetNode], groups: Sequence[Group], drift: Sequence[Drift], source: FleetSource,
             warnings: Optional[Sequence[str]] = None, now: Optional[str] = None) -> FleetDocument:
    """The fleet report from its nodes and the groups and drift made of them."""
    group_of = {name: g.id for g in groups for name in g.nodes}
    return FleetDocument(
        schema=FLEET_SCHEMA,
        kind=FLEET_KIND,
        mlprobe_version=__version__,
        generated_at=now or utc_now(),
        source=source,
        summary=fleet_summary(nodes, groups, drift),
        nodes=tuple(dataclasses.replace(n, group=group_of.get(n.name)) for n in nodes),
        groups=tuple(groups),
        drift=tuple(drift),
        warnings=tuple(warnings or ()),
    )


def fleet_summary(nodes: Sequence[FleetNode], groups: Sequence[Group], drift: Sequence[Drift]) -> FleetSummary:
    by_status: Dict[str, int] = {}
    for n in nodes:
        by_status[n.status] = by_status.get(n.status, 0) + 1
    return FleetSummary(nodes=len(nodes), by_status=by_status, groups=len(groups),
                        drift_nodes=len({d.node for d in drift}))


def fleet_schema() -> JsonObject:
    """fleet.schema.json, the published schema (a file the package ships)."""
    with open(SCHEMA_PATH, encoding="utf-8") as fh:
        doc = json.load(fh)
    if not isinstance(doc, dict):
        raise ValueError(f"{SCHEMA_PATH}: not a JSON object")
    return doc


def is_fleet(doc: object) -> bool:
    """A fleet report: `"schema": "mlprobe.fleet/N"`, or an old one's `fleet_version`."""
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        return False
    got = parse(doc.get("schema"))
    return (got is not None and got[0] == "fleet") or "fleet_version" in doc
