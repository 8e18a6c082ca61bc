"""What mlprobe decided for one machine, in the terms other tools take: the indexes the recipe's
packages must come from (with the platforms and Pythons each one serves), each package's
requirement, the recipe's environment settings, and the machine's own facts (platform, Python,
CUDA, libc, macOS, CPU microarchitecture). Pure: a scan report and a recommendation in, an `Export`
out; the writers (uv, pixi, conda) only render it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Tuple
from urllib.parse import urlsplit, urlunsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import StageError
from ..model import knowledge as kb
from ..model.facts import Facts
from ..model.plan import Recommendation

# Python's sys.platform per OS as mlprobe's facts name it (the uv guide's markers use these)
SYS_PLATFORM = {"Linux": "linux", "Windows": "win32", "Darwin": "darwin"}
# platform.machine() per OS for a CPU architecture as mlprobe's facts name it
_MACHINE = {
    "Linux": {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64",
              "ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64"},
    "Darwin": {"x86_64": "x86_64", "arm64": "arm64", "aarch64": "arm64"},
    "Windows": {"x86_64": "AMD64", "amd64": "AMD64", "arm64": "ARM64", "aarch64": "ARM64"},
}
# conda's subdir per (OS, platform.machine())
_SUBDIR = {("Linux", "x86_64"): "linux-64", ("Linux", "aarch64"): "linux-aarch64",
           ("Linux", "ppc64le"): "linux-ppc64le", ("Linux", "s390x"): "linux-s390x",
           ("Linux", "riscv64"): "linux-riscv64", ("Darwin", "x86_64"): "osx-64",
           ("Darwin", "arm64"): "osx-arm64", ("Windows", "AMD64"): "win-64", ("Windows", "ARM64"): "win-arm64"}
_TORCH_FAMILIES = ("cuda", "rocm", "cpu", "xpu")


@dataclass(frozen=True)
class Machine:
    """The facts of the machine exported for that the other tools' files carry."""

    description: str
    system: Optional[str]  # Linux, Darwin, Windows
    sys_platform: Optional[str]
    platform_machine: Optional[str]
    conda_subdir: Optional[str]
    python: Optional[str]  # major.minor
    cuda: Optional[str]  # the driver's CUDA, major.minor
    glibc: Optional[str]
    macos: Optional[str]
    linux: Optional[str]  # kernel version, numeric part
    microarchitecture: Optional[str]  # archspec's name
    gpus: Tuple[str, ...] = ()


@dataclass(frozen=True)
class IndexUse:
    """A build index the export names: its uv name, its URL (without credentials), the platforms
    (sys_platform values) and Pythons it serves, and the credential variables uv reads for it."""

    name: str
    url: str
    platforms: Tuple[str, ...]
    python: Optional[str]
    had_credentials: bool = False
    source: Optional[str] = None

    @property
    def marker(self) -> Optional[str]:
        """The environment marker that gates a package to this index: None where it serves every
        platform a project resolves for (Linux, Windows and macOS)."""
        if not self.platforms or set(self.platforms) >= {"linux", "win32", "darwin"}:
            return None
        return " or ".join(f"sys_platform == '{p}'" for p in self.platforms)

    @property
    def credential_vars(self) -> Tuple[str, str]:
        env = re.sub(r"[^A-Za-z0-9]", "_", self.name).upper()
        return f"UV_INDEX_{env}_USERNAME", f"UV_INDEX_{env}_PASSWORD"


@dataclass(frozen=True)
class Pin:
    """One package of the export: its requirement (`torch==2.13.0`) and the index it must come from
    (None: the project's default index). `marker` limits the requirement itself to the platforms
    its index serves (a package only that index has, such as pytorch-triton-rocm)."""

    name: str
    requirement: str
    index: Optional[str]
    marker: Optional[str] = None
    why: str = ""
    # the marker of its source entry where it is not its index's (a fleet's: the nodes that take it there)
    source_marker: Optional[str] = None

    @property
    def dependency(self) -> str:
        return f"{self.requirement} ; {self.marker}" if self.marker else self.requirement


