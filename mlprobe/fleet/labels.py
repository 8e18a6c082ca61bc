"""Kubernetes node labels for node-feature-discovery's `local` feature source: a file in
/etc/kubernetes/node-feature-discovery/features.d/ with one `<namespace>/<name>=<value>` line per
label, which nfd-worker reads and nfd-master puts on the node.

The rules every label here passes are NFD's (pkg/apis/nfd/validate Label(), built on Kubernetes'
IsQualifiedName and IsValidLabelValue):
- name: `<prefix>/<name>`; the prefix a DNS-1123 subdomain (lower-case alphanumerics, '-' and '.',
  each part beginning and ending alphanumeric, at most 253 characters); the name at most 63
  characters of alphanumerics, '-', '_' and '.', beginning and ending alphanumeric;
- a prefix of kubernetes.io or a subdomain of it is refused by nfd-master, except
  feature.node.kubernetes.io, profile.node.kubernetes.io and their subdomains (so the default,
  mlprobe.feature.node.kubernetes.io, needs no -extra-label-ns);
- value: at most 63 characters, empty or alphanumerics, '-', '_' and '.', beginning and ending
  alphanumeric.
A feature file larger than 64 kB is ignored by NFD."""

from __future__ import annotations

import re
from collections import Counter
from typing import Dict, List, Optional, Tuple

from .. import __version__
from ..model.facts import Facts, GpuFacts
from ..model.jsontypes import JsonObject
from ..model.plan import Plan, plan_of_report
from ..ui import safe_line

DEFAULT_PREFIX = "mlprobe.feature.node.kubernetes.io"
FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
MAX_FILE_BYTES = 64 * 1024

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_ALLOWED_K8S = ("feature.node.kubernetes.io", "profile.node.kubernetes.io")


def prefix_problems(prefix: str) -> List[str]:
    out = []
    if len(prefix) > 253:
        out.append("the prefix is longer than 253 characters")
    if not _SUBDOMAIN.match(prefix):
        out.append("the prefix must be a DNS subdomain: lower-case letters, digits, '-' and '.', each part "
                   "beginning and ending with a letter or digit (e.g. example.com)")
    if (prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io")) and not any(
            prefix == a or prefix.endswith("." + a) for a in _ALLOWED_K8S):
        out.append("nfd-master refuses the kubernetes.io namespace except feature.node.kubernetes.io, "
                   "profile.node.kubernetes.io and their subdomains")
    return out


def label_problems(key: str, value: str) -> List[str]:
    """Why NFD would refuse this label (empty when it is valid)."""
    out: List[str] = []
    prefix, sep, name = key.rpartition("/")
    if not sep:
        out.append("no namespace prefix (`prefix/name`)")
    else:
        out.extend(prefix_problems(prefix))
    if not name or len(name) > 63:
        out.append(f"the name {name!r} must be 1 to 63 characters")
    elif not _NAME.match(name):
        out.append(f"the name {name!r} must be alphanumerics, '-', '_' and '.', beginning and ending alphanumeric")
    if len(value) > 63:
        out.append(f"the value {value!r} is longer than 63 characters")
    elif not _VALUE.match(value):
        out.append(f"the value {value!r} must be empty or alphanumerics, '-', '_' and '.', beginning and ending "
                   "alphanumeric")
    return out


def clean(text: object, limit: int = 63) -> str:
    """Any text as a valid label value (or name part): other characters become '-', runs of them
    one, and the ends are trimmed to an alphanumeric. May be empty."""
    s = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text))
    s = re.sub(r"-{2,}", "-", s)
    s = re.sub(r"^[^A-Za-z0-9]+", "", s)[:limit]
    return re.sub(r"[^A-Za-z0-9]+$", "", s)


