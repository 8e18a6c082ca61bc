"""The device check: does the framework, in the environment the person will have, list the device that
was asked for? If not: why (the OpenCL loader the framework opens and the ICDs that loader reads, the
visibility variables, the build, the device nodes) and, where one is known, a fix that stays inside the
environment.

`list_devices` and `probe_loaders` run children in the target interpreter (the verify payload's
`run` with enumerate_only, and its `opencl-loader` mode); `diagnose` is pure: it reads what they
returned (the `opencl-loaders.json` document) and the environment, and the knowledge rows of
knowledge/opencl_loaders.json. Install uses all three after installing; verify uses `diagnose` for a
requested device that the framework does not list."""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ..model import knowledge
from ..model.jsontypes import JsonObject, JsonValue
from .child import child_env, run_child

LISTING_TIMEOUT_S = 180.0
LOADER_TIMEOUT_S = 30.0
# Values of the visibility variables that hide every device (CUDA's documentation: an invalid index
# ends the list; "-1" and "" are the usual ways to hide all).
_HIDE_ALL = ("", "-1", "none", "nodevfiles", "void")
VISIBILITY = {"cuda": ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"),
              "rocm": ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"),
              "gpu": ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")}
DEVICE_NODES = {"cuda": ("/dev/nvidiactl", "/dev/nvidia0"), "rocm": ("/dev/kfd",)}


def _str(value: JsonValue) -> Optional[str]:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class DeviceEntry:
    """A device as a framework's enumeration names it (the payload's `devices` event): listed (its id,
    kind and api), or unavailable, with the reason (`quiet`: a note, not a problem)."""

    id: str
    kind: Optional[str] = None
    api: Optional[str] = None
    reason: Optional[str] = None
    quiet: bool = False

    @classmethod
    def of(cls, rec: Mapping[str, JsonValue]) -> "DeviceEntry":
        """From the payload's JSON record of a device (or of an unavailable one)."""
        did = rec.get("id")
        reason = rec.get("reason")
        return cls(id="" if did is None else str(did), kind=_str(rec.get("kind")), api=_str(rec.get("api")),
                   reason=str(reason) if reason else None, quiet=bool(rec.get("quiet")))


Device = Union[DeviceEntry, Mapping[str, JsonValue]]


def matches(dev: Device, request: Optional[str]) -> bool:
    """Does a device match a request (its id, kind, id prefix, api, or 'gpu' for any non-CPU device)?
    The payload's `wanted` reads requests the same way. `dev` may be the payload's JSON record of the
    device, as verify's runner holds it: it is read here."""
    if not request:
        return True
    entry = dev if isinstance(dev, DeviceEntry) else DeviceEntry.of(dev)
    r = request.lower()
    did = entry.id.lower()
    if r in (did, entry.kind, did.split(":")[0], entry.api):
        return True
    return r == "gpu" and entry.kind != "cpu"


@dataclass(frozen=True, init=False)
class Listing:
    """What a framework lists in one environment: its devices, those it names as unavailable (with
    the reason), and an error when the enumeration itself failed. Built from typed entries or from the
    payload's JSON records (verify's runner holds those), which are read once here."""

    framework: str
    version: Optional[str]
    devices: Tuple[DeviceEntry, ...]
    unavailable: Tuple[DeviceEntry, ...]
    error: Optional[str]

    def __init__(self, framework: str, version: Optional[str], devices: Iterable[Device],
                 unavailable: Iterable[Device] = (), error: Optional[str] = None) -> None:
        def read(entries: Iterable[Device]) -> Tuple[DeviceEntry, ...]:
            return tuple(e if isinstance(e, DeviceEntry) else DeviceEntry.of(e) for e in entries)

        object.__setattr__(self, "framework", framework)
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "devices", read(devices))
        object.__setattr__(self, "unavailable", read(unavailable))
        object.__setattr__(self, "error", error)

    def sees(self, request: Optional[str]) -> bool:
        return any(matches(d, request) for d in self.devices)

    @property
    def ids(self) -> List[str]:
        return [d.id for d in self.devices]