@dataclass(frozen=True)
class Export:
    recipe: str
    title: str
    framework: Optional[str]
    backend: Optional[str]
    machine: Machine
    indexes: Tuple[IndexUse, ...]
    pins: Tuple[Pin, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    notes: Tuple[str, ...] = ()
    sources: Tuple[str, ...] = ()

    def index(self, name: Optional[str]) -> Optional[IndexUse]:
        return next((i for i in self.indexes if i.name == name), None)


def _major_minor(text: Optional[str]) -> Optional[str]:
    m = re.match(r"\s*(\d+)(?:\.(\d+))?", text or "")
    if not m:
        return None
    return f"{m.group(1)}.{m.group(2) or '0'}"


def machine_of(facts: Facts) -> Machine:
    from .archspec_name import microarchitecture

    system = facts.os.system
    arch = (facts.python.machine or facts.cpu.arch or "").strip()
    mach = _MACHINE.get(system or "", {}).get(arch.lower(), arch or None)
    cuda = facts.runtimes.cuda.version if facts.runtimes.cuda is not None else None
    linux = None
    if system == "Linux" and facts.os.release:
        m = re.match(r"(\d+\.\d+(?:\.\d+)?)", facts.os.release)
        linux = m.group(1) if m else None
    gpus = tuple(g.name or g.vendor for g in facts.gpus if not g.integrated or g.apis)
    parts = [p for p in (facts.os.distro or system, mach, facts.cpu.model) if p]
    return Machine(
        description=", ".join(parts) or "the machine", system=system, sys_platform=SYS_PLATFORM.get(system or ""),
        platform_machine=mach, conda_subdir=_SUBDIR.get((system or "", mach or "")),
        python=_major_minor(facts.python.version), cuda=_major_minor(cuda) if cuda else None,
        glibc=_major_minor(facts.os.glibc) if facts.os.glibc else None,
        macos=_major_minor(facts.os.macos_version) if facts.os.macos_version else None, linux=linux,
        microarchitecture=microarchitecture(facts), gpus=gpus)


def _wheel_rows(suffix: str) -> List[Mapping[str, object]]:
    """torch_wheels.json rows of one PyTorch index suffix (cu130, rocm7.14, cpu, xpu)."""
    return [r for fam in _TORCH_FAMILIES for r in kb.rows("torch_wheels", fam) if r.get("index") == suffix]


def _strip_credentials(url: str) -> Tuple[str, bool]:
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, False
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=host)), True


def _index_name(suffix: Optional[str], url: str, pytorch: bool) -> str:
    if pytorch and suffix:
        return f"pytorch-{suffix}"
    tail = "-".join(p for p in urlsplit(url).path.split("/") if p)[-40:] or urlsplit(url).hostname or "index"
    return re.sub(r"[^A-Za-z0-9._-]", "-", tail).strip("-.") or "index"


def _is_pytorch_index(url: str, suffix: Optional[str]) -> bool:
    """An index of PyTorch's own layout: <base>/<suffix> where the suffix names a build series the
    wheel tables know (cpu, cuXYZ, rocmX.Y, xpu); a mirror set with MLPROBE_PYTORCH_INDEX_URL too."""
    return bool(suffix) and bool(_wheel_rows(suffix or "")) and urlsplit(url).path.rstrip("/").endswith("/" + (suffix or ""))


def _index_use(url: str, suffix: Optional[str], machine: Machine, series: Optional[str]) -> IndexUse:
    clean, had = _strip_credentials(url)
    pytorch = _is_pytorch_index(clean, suffix)
    rows = _wheel_rows(suffix or "") if pytorch else []
    platforms: List[str] = []
    for r in rows:
        os_names = r.get("os")
        for os_name in os_names if isinstance(os_names, list) else []:
            p = SYS_PLATFORM.get(str(os_name))
            if p and p not in platforms:
                platforms.append(p)
    if not platforms and machine.sys_platform:
        platforms = [machine.sys_platform]  # known to serve the machine it was planned for, nothing more
    row = next((r for r in rows if str(r.get("torch")) == (series or "")), rows[0] if rows else None)
    python = str(row["python"]) if row and row.get("python") else None
    source = str(row["source"]) if row and row.get("source") else None
    order = {"linux": 0, "win32": 1, "darwin": 2}
    return IndexUse(name=_index_name(suffix, clean, pytorch), url=clean,
                    platforms=tuple(sorted(platforms, key=lambda p: order.get(p, 9))), python=python,
                    had_credentials=had, source=source)