def _version_key(v: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _mig_labels(gpus: List[GpuFacts]) -> List[Tuple[str, object]]:
    """MIG as NVIDIA's GPU feature discovery labels it, under mlprobe's prefix: `mig.capable` where the GPU
    reports a MIG mode, each profile's count (`mig-1g.10gb.count`, GFD's `nvidia.com/mig-<profile>.count`),
    the total (`mig.count`), and where every GPU is sliced into one profile, the slice as GFD's single
    strategy names the product (`<GPU>-MIG-<profile>`). A MIG device is the device a job gets."""
    out: List[Tuple[str, object]] = []
    if any(g.mig_mode for g in gpus):
        out.append(("gpu.nvidia.mig.capable", "true"))
    on = [g for g in gpus if (g.mig_mode or "").lower() == "enabled"]
    if not on:
        return out
    profiles = Counter(m.profile for g in on for m in g.mig)
    out.append(("gpu.nvidia.mig.count", sum(len(g.mig) or g.mig_devices for g in on)))
    for profile in sorted(profiles):
        out.append((f"gpu.nvidia.mig-{clean(profile).lower()}.count", profiles[profile]))
    if len(on) == len(gpus) and len(profiles) == 1 and all(g.mig for g in on):
        (profile,) = profiles
        names = {g.name for g in on if g.name}
        if len(names) == 1:
            out.append(("gpu.nvidia.mig.product", f"{names.pop().replace('NVIDIA ', '', 1)}-MIG-{profile}"))
    return out


def labels_for(report: JsonObject, prefix: str = DEFAULT_PREFIX) -> Dict[str, str]:
    """name -> value for one node, from its report document (`mlprobe report`: scan + plan; or a scan
    JSON), read here into the scan's Facts and the Plan (leniently, as a report nobody checked)."""
    scan_v = report.get("scan")
    return node_labels(Facts.from_report(scan_v if isinstance(scan_v, dict) else report),
                       plan_of_report(report.get("plan")), prefix)


def node_labels(facts: Facts, plan: Optional[Plan], prefix: str = DEFAULT_PREFIX) -> Dict[str, str]:
    """name -> value for one node, from its scan and plan."""
    cpu = facts.cpu
    gpus = facts.gpus
    raw: List[Tuple[str, object]] = []
    if cpu.arch:
        raw.append(("cpu.arch", cpu.arch))
    if cpu.x86_64_level is not None:
        raw.append(("cpu.x86-64-level", cpu.x86_64_level))
    raw.append(("gpu.count", len(gpus)))
    vendors = sorted({g.vendor or "unknown" for g in gpus})
    if vendors:
        raw.append(("gpu.vendor", vendors[0] if len(vendors) == 1 else "mixed"))
    for vendor in vendors:
        mine = [g for g in gpus if (g.vendor or "unknown") == vendor]
        v = clean(vendor).lower() or "unknown"
        raw.append((f"gpu.{v}.count", len(mine)))
        # the discrete GPU's name where there is one (an APU's iGPU beside a Radeon card is not the model)
        names = [g.name for g in mine if g.name and not g.integrated] or [g.name for g in mine if g.name]
        if names:
            raw.append((f"gpu.{v}.model", max(sorted(set(names)), key=names.count)))
        ccs = sorted({g.compute_capability for g in mine if g.compute_capability}, key=_version_key)
        if ccs:
            # what every GPU of this vendor on the node supports: the lowest
            raw.append((f"gpu.{v}.compute-capability", ccs[0]))
        for gfx in sorted({t for g in mine for t in [g.gfx_target or g.runtime_gfx_target] if t}):
            raw.append((f"gpu.{v}.{clean(gfx).lower()}", "true"))
        if vendor == "nvidia":
            raw.extend(_mig_labels(mine))
    cuda = facts.runtimes.cuda
    driver = (cuda.driver_version if cuda else None) or next(
        (g.driver_version for g in gpus if g.vendor == "nvidia" and g.driver_version), None)
    if driver:
        raw.append(("cuda.driver", driver))
        major = re.match(r"\d+", driver)
        if major:
            raw.append(("cuda.driver.major", major.group(0)))
    if cuda and cuda.version:
        raw.append(("cuda.version", cuda.version))
    rocm = facts.runtimes.rocm
    if rocm and rocm.version:
        raw.append(("rocm.version", rocm.version))
    if plan is not None:
        backend_of = {r.recipe: r.backend for r in plan.recommended}
        for fw in sorted(plan.top):
            recipe = plan.top[fw]
            f = clean(fw).lower()
            raw.append((f"backend.{f}", backend_of.get(recipe) or "none" if recipe else "none"))
            if recipe:
                raw.append((f"recipe.{f}", recipe))
    raw.append(("mlprobe.version", __version__))
    out: Dict[str, str] = {}
    for name, value in raw:
        v = clean(value)
        n = clean(name)
        if n and (v or value == ""):
            out[f"{prefix}/{n}"] = v
    return out


def features_file(labels: Dict[str, str], source: Optional[str] = None,
                  overrides: Optional[Dict[str, str]] = None) -> str:
    lines = [f"# node labels written by mlprobe {__version__} for node-feature-discovery's local source",
             f"# ({FEATURES_DIR}/); regenerate with `mlprobe labels -o FILE`"]
    if source:
        lines.append(f"# {safe_line(source)}")
    for name, value in (overrides or {}).items():
        lines.append(f"# overridden: {safe_line(name)}={safe_line(value)[:200]} (these labels follow the override, "
                     "not the node's own facts)")
    lines.extend(f"{k}={v}" for k, v in labels.items())
    return "\n".join(lines) + "\n"