def list_devices(python: str, framework: str, env: Optional[Mapping[str, str]] = None,
                 timeout: float = LISTING_TIMEOUT_S) -> Listing:
    """The framework's own enumeration in `python` with `env` on top of this process's environment
    (a child with a timeout; seconds, no training). PlaidML is asked with its experimental devices off
    and on, and with PLAIDML_DEVICE_IDS empty so that a device list in its settings does not narrow it."""
    import json

    passes: List[Dict[str, str]] = [{}]
    if framework == "plaidml":
        passes = [{"PLAIDML_EXPERIMENTAL": "0", "PLAIDML_DEVICE_IDS": ""},
                  {"PLAIDML_EXPERIMENTAL": "1", "PLAIDML_DEVICE_IDS": ""}]
    devices: Dict[str, DeviceEntry] = {}
    unavailable: List[DeviceEntry] = []
    version: Optional[str] = None
    error: Optional[str] = None
    for extra in passes:
        cfg = {"framework": framework, "enumerate_only": True}
        res = run_child(python, ["run", json.dumps(cfg)], env=child_env(dict(env or {}, **extra)),
                        timeout=timeout, stall=timeout)
        got = False
        for ev in res.events:
            kind = ev.get("event")
            if kind == "hello":
                version = _str(ev.get("version")) or version
            elif kind == "devices":
                got = True
                for d in _objects(ev.get("devices")):
                    if d.get("id") is not None:
                        devices.setdefault(str(d["id"]), DeviceEntry.of(d))
                for u in _objects(ev.get("unavailable")):
                    entry = DeviceEntry.of(u)
                    if entry not in unavailable:
                        unavailable.append(entry)
            elif kind == "fatal" and error is None:
                error = f"{framework} failed during the {ev.get('stage') or 'run'}: {ev.get('error')}"
        if not got and error is None:
            line = res.last_error_line()
            error = f"the {framework} process {res.how()}" + (f" (last message: {line})" if line else "")
    return Listing(framework=framework, version=version, devices=tuple(devices.values()),
                   unavailable=tuple(unavailable), error=None if devices else error)


def _objects(value: JsonValue) -> List[JsonObject]:
    """The JSON objects of a JSON list (anything else in it, or a value that is no list: none)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def loader_names() -> List[str]:
    return [str(r["name"]) for r in knowledge.rows("opencl_loaders", "probe_names") if r.get("name")]


def framework_loader(framework: str) -> Optional[str]:
    """The OpenCL loader name a framework opens itself (PlaidML: libOpenCL.so), from the knowledge rows."""
    for r in knowledge.rows("opencl_loaders", "frameworks"):
        if r.get("framework") == framework and r.get("opens"):
            return str(r["opens"])
    return None


def vendor_icds() -> List[Tuple[str, str]]:
    """(library, .icd file name) of each vendor's OpenCL driver (knowledge/opencl_loaders.json vendor_icds)."""
    return [(str(r["library"]), str(r["icd_file"])) for r in knowledge.rows("opencl_loaders", "vendor_icds")
            if r.get("library") and r.get("icd_file")]


def _lib_stem(lib: str) -> str:
    return os.path.basename(lib).split(".so")[0]


def unregistered_vendor_icds(rec: "LoaderRecord", find: Optional[Callable[[str], Optional[str]]] = None
                             ) -> List[Tuple[str, str]]:
    """The known vendor ICD libraries that the dynamic linker's cache finds here (ctypes.util.find_library)
    and that neither the loader's vendors folder nor OCL_ICD_FILENAMES names."""
    import ctypes.util

    look = find or ctypes.util.find_library
    named = {_lib_stem(f.library or "") for f in rec.icd_files or ()}
    named |= {_lib_stem(n) for n in (rec.env.get("OCL_ICD_FILENAMES") or "").split(":") if n.strip()}
    return [(lib, icd) for lib, icd in vendor_icds()
            if _lib_stem(lib) not in named and look(_lib_stem(lib)[3:])]


