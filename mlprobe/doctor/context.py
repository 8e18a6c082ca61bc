"""What the doctor's checks read: the scan's facts, the plan for them (both typed: model/facts.py,
model/plan.py), the captures only doctor reads (parsed once, on first use), the frameworks' own
enumeration, and where each fact came from, so that a finding can show the capture line behind it."""

from __future__ import annotations

import re
from functools import cached_property
from typing import Dict, List, Optional, Tuple

from ..model.context import RulesContext
from ..model.doctor import Evidence, LibraryLoad, SettingSeen
from ..model.jsontypes import JsonObject
from ..model.facts import Facts, FrameworkFacts, GpuFacts
from ..model.plan import InstalledFinding, Plan, Recommendation
from ..scan.capture import Host
from . import parse as P

# Where an installed framework's version can be read, in the frameworks probe's order.
FRAMEWORK_CAPTURES = ("mlprobe-frameworks.json", "pip-list.txt", "collect_env.txt")
# The WSL kernels: `5.15.153.1-microsoft-standard-WSL2` (WSL 2), `4.4.0-19041-Microsoft` (WSL 1).
WSL_KERNEL = r"microsoft-standard|-Microsoft\b|WSL2|-microsoft"
# Where a GPU's name shows, most specific first.
GPU_CAPTURES = ("nvidia-smi-query.csv", "nvidia-smi-q.txt", "nvidia-smi.txt", "rocminfo.txt", "collect_env.txt",
                "lspci.txt", "clinfo.txt", "Win32_VideoController.json", "dxdiag.txt",
                "system_profiler-SPDisplaysDataType.txt")