def _public(version: str) -> Optional[str]:
    try:
        return Version(version).public
    except InvalidVersion:
        return None


def _requirement(text: str, facts: Facts, label: Optional[str], from_index: Optional[IndexUse],
                 suffix: Optional[str], series: Optional[str]) -> Tuple[str, str]:
    """The requirement written for one recipe package, and why: the recipe's own specifier where it
    has one; else the installed build's version where the machine has that build (`torch==2.13.0`,
    which the chosen index serves as 2.13.0+cpu); else a lower bound the index serves (the plan's
    series, where the wheel table lists it for that index); else the bare name."""
    req = Requirement(text)
    if req.specifier:
        return text, "the recipe's own pin"
    name = canonicalize_name(req.name)
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    marker = f" ; {req.marker}" if req.marker else ""
    installed = facts.framework(req.name) or facts.framework(name)
    public = _public(installed.version) if installed is not None and installed.version else None
    if installed is not None and installed.version and public:
        local = Version(installed.version).local
        flavour = (installed.flavour or "").lower()
        if label is None:
            same_build = not local  # the default index's build carries no local label
        else:
            same_build = flavour == label.lower() or local == label
        if same_build:
            return f"{req.name}{extras}=={public}{marker}", f"the build installed there ({installed.version}" + \
                (f", {installed.flavour}" if installed.flavour else "") + ")"
    if from_index is not None and suffix and series and any(str(r.get("torch")) == series
                                                             for r in _wheel_rows(suffix)):
        return f"{req.name}{extras}>={series}{marker}", f"the {series} series the plan chose, which {suffix} serves"
    return text, "no version: none installed there, and no series the index is known to serve"


def decide(facts: Facts, rec: Recommendation) -> Export:
    """The Export of one recommendation for the machine of `facts`."""
    machine = machine_of(facts)
    if not rec.packages:
        raise StageError(f"recipe {rec.recipe} names no packages", why="there is nothing to export",
                         next_step="pick another recipe with --recipe ID", ref="E415", kind="usage")
    if rec.index and not (rec.index_url and "://" in rec.index_url):
        raise StageError(f"recipe {rec.recipe} names the '{rec.index}' build index but no URL for it",
                         why="the plan carries no URL for that index (a mirror variable left unset?)",
                         next_step="set the index's base URL as `mlprobe plan` says, then export again",
                         ref="E415", kind="usage")
    label = rec.index if rec.index and "://" not in rec.index else None
    indexes: List[IndexUse] = []
    main = _index_use(rec.index_url, label, machine, rec.version) if rec.index_url and "://" in rec.index_url else None
    if main is not None:
        indexes.append(main)
    family = {canonicalize_name(str(p)) for p in kb.table("exports").get("pytorch_index_packages", {}).get("packages", [])}
    extra: Optional[IndexUse] = None
    for url in rec.extra_index_urls:
        if "://" not in url:
            continue
        tail = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]
        use = _index_use(url, tail, machine, rec.version)
        if use.name not in {i.name for i in indexes}:
            indexes.append(use)
            extra = extra or use
    pins: List[Pin] = []
    for text in rec.packages:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise StageError(f"recipe {rec.recipe}: {text!r} is not a requirement", why=str(exc),
                             next_step="fix the recipe's packages", ref="E415", kind="usage") from None
        name = canonicalize_name(req.name)
        chosen = main if main is not None else (extra if extra is not None and name in family else None)
        suffix = label if chosen is main else (
            urlsplit(chosen.url).path.rstrip("/").rsplit("/", 1)[-1] if chosen else None)
        requirement, why = _requirement(text, facts, suffix if chosen is not None else None, chosen, suffix,
                                        rec.version)
        pins.append(Pin(name=name, requirement=requirement, index=chosen.name if chosen else None, why=why))
    # packages only the index has (ROCm's and XPU's Triton), listed as direct dependencies too
    for served in indexes:
        suffix = urlsplit(served.url).path.rstrip("/").rsplit("/", 1)[-1]
        if not served.name.startswith("pytorch-"):
            continue
        for row in kb.rows("exports", "index_companions"):
            if re.search(str(row.get("suffix")), suffix):
                for pkg in row.get("packages") or []:
                    n = canonicalize_name(str(pkg))
                    if n not in {p.name for p in pins}:
                        pins.append(Pin(name=n, requirement=str(pkg), index=served.name, marker=served.marker,
                                        why=f"the {suffix} builds rely on it, and only that index has it"))
    notes = _notes(facts, rec, machine, indexes, pins)
    return Export(recipe=rec.recipe, title=rec.title, framework=rec.framework, backend=rec.backend,
                  machine=machine, indexes=tuple(indexes), pins=tuple(pins), env=dict(rec.env),
                  notes=tuple(notes), sources=tuple(rec.sources))