def probe_loaders(python: str, env: Optional[Mapping[str, str]] = None,
                  names: Optional[Sequence[str]] = None, timeout: float = LOADER_TIMEOUT_S) -> JsonObject:
    """The `opencl-loaders.json` document (a capture keeps it as it is; `diagnose` reads it): for each
    loader name, in its own child of `python` with `env`: the file it resolves to, whether that file
    reads OCL_ICD_FILENAMES, and its platforms."""
    wanted = list(names or loader_names())

    def one(name: str) -> JsonObject:
        res = run_child(python, ["opencl-loader", name], env=child_env(env), timeout=timeout, stall=timeout)
        for ev in reversed(res.events):
            if ev.get("event") == "opencl_loader":
                return {k: v for k, v in ev.items() if k not in ("event", "t")}
        partial: JsonObject = next(({k: v for k, v in e.items() if k not in ("event", "t")}
                                    for e in reversed(res.events) if e.get("event") == "tick"), {})
        return dict(partial, name=name, error=f"the loader probe {res.how()}"
                    + (f" ({res.last_error_line()})" if res.last_error_line() else ""), platforms=None)

    with ThreadPoolExecutor(max_workers=max(1, len(wanted))) as pool:
        loaders: List[JsonValue] = list(pool.map(one, wanted))
    return {"kind": "mlprobe.opencl-loaders/1", "loaders": loaders}


@dataclass(frozen=True)
class OclDevice:
    """A device of an OpenCL platform, as a loader lists it."""

    name: Optional[str]
    type: Optional[str]
    vendor: Optional[str]


@dataclass(frozen=True)
class OclPlatform:
    name: Optional[str]
    vendor: Optional[str]
    devices: Tuple[OclDevice, ...]


@dataclass(frozen=True)
class IcdFile:
    """An .icd file of the vendors folder and the library it names."""

    file: Optional[str]
    library: Optional[str]


@dataclass(frozen=True)
class LoaderRecord:
    """One loader name's answer in `opencl-loaders.json`: the file it resolves to (or why it cannot be
    opened), whether it reads OCL_ICD_FILENAMES, its platforms, the vendors folder it reads and the
    OpenCL variables it ran with."""

    name: Optional[str]
    path: Optional[str] = None
    error: Optional[str] = None
    reads_ocl_icd_filenames: Optional[bool] = None
    platforms: Tuple[OclPlatform, ...] = ()
    platforms_error: Optional[str] = None
    icd_files: Optional[Tuple[IcdFile, ...]] = None  # None: the folder could not be read
    vendors_dir: Optional[str] = None
    vendors_error: Optional[str] = None
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, rec: Mapping[str, JsonValue]) -> "LoaderRecord":
        """A record of the document; a value of the wrong type is read as absent."""
        platforms = tuple(
            OclPlatform(name=_text(p.get("name")), vendor=_str(p.get("vendor")),
                        devices=tuple(OclDevice(name=_text(d.get("name")), type=_str(d.get("type")),
                                                vendor=_str(d.get("vendor"))) for d in _objects(p.get("devices"))))
            for p in _objects(rec.get("platforms")))
        files = rec.get("icd_files")
        env = rec.get("env")
        reads = rec.get("reads_ocl_icd_filenames")
        return cls(name=_text(rec.get("name")), path=_text(rec.get("path")), error=_text(rec.get("error")),
                   reads_ocl_icd_filenames=reads if isinstance(reads, bool) else None, platforms=platforms,
                   platforms_error=_text(rec.get("platforms_error")),
                   icd_files=None if files is None else tuple(
                       IcdFile(file=_text(f.get("file")), library=_text(f.get("library"))) for f in _objects(files)),
                   vendors_dir=_text(rec.get("vendors_dir")), vendors_error=_text(rec.get("vendors_error")),
                   env={k: v for k, v in env.items() if isinstance(v, str)} if isinstance(env, dict) else {})


