"""The one version key of every JSON document mlprobe writes: `"schema": "mlprobe.<kind>/<n>"`
(`mlprobe.scan/2`, `mlprobe.plan/2`, `mlprobe.verify/1`, ...). `mlprobe schema KIND` prints each
document's JSON Schema, whose `$id` is that same value.

Documents written before the key was one kept their version under a key of their own
(`report_version` for a scan or a report, `plan_version`, `doctor_version`, `fleet_version`,
`diff_version`, all 1):
`upgraded` reads them at the door into today's key, so replay, merge and diff keep reading them.
Pure: no I/O."""

from __future__ import annotations

import re
from typing import Any, Dict, Mapping, Optional, Tuple

# kind -> the version this mlprobe writes (and the newest it reads)
CURRENT: Dict[str, int] = {
    "scan": 2, "report": 2, "plan": 2, "doctor": 2, "fleet": 2,
    "verify": 1, "install": 1, "bundle": 1, "fleet-bundles": 1, "diff": 2, "why-not": 1, "export": 1,
    "install-recover": 1, "install-settings": 1, "install-detach": 1, "install-unpin": 1, "error": 1,
}
# the key a kind's version had before `schema` (version 1 of each)
OLD_KEYS: Dict[str, str] = {
    "scan": "report_version", "report": "report_version", "plan": "plan_version",
    "doctor": "doctor_version", "fleet": "fleet_version", "diff": "diff_version",
}
_ID = re.compile(r"^mlprobe\.([a-z][a-z-]*)/(\d+)$")


class VersionError(ValueError):
    """A version key mlprobe cannot read: of another kind, newer than this mlprobe, or malformed."""


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a JSON list"
    if isinstance(v, dict):
        return "a JSON object"
    return type(v).__name__


def schema_id(kind: str) -> str:
    """`mlprobe.<kind>/<n>`, the value of the `schema` key this mlprobe writes."""
    return f"mlprobe.{kind}/{CURRENT[kind]}"


def with_id(schema: Dict[str, Any], kind: str) -> Dict[str, Any]:
    """A published JSON Schema with its `$id` (the document's own `schema` value, `mlprobe.plan/2`)
    and the `schema` key's constant: one style for every kind."""
    out = {k: v for k, v in schema.items() if k not in ("$schema", "$id")}
    props = dict(out.get("properties") or {})
    props.pop(OLD_KEYS.get(kind, ""), None)
    props = {"schema": {"const": schema_id(kind)}, **{k: v for k, v in props.items() if k != "schema"}}
    required = ["schema", *[r for r in out.get("required") or [] if r not in ("schema", OLD_KEYS.get(kind))]]
    return {"$schema": schema.get("$schema", "https://json-schema.org/draft/2020-12/schema"), "$id": schema_id(kind),
            **{**out, "required": required, "properties": props}}


def parse(value: Any) -> Optional[Tuple[str, int]]:
    """("plan", 2) of "mlprobe.plan/2"; None for anything else."""
    m = _ID.match(value) if isinstance(value, str) else None
    return (m.group(1), int(m.group(2))) if m else None


def version_of(doc: Mapping[str, Any], kind: str) -> Optional[int]:
    """The version of a document of this kind, from `schema` or from the kind's old key (both are
    checked where both are present); None when it carries neither (hand-made documents, read as the
    first version). VersionError when a key names another kind, a version newer than this mlprobe
    reads, or is not a version at all."""
    n: Optional[int] = None
    if "schema" in doc:
        got = parse(doc["schema"])
        if got is None:
            raise VersionError(f"schema is {doc['schema']!r}, expected {schema_id(kind)!r}")
        if got[0] != kind:
            raise VersionError(f"it is a {got[0]} document ({doc['schema']}), not a {kind} document")
        n = got[1]
        if n > CURRENT[kind]:
            raise VersionError(f"{doc['schema']} is newer than this mlprobe reads ({schema_id(kind)}): it was "
                               "written by a newer mlprobe; upgrade mlprobe to read it")
        if n < 1:
            raise VersionError(f"{doc['schema']} is not a version mlprobe ever wrote")
    old = OLD_KEYS.get(kind)
    if old is not None and old in doc:
        v = doc[old]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
            raise VersionError(f"{old} is {_type_name(v)} ({v!r}), expected a number such as 1")
        if int(v) > 1:  # the old key only ever said 1 (1.5: version 1 with additions); today's say `schema`
            raise VersionError(f"{old} {v} is newer than this mlprobe reads: it was written by a newer "
                               "mlprobe; upgrade mlprobe to read it")
        if int(v) < 1:
            raise VersionError(f"{old} {v} is not a version mlprobe ever wrote")
        n = 1 if n is None else n
    return n


# The sections of a report that are documents of their own kind.
_SECTIONS = {"report": (("scan", "scan"), ("plan", "plan"), ("doctor", "doctor"))}


def upgraded(doc: Any, kind: str) -> Any:
    """The document with today's version key: an old key (`report_version: 1`, ...) becomes
    `"schema": "mlprobe.<kind>/1"` (and so in a report's scan, plan and doctor sections, and in the
    reports a fleet embeds). The rest of an old document reads as today's: the versions differ in
    that key only. Anything that is not a JSON object is returned as it is (its reader says why)."""
    if not isinstance(doc, dict):
        return doc
    old = OLD_KEYS.get(kind)
    out = doc
    if old is not None and old in doc:
        out = {"schema": f"mlprobe.{kind}/{doc[old]}" if isinstance(doc[old], int) and not isinstance(doc[old], bool)
               else doc[old], **{k: v for k, v in doc.items() if k not in (old, "schema")}}
    for key, sub in _SECTIONS.get(kind, ()):
        if isinstance(out.get(key), dict) and OLD_KEYS[sub] in out[key]:
            out = {**out, key: upgraded(out[key], sub)}
    if kind == "fleet" and isinstance(out.get("nodes"), list):
        out = {**out, "nodes": [_node(n) for n in out["nodes"]]}
    return out


def _node(node: Any) -> Any:
    if isinstance(node, dict) and isinstance(node.get("report"), dict):
        return {**node, "report": upgraded(node["report"], "report")}
    return node


__all__ = ["CURRENT", "OLD_KEYS", "VersionError", "parse", "schema_id", "upgraded", "version_of", "with_id"]