def _notes(facts: Facts, rec: Recommendation, machine: Machine, indexes: List[IndexUse],
           pins: List[Pin]) -> List[str]:
    notes: List[str] = []
    usable = [g for g in facts.gpus if g.vendor in ("nvidia", "amd", "intel", "apple") and not g.integrated]
    if rec.backend == "cpu" and not usable:
        notes.append(f"{machine.description} has no GPU a framework could use: the export pins the CPU build "
                     f"({rec.recipe})")
    for use in indexes:
        if use.had_credentials:
            user, password = use.credential_vars
            notes.append(f"the URL of {use.name} carries credentials: they are not written; uv reads them from "
                         f"{user} and {password}")
        if urlsplit(use.url).query:
            notes.append(f"the URL of {use.name} has a query ({urlsplit(use.url).query[:40]}…), written as it is: "
                         "if it is a token, use a URL without it and uv's credential variables instead")
    return notes


def gate_notes(exp: Export, requires_python: Optional[str]) -> List[str]:
    """Where the chosen index does not serve the whole project: Pythons of `requires-python` it has
    no wheels for, and the platforms that take the package from the default index instead; with the
    [tool.uv] settings that make uv say so at lock time."""
    out: List[str] = []
    m = exp.machine
    here = " and ".join(x for x in (f"sys_platform == '{m.sys_platform}'" if m.sys_platform else "",
                                    f"platform_machine == '{m.platform_machine}'" if m.platform_machine else "") if x)
    for use in exp.indexes:
        pinned = list(dict.fromkeys(p.name for p in exp.pins if p.index == use.name))
        fleet = sorted({p.source_marker for p in exp.pins if p.index == use.name and p.source_marker})
        if fleet:
            verb = "comes" if len(pinned) == 1 else "come"
            out.append(f"{', '.join(pinned)} {verb} from {use.name} where {' or '.join(fleet)}; on the fleet's other "
                       "nodes from your default index or the index named for them")
        elif use.marker:
            others = sorted({"linux", "win32", "darwin"} - set(use.platforms))
            verb = "comes" if len(pinned) == 1 else "come"
            out.append(f"{', '.join(pinned)} {verb} from {use.name} where {use.marker}; on {', '.join(others)} "
                       "from your default index (its own build)")
        if use.python and requires_python:
            gap = _python_gap(use.python, requires_python)
            if gap:
                out.append(f"{use.name} has wheels for Python {use.python} only; requires-python {requires_python} "
                           f"also allows {gap}: narrow requires-python, or add [tool.uv] environments = "
                           f"[\"python_version {_first_clause(use.python)}\"]")
    if here and exp.indexes:
        out.append(f"to make `uv lock` fail where the index has no wheel for this machine: [tool.uv] "
                   f"required-environments = [\"{here}\"]")
    return out


def _first_clause(spec: str) -> str:
    s = SpecifierSet(spec)
    lows = [x for x in s if x.operator in (">=", ">")]
    return f"{lows[0].operator} '{lows[0].version}'" if lows else "!= ''"


def _python_gap(served: str, requires: str) -> Optional[str]:
    """The minor versions 3.6-3.20 that `requires` admits and `served` does not, as text ('3.9, 3.16'), or None."""
    try:
        s, r = SpecifierSet(served), SpecifierSet(requires)
    except InvalidSpecifier:
        return None
    gap = [f"3.{n}" for n in range(6, 21)
           if any(Version(f"3.{n}.{p}") in r for p in (0, 5, 99)) and not any(Version(f"3.{n}.{p}") in s for p in (0, 5, 99))]
    return ", ".join(gap) or None


def by_name(pins: Tuple[Pin, ...]) -> Dict[str, Pin]:
    return {p.name: p for p in pins}