def _text(value: JsonValue) -> Optional[str]:
    """A value a sentence shows: a string as it is, a number as written; nothing else (None)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    return value if isinstance(value, str) else str(value)


def read_loaders(doc: Mapping[str, JsonValue]) -> Tuple[LoaderRecord, ...]:
    """The records of an `opencl-loaders.json` document (probe_loaders, or a capture), read once."""
    return tuple(LoaderRecord.from_json(r) for r in _objects(doc.get("loaders")))


# ---------------------------------------------------------------- diagnosis (pure) -------------

@dataclass(frozen=True)
class Fix:
    """A change inside the environment that should make the framework list the device."""

    id: str
    what: str
    env: Mapping[str, str] = field(default_factory=dict)  # set in the activate scripts
    prepend: Mapping[str, str] = field(default_factory=dict)  # put first on a path-list variable
    links: Mapping[str, str] = field(default_factory=dict)  # relative path in the venv -> link target
    source: str = ""


@dataclass(frozen=True)
class Diagnosis:
    """Why a requested device is not listed, the lines that show it, what to do, and a fix mlprobe can
    apply inside the environment (None when the fix lies outside it)."""

    cause: str
    evidence: Tuple[str, ...] = ()
    next_step: str = ""
    fix: Optional[Fix] = None

    def to_json(self) -> JsonObject:
        """As a verify result's `diagnosis` (and install's transcript) writes it."""
        return {"cause": self.cause, "evidence": list(self.evidence), "next_step": self.next_step,
                "fix": None if self.fix is None else {"id": self.fix.id, "what": self.fix.what,
                                                      "env": dict(self.fix.env),
                                                      "prepend": dict(self.fix.prepend),
                                                      "links": dict(self.fix.links)}}


def _pml_id(vendor: Optional[str], name: str) -> str:
    from ..plan.predicates import plaidml_opencl_id

    return plaidml_opencl_id(vendor, name, knowledge.Knowledge())


def _base_id(device_id: str) -> str:
    return re.sub(r"\.\d+$", "", device_id.strip().lower())


def _loader_lists(rec: LoaderRecord, request: str) -> bool:
    """Does this loader's platform list hold the requested device (a PlaidML OpenCL id, or a kind)?"""
    want = _base_id(request)
    for p in rec.platforms:
        for d in p.devices:
            name = d.name or ""
            if want.startswith("opencl_"):
                if _pml_id(d.vendor or p.vendor, name) == want:
                    return True
            elif want in ("gpu", "opencl") and d.type in ("GPU", "ACCELERATOR"):
                return True
    return False


def _describe_loader(rec: LoaderRecord) -> str:
    name = rec.name
    if rec.error and not rec.path:
        return f"{name}: cannot be opened ({rec.error})"
    reads = rec.reads_ocl_icd_filenames
    plats = []
    for p in rec.platforms:
        devs = ", ".join(str(d.name) for d in p.devices)
        plats.append(f"{p.name} [{devs}]" if devs else str(p.name))
    text = f"{name} -> {rec.path}"
    if reads is not None:
        text += f" (reads OCL_ICD_FILENAMES: {'yes' if reads else 'no'})"
    return text + ": " + ("; ".join(plats) if plats else "no OpenCL platform" + (
        f" ({rec.platforms_error})" if rec.platforms_error else ""))


def _icd_summary(rec: LoaderRecord) -> str:
    files = rec.icd_files
    folder = rec.vendors_dir or "/etc/OpenCL/vendors"
    if files is None:
        return f"{folder}: {rec.vendors_error or 'not readable'}"
    if not files:
        return f"{folder}: no .icd file"
    return f"{folder}: " + ", ".join(f"{f.file} ({f.library})" for f in files)


def diagnose_opencl(framework: str, request: str, loaders_doc: Mapping[str, JsonValue],
                    venv: Optional[str] = None) -> Diagnosis:
    """Why `framework` (which opens its OpenCL loader by name) does not list `request`, from the
    loaders' own answers in the target environment (the `opencl-loaders.json` document, read here)."""
    return _diagnose_opencl(framework, request, read_loaders(loaders_doc), venv)