class DoctorContext:
    """One doctor run's view of a machine (live or replayed)."""

    def __init__(self, host: Host, facts: Facts, plan: Optional[Plan],
                 enumeration: Optional[P.Enumeration], python: Optional[str] = None,
                 enumeration_note: Optional[str] = None) -> None:
        self.host = host
        self.facts = facts
        self.plan = plan
        self.enumeration = enumeration
        self.python = python
        self.enumeration_note = enumeration_note
        self._texts: Dict[str, Optional[str]] = {}
        # the venv's settings at each start (doctor/starts.py) and what the frameworks loaded (libraries.py)
        self.starts_doc: Optional[JsonObject] = None
        self.settings_seen: Tuple[SettingSeen, ...] = ()
        self.library_loads: Tuple[LibraryLoad, ...] = ()
        self.libraries_capture = ""
        self.libraries_text = ""

    # -- captures ------------------------------------------------------------------------------
    def text(self, name: str) -> Optional[str]:
        """A capture's text, or None when the capture is absent (or could not be read)."""
        if name not in self._texts:
            try:
                cap = self.host.get(name)
            except KeyError:
                self._texts[name] = None
            else:
                self._texts[name] = P.clean(cap.text()) if cap.ok else None
        return self._texts[name]

    def has(self, name: str) -> bool:
        return self.text(name) is not None

    def line(self, name: str, pattern: str, flags: int = re.I) -> Optional[Evidence]:
        text = self.text(name)
        if text is None:
            return None
        hit = P.first_line(text, pattern, flags)
        return Evidence(capture=name, line=hit) if hit else None

    # -- environment ---------------------------------------------------------------------------
    def env(self, name: str) -> Optional[str]:
        return self.host.env(name)

    def env_evidence(self, name: str) -> Evidence:
        value = self.env(name)
        if self.host.kind == "replay":
            hit = P.json_line(self.text("host.json") or "", name)
            if hit:
                return Evidence(capture="host.json", line=hit)
        return Evidence(capture="environment", line=f"{name}={value!r}" if value is not None else f"{name} unset")

    # -- the machine -------------------------------------------------------------------------------
    @property
    def system(self) -> Optional[str]:
        return self.facts.os.system

    def gpus(self, vendor: str) -> List[GpuFacts]:
        return [g for g in self.facts.gpus if g.vendor == vendor]

    def gpu_words(self, gpus: List[GpuFacts]) -> str:
        names = [g.name or f"a {g.vendor} GPU" for g in gpus]
        return ", ".join(dict.fromkeys(names)) or "a GPU"

    def gpu_evidence(self, gpu: GpuFacts) -> Optional[Evidence]:
        name = gpu.name or ""
        words = [w for w in re.split(r"\W+", name) if w and w.lower() not in ("nvidia", "amd", "radeon", "geforce")]
        for cap in GPU_CAPTURES:
            if words:
                ev = self.line(cap, r".*".join(re.escape(w) for w in words[-2:]))
                if ev:
                    return ev
        gfx = gpu.gfx_target
        if gfx:
            return self.line("rocminfo.txt", rf"Name:\s+{re.escape(gfx)}\b")
        return None

    @cached_property
    def wsl(self) -> Tuple[Optional[str], List[Evidence]]:
        """("WSL2" | "WSL1" | None, the evidence)."""
        ev: List[Evidence] = []
        kind: Optional[str] = None
        if self.system not in ("Linux", None):
            return None, []
        info = self.host.info()
        rel = " ".join(str(info.get(k) or "") for k in ("release", "version"))
        for cap, pat in (("proc-version.txt", WSL_KERNEL), ("uname.txt", WSL_KERNEL),
                         ("collect_env.txt", r"^Python platform:.*(" + WSL_KERNEL + ")"),
                         ("rocminfo.txt", r"^WSL environment detected")):
            hit = self.line(cap, pat, 0)
            if hit:
                ev.append(hit)
        if re.search(WSL_KERNEL, rel):
            ev.append(Evidence(capture="host.json", line=P.json_line(self.text("host.json") or "", "release")
                               or f"release {info.get('release')}"))
        if self.env("WSL_DISTRO_NAME"):
            ev.append(self.env_evidence("WSL_DISTRO_NAME"))
        if self.has("wsl-dxg.json"):
            ev.append(Evidence(capture="wsl-dxg.json", line=(self.text("wsl-dxg.json") or "").strip().splitlines()[0]
                               if (self.text("wsl-dxg.json") or "").strip() else "(present)"))
        if not ev:
            return None, []
        joined = " ".join(e.line for e in ev)
        if re.search(r"WSL2|microsoft-standard|WSL environment detected|dev_dxg", joined):
            kind = "WSL2"
        elif re.search(r"-Microsoft\b", joined):
            kind = "WSL1"
        else:
            kind = "WSL2" if self.has("wsl-dxg.json") else "WSL"
        return kind, ev

    @cached_property
    def containers(self) -> List[Tuple[str, Evidence]]:
        from ..model.knowledge import rows

        out: List[Tuple[str, Evidence]] = []
        for row in rows("doctor", "container_markers"):
            if row.get("capture") and self.has(str(row["capture"])):
                body = (self.text(str(row["capture"])) or "").strip().splitlines()
                out.append((str(row["what"]), Evidence(capture=str(row["capture"]),
                                                       line=body[0] if body else f"{row['marker']} exists (empty)")))
            elif row.get("env") and self.env(str(row["env"])):
                out.append((str(row["what"]), self.env_evidence(str(row["env"]))))
            elif row.get("cgroup"):
                hit = self.line("proc-1-cgroup.txt", rf"[/:.-]{re.escape(str(row['cgroup']))}")
                if hit:
                    out.append((str(row["what"]), hit))
        seen, uniq = set(), []
        for what, ev in out:
            if ev.capture not in seen:
                seen.add(ev.capture)
                uniq.append((what, ev))
        return uniq

    def container_what(self) -> str:
        kinds = [w for w, _ in self.containers]
        specific = [k for k in kinds if k != "a container"]
        return (specific or kinds or ["a container"])[0]

    def engine(self) -> str:
        what = self.container_what()
        return "kubernetes" if "Kubernetes" in what else "podman" if "Podman" in what else "docker"

    @cached_property
    def dev_nodes(self) -> Optional[List[P.DevNode]]:
        text = self.text("ls-l-dev.txt")
        return P.parse_ls_l(text) if text is not None else None

    def node(self, path: str) -> Optional[P.DevNode]:
        return next((n for n in self.dev_nodes or [] if n.path == path), None)

    def nodes(self, pattern: str) -> List[P.DevNode]:
        rx = re.compile(pattern)
        return [n for n in self.dev_nodes or [] if rx.fullmatch(n.path)]

    def dev_listing_covers(self, folder: str) -> bool:
        text = self.text("ls-l-dev.txt")
        return text is not None and folder in P.listed_folders(text)

    @cached_property
    def identity(self) -> Optional[P.Identity]:
        text = self.text("id.txt")
        return P.parse_id(text) if text is not None else None

    @cached_property
    def ldconfig(self) -> Optional[Dict[str, List[Tuple[str, str]]]]:
        text = self.text("ldconfig-p.txt")
        return P.parse_ldconfig(text) if text is not None else None

    @cached_property
    def opencl(self) -> Optional[P.OpenClLoader]:
        for name in ("opencl-icd.json", "opencl-loaders.json"):
            text = self.text(name)
            parsed = P.parse_opencl_icd(text) if text is not None else None
            if parsed is not None:
                self.opencl_capture = name
                return parsed
        return None

    opencl_capture = "opencl-icd.json"

    # -- frameworks ----------------------------------------------------------------------------------
    @cached_property
    def frameworks(self) -> Dict[str, FrameworkFacts]:
        return {f.name: f for f in self.facts.frameworks if f.name}

    def framework_evidence(self, name: str) -> Optional[Evidence]:
        fw = self.frameworks.get(name)
        version = (fw.version if fw is not None else None) or ""
        if self.python is not None and self.enumeration is not None:
            return Evidence(capture=self.enumeration.source, line=f"{name} {version}",
                            note=f"asked in {self.python}")
        for cap in FRAMEWORK_CAPTURES:
            text = self.text(cap)
            if text is None:
                continue
            if cap.endswith(".json"):
                hit = P.json_line(text, "name", name)
                ver = P.json_line(text, "version", version) if version else None
                if hit and ver:
                    return Evidence(capture=cap, line=f"{hit.rstrip(',')} ... {ver.rstrip(',')}")
                continue
            pat = rf"(^|[\s\[])(\[pip\d?\]\s+)?{re.escape(name)}(==|\s+){re.escape(version)}" if version else name
            ev = self.line(cap, pat)
            if ev is None and name == "torch" and cap == "collect_env.txt":
                ev = self.line(cap, r"^PyTorch version:")
            if ev:
                return ev
        return None

    def seen(self, name: str) -> Optional[P.FrameworkDevices]:
        if self.enumeration is None:
            return None
        return next((f for f in self.enumeration.frameworks if f.name == name), None)

    # -- the plan --------------------------------------------------------------------------------
    def best(self, framework: str, gpu_only: bool = True) -> Optional[Recommendation]:
        """The plan's best recipe for `framework` (on a GPU backend, unless gpu_only is off)."""
        for rec in self.plan.recommended if self.plan is not None else ():
            if rec.framework == framework and (not gpu_only or rec.backend not in ("cpu", None)):
                return rec
        return None

    def install_line(self, framework: str) -> Optional[str]:
        rec = self.best(framework)
        if rec and rec.commands:
            return " && ".join(rec.commands)
        return None

    def installed(self, package: str) -> Optional[InstalledFinding]:
        return next((f for f in (self.plan.installed if self.plan is not None else ()) if f.package == package), None)

    @cached_property
    def rules_ctx(self) -> RulesContext:
        from ..plan.context import derive
        from ..recipes import knowledge

        return derive(self.facts, knowledge())
