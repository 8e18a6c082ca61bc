"""Groups and drift. Nodes are grouped by hardware (summary.hardware_key); inside a group the
software each node runs (GPU driver, CUDA and ROCm versions, each framework's build) is compared
field by field with the group's majority, and a node that differs is drift. Grouping by hardware
first is what makes drift visible: an H200 node on an older driver is one odd node among its peers,
not a group of its own."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Dict, Iterable, List, Optional, Tuple

from packaging.version import InvalidVersion, Version

from .model import Drift, Group, GroupBuild, Hardware, NodeSummary, SoftwareField
from .summary import hardware_key, hardware_label, key_id


def software_of(s: NodeSummary) -> Dict[str, Optional[str]]:
    """field -> value: the driver/runtime fields, then `framework:NAME` -> that framework's build."""
    out: Dict[str, Optional[str]] = dict(s.software())
    for build in s.frameworks:
        name = build.split(" ", 1)[0]
        key = f"framework:{name}"
        out[key] = build if key not in out else f"{out[key]}; {build}"
    return out


def version_order(value: Optional[str]) -> Tuple[Tuple[int, Any], ...]:
    """A value's words in version order: `580.159.04` after `580.95.05`, `torch 2.11.0 cu130` after
    `torch 2.9.1 cu128` (packaging's Version for each word that is one; in the rest, runs of digits
    compared as numbers: `550.100.01-1ubuntu1` after `550.54.15-1ubuntu1`)."""
    out: List[Tuple[int, Any]] = []
    for word in re.split(r"[\s,;]+", value or ""):
        if not word:
            continue
        try:
            out.append((1, Version(word)))
        except InvalidVersion:  # 550.54.15-1ubuntu1: its numbers compared as numbers, the rest as text
            out.append((0, tuple((0, int(part)) if part.isdigit() else (1, part)
                                 for part in re.findall(r"\d+|\D+", word))))
    return tuple(out)


def _majority(values: Counter[Optional[str]]) -> Tuple[Optional[str], int]:
    """The most common value; a tie (marked contested by the caller) goes to a known value over an
    absent one, then to the newest by version (not the one that sorts last as text), so that the
    answer does not depend on the order of the input."""
    def key(kv: Tuple[Optional[str], int]) -> Tuple[Any, ...]:
        return (kv[1], kv[0] is not None, version_order(kv[0]), kv[0] or "")

    try:
        best = max(values.items(), key=key)
    except TypeError:  # words that compare as neither (never for real values): text order
        best = max(values.items(), key=lambda kv: (kv[1], kv[0] is not None, kv[0] or ""))
    return best[0], best[1]


def build_groups(nodes: Iterable[Tuple[str, NodeSummary]]) -> Tuple[List[Group], List[Drift]]:
    """(groups, drift) from (node name, summary) pairs of the nodes that have a report. Nodes of the
    same report share one summary object (fleet merge reads each distinct report once): the key,
    the software fields and the differences are worked out once per distinct summary, so a group of
    100,000 identical nodes costs what its few distinct reports cost, plus one pass over the names."""
    by_key: Dict[str, List[Tuple[str, NodeSummary]]] = {}
    keys: Dict[int, str] = {}
    for name, s in nodes:
        k = keys.get(id(s))
        if k is None:
            k = keys[id(s)] = hardware_key(s)
        by_key.setdefault(k, []).append((name, s))
    groups: List[Group] = []
    drift: List[Drift] = []
    for key, members in by_key.items():
        gid = "g-" + key_id(key)
        weight: Counter[int] = Counter(id(s) for _, s in members)
        distinct: Dict[int, NodeSummary] = {}
        for _, s in members:
            distinct.setdefault(id(s), s)
        softs = {i: software_of(s) for i, s in distinct.items()}
        fields = sorted({f for sw in softs.values() for f in sw}, key=lambda f: (f.startswith("framework:"), f))
        software: Dict[str, SoftwareField] = {}
        for f in fields:
            counts: Counter[Optional[str]] = Counter()
            for i, sw in softs.items():
                counts[sw.get(f)] += weight[i]
            value, n = _majority(counts)
            software[f] = SoftwareField(majority=value, nodes=n, variants=len(counts),
                                        contested=n * 2 <= len(members) and len(counts) > 1)
        diffs_of = {i: [(f, sw.get(f)) for f in fields if sw.get(f) != software[f].majority]
                    for i, sw in softs.items()}
        drift_nodes: List[str] = []
        rep: Optional[Tuple[str, NodeSummary]] = None
        for name, s in members:
            diffs = diffs_of[id(s)]
            if not diffs:
                rep = rep or (name, s)
                continue
            drift_nodes.append(name)
            for f, v in diffs:
                drift.append(Drift(node=name, group=gid, field=f, value=v, majority=software[f].majority,
                                   majority_nodes=software[f].nodes, group_nodes=len(members),
                                   contested=software[f].contested))
        rep_name, rep_summary = rep or members[0]
        groups.append(Group(
            id=gid,
            label=hardware_label(rep_summary),
            hardware=Hardware(cpu=rep_summary.cpu, gpus=rep_summary.gpus),
            count=len(members),
            nodes=tuple(name for name, _ in members),
            software=software,
            representative=rep_name,
            plan=rep_summary.plan,
            installed=_installed_findings(members),
            drift_nodes=tuple(drift_nodes),
        ))
    groups.sort(key=lambda g: (-g.count, g.label))
    return groups, drift


def _installed_findings(members: List[Tuple[str, NodeSummary]]) -> Tuple[GroupBuild, ...]:
    """Each distinct finding on an installed build (plan `installed`), with the nodes that have it."""
    seen: Dict[Tuple[Optional[str], ...], List[str]] = {}
    for name, s in members:
        for i in s.installed:
            seen.setdefault((i.package, i.version, i.build, i.status, i.message), []).append(name)
    found = [GroupBuild(package=k[0], version=k[1], build=k[2], status=k[3], message=k[4], count=len(names),
                        nodes=tuple(names)) for k, names in seen.items()]
    return tuple(sorted(found, key=lambda e: (e.status == "ok", -e.count, e.package or "")))