def _diagnose_opencl(framework: str, request: str, recs: Sequence[LoaderRecord], venv: Optional[str]) -> Diagnosis:
    name = framework_loader(framework) or "libOpenCL.so"
    mine = next((r for r in recs if r.name == name), None)
    evidence = [_describe_loader(r) for r in recs]
    if recs:
        evidence.append(_icd_summary(recs[0]))
        if recs[0].env.get("OCL_ICD_FILENAMES"):
            evidence.append(f"OCL_ICD_FILENAMES={recs[0].env['OCL_ICD_FILENAMES']}")
    others = [r for r in recs if r is not mine and r.path and _loader_lists(r, request)]
    if mine is None:
        return Diagnosis(f"{framework} opens {name}, which was not probed", tuple(evidence),
                         "run `mlprobe doctor` in this environment")
    link_fix = None
    if others and venv is not None:
        link_fix = Fix("venv-loader-link",
                       f"a link {name} -> {others[0].path} in {venv}/lib/mlprobe-opencl, put first on "
                       "LD_LIBRARY_PATH by the activate scripts",
                       prepend={"LD_LIBRARY_PATH": os.path.join(venv, "lib", "mlprobe-opencl")},
                       links={os.path.join("lib", "mlprobe-opencl", name): str(others[0].path)},
                       source="PML-DLOPEN")
    if not mine.path:
        cause = (f"{framework} opens the OpenCL loader by the name {name}, and the dynamic linker finds no "
                 f"such file here ({mine.error}); on Debian and Ubuntu only the development package "
                 "ocl-icd-opencl-dev provides that name")
        nxt = ("`sudo apt install ocl-icd-opencl-dev` (or link the libOpenCL.so.1 that clinfo uses as "
               "libOpenCL.so)")
        return Diagnosis(cause, tuple(evidence), nxt, link_fix)
    if _loader_lists(mine, request):
        return Diagnosis(f"the OpenCL loader {framework} opens ({mine.path}) lists {request}, yet "
                         f"{framework} does not: its own device configuration leaves it out",
                         tuple(evidence), "run `plaidml-setup` with PLAIDML_VERBOSE=1 to see why")
    listed = [n for n in (mine.env.get("OCL_ICD_FILENAMES") or "").split(":") if n.strip()]
    in_dir = {os.path.basename(f.library or "") for f in mine.icd_files or ()}
    only_env = [n for n in listed if os.path.basename(n) not in in_dir]
    if mine.reads_ocl_icd_filenames is False and only_env:
        cause = (f"{framework} opens {name}, which here is {mine.path}: an ICD loader that does not "
                 f"read OCL_ICD_FILENAMES, and this environment names {', '.join(only_env)} only there "
                 f"({_icd_summary(mine)})")
        if not others:
            cause += f"; no OpenCL loader here lists {request} either, so that may not be all"
        fix = None
        if venv is not None:
            folder = os.path.join(venv, "etc", "OpenCL", "vendors")
            fix = Fix("venv-vendors", f"a vendors folder {folder} with one .icd file per ICD library (the "
                      "system's vendors folder and OCL_ICD_FILENAMES), and OCL_ICD_VENDORS pointing at it in "
                      "the activate scripts", env={"OCL_ICD_VENDORS": folder}, source="OCLICD-TESTS")
        nxt = ("write an .icd file naming each of those libraries into a folder and point OCL_ICD_VENDORS "
               "at it (or add them to /etc/OpenCL/vendors)")
        return Diagnosis(cause, tuple(evidence), nxt, fix or link_fix)
    unregistered = unregistered_vendor_icds(mine)
    if unregistered and not others:
        libs = ", ".join(lib for lib, _ in unregistered)
        cause = (f"{framework} opens {name} ({mine.path}), and no ICD entry names {libs}, the OpenCL driver "
                 f"the dynamic linker finds here ({_icd_summary(mine)}, OCL_ICD_FILENAMES "
                 f"{'set' if listed else 'unset'}): no loader loads it")
        fix = None
        if venv is not None:
            folder = os.path.join(venv, "etc", "OpenCL", "vendors")
            fix = Fix("venv-vendors", f"a vendors folder {folder} with the system's .icd files and "
                      + ", ".join(f"{icd} naming {lib}" for lib, icd in unregistered)
                      + ", and OCL_ICD_VENDORS pointing at it (start-up hook and activate scripts)",
                      env={"OCL_ICD_VENDORS": folder}, source="NV-OCL-IMAGE")
        nxt = " && ".join(f"echo {lib} > /etc/OpenCL/vendors/{icd}" for lib, icd in unregistered) + \
            "  # as root; or a vendors folder of your own named by OCL_ICD_VENDORS"
        return Diagnosis(cause, tuple(evidence), nxt, fix)
    if others:
        cause = (f"{framework} opens {name}, which here is {mine.path} and does not list {request}; "
                 f"{others[0].name} ({others[0].path}) does")
        return Diagnosis(cause, tuple(evidence), f"put a link {name} -> {others[0].path} first on "
                         "LD_LIBRARY_PATH", link_fix)
    return Diagnosis(f"no OpenCL loader on this machine lists {request}: its driver's ICD is not "
                     "registered, does not load, or sees no device", tuple(evidence),
                     "check the driver (`clinfo -l`) and `mlprobe doctor`")


def _hidden_by(env: Mapping[str, str], family: str) -> List[str]:
    out = []
    for var in VISIBILITY.get(family, ()):
        val = env.get(var)
        if val is not None and val.strip().lower() in _HIDE_ALL:
            out.append(f"{var}={val!r}")
    return out


def diagnose(framework: str, request: str, listing: Listing, env: Mapping[str, str],
             loaders_doc: Optional[Mapping[str, JsonValue]] = None, venv: Optional[str] = None,
             nodes: Optional[Mapping[str, Tuple[bool, bool]]] = None) -> Diagnosis:
    """Why `listing` lacks `request`. `env` is the environment the framework ran with; `loaders_doc`
    the `opencl-loaders.json` document (probe_loaders) for a framework that opens an OpenCL loader;
    `nodes` maps a device node to (exists, accessible) and defaults to this machine's."""
    if framework_loader(framework) is not None and loaders_doc is not None:
        return diagnose_opencl(framework, request, loaders_doc, venv)
    r = request.lower().split(":")[0]
    family = {"cuda": "cuda", "rocm": "rocm", "hip": "rocm", "gpu": "gpu"}.get(r)
    evidence = [f"{framework} {listing.version or ''} lists: {', '.join(listing.ids) or 'nothing'}".replace("  ", " ")]
    reasons = [u.reason for u in listing.unavailable
               if u.reason and (matches(u, request) or u.id.split(":")[0] == r)]
    evidence += reasons
    if listing.error:
        return Diagnosis(listing.error, tuple(evidence), "see the error; `mlprobe doctor` checks each link")
    build = [x for x in reasons if "CPU-only build" in x or "not built" in x]
    if build:  # the build cannot use any GPU: the first link that breaks
        return Diagnosis(build[0], tuple(evidence), "`mlprobe plan` names the build that fits this machine; "
                         "`mlprobe install --apply` installs it into a virtual environment")
    if family:
        hidden = _hidden_by(env, family)
        if hidden:
            return Diagnosis(f"{' and '.join(hidden)} hides every GPU from {framework}", tuple(evidence),
                             f"unset {hidden[0].split('=')[0]} (or set it to the GPU's index)")
        checked = nodes if nodes is not None else _node_state(DEVICE_NODES.get(family, ()))
        missing = [n for n, (exists, _ok) in checked.items() if not exists]
        denied = [n for n, (exists, ok) in checked.items() if exists and not ok]
        if missing:
            return Diagnosis(f"the device node {missing[0]} does not exist: the driver is not loaded, or "
                             "this container was started without the GPU", tuple(evidence + [f"{n}: missing" for n in missing]),
                             "load the driver; in a container start it with the GPU (`docker run --gpus all` "
                             "or `--device /dev/kfd --device /dev/dri`)")
        if denied:
            return Diagnosis(f"this user may not open {denied[0]}", tuple(evidence),
                             "add the user to the group that owns it (`sudo usermod -aG render,video $USER`, "
                             "then log in again)")
    if reasons:
        return Diagnosis(reasons[0], tuple(evidence), "`mlprobe plan` names the build that fits this machine")
    return Diagnosis(f"{framework} does not list {request} here", tuple(evidence),
                     "`mlprobe doctor` checks the build, the driver and the environment link by link")


def _node_state(paths: Sequence[str]) -> Dict[str, Tuple[bool, bool]]:
    if os.name != "posix" or not os.path.isdir("/dev"):
        return {}
    return {p: (os.path.exists(p), os.access(p, os.R_OK | os.W_OK)) for p in paths}


__all__ = ["DeviceEntry", "Diagnosis", "Fix", "Listing", "LoaderRecord", "diagnose", "diagnose_opencl",
           "framework_loader", "list_devices", "matches", "probe_loaders", "read_loaders"]
