"""Pure parsers for the captures only `mlprobe doctor` reads: text in, typed rows out, no I/O. Each
accepts truncated, pasted or odd input and returns what it could read (a line it does not understand
is skipped), keeping the line it read so a finding can show it as evidence."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def clean(text: str) -> str:
    return _ANSI.sub("", text)


def first_line(text: str, pattern: str, flags: int = re.I) -> Optional[str]:
    """The first line of `text` that matches `pattern`, stripped; None when none does."""
    rx = re.compile(pattern, flags)
    for line in clean(text).splitlines():
        if rx.search(line):
            return line.strip()
    return None


# -- ls -l /dev /dev/dri ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DevNode:
    path: str  # /dev/kfd, /dev/dri/renderD128
    kind: str  # "c" character device, "l" link, "d" folder, ...
    mode: str  # "rw-rw----"
    owner: str
    group: str
    acl: bool  # `+` after the mode: an ACL may grant more than the mode says
    line: str

    def allows(self, who: "Identity") -> Optional[bool]:
        """Whether `who` may read and write this node by its mode, owner and group; None when the
        answer depends on what the capture does not say (an ACL, a group by number only)."""
        if who.uid == 0 or who.user == "root":
            return True
        if who.user is not None and self.owner in (who.user, str(who.uid)):
            bits = self.mode[0:3]
        elif self.group in who.group_names() or self.group in who.group_ids():
            bits = self.mode[3:6]
        else:
            bits = self.mode[6:9]
        ok = bits[0] == "r" and bits[1] == "w"
        if not ok and self.acl:
            return None
        return ok


_LS = re.compile(r"^(?P<kind>[-bcdlps])(?P<mode>[-rwxsStT]{9})(?P<acl>[.+@]?)\s+\d+\s+(?P<owner>\S+)\s+"
                 r"(?P<group>\S+)\s+(?:\d+,\s*\d+|\d+)\s+.+?\s(?P<name>\S+?)(?: -> (?P<to>\S+))?$")
_DEV_DIR = {"renderD": "/dev/dri", "card": "/dev/dri"}


def parse_ls_l(text: str) -> List[DevNode]:
    """`ls -l /dev /dev/dri` (section headers `/dev:`), or a pasted `ls -l /dev/kfd /dev/dri/renderD*`
    (full paths) or `ls -la /dev/dri` (bare names: renderD*/card* are placed in /dev/dri)."""
    out: List[DevNode] = []
    section: Optional[str] = None
    for raw in clean(text).splitlines():
        line = raw.rstrip()
        head = re.match(r"^(/[^\s:]*):$", line.strip())
        if head:
            section = head.group(1).rstrip("/") or "/"
            continue
        m = _LS.match(line.strip())
        if not m:
            continue
        name = m.group("name")
        if name in (".", ".."):
            continue
        if name.startswith("/"):
            path = os.path.normpath(name)
        else:
            folder = section or next((d for p, d in _DEV_DIR.items() if name.startswith(p)), "/dev")
            path = f"{folder}/{name}"
        out.append(DevNode(path=path, kind=m.group("kind"), mode=m.group("mode"), owner=m.group("owner"),
                           group=m.group("group"), acl=m.group("acl") == "+", line=line.strip()))
    return out


def listed_folders(text: str) -> List[str]:
    """The folders an `ls -l` capture lists (its section headers; `/dev` when it has none)."""
    heads = [m.group(1).rstrip("/") for m in re.finditer(r"^(/[^\s:]*):$", clean(text), re.M)]
    return heads or ["/dev"]


# -- id / groups ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Identity:
    uid: Optional[int]
    user: Optional[str]
    groups: Tuple[Tuple[Optional[int], Optional[str]], ...]
    line: str

    def group_names(self) -> List[str]:
        return [n for _, n in self.groups if n]

    def group_ids(self) -> List[str]:
        return [str(i) for i, _ in self.groups if i is not None]


def parse_id(text: str) -> Optional[Identity]:
    """`id` (`uid=1000(ann) gid=1000(ann) groups=1000(ann),44(video)`), or a pasted `groups`
    (`ann adm video` or `ann : ann adm video`)."""
    for raw in clean(text).splitlines():
        line = raw.strip()
        m = re.search(r"uid=(\d+)(?:\(([^)]*)\))?", line)
        if m:
            groups: List[Tuple[Optional[int], Optional[str]]] = []
            g = re.search(r"groups=(\S+)", line)
            if g:
                for part in g.group(1).split(","):
                    pm = re.match(r"(\d+)(?:\(([^)]*)\))?", part)
                    if pm:
                        groups.append((int(pm.group(1)), pm.group(2)))
            gid = re.search(r"gid=(\d+)(?:\(([^)]*)\))?", line)
            if gid and not any(i == int(gid.group(1)) for i, _ in groups):
                groups.append((int(gid.group(1)), gid.group(2)))
            return Identity(uid=int(m.group(1)), user=m.group(2), groups=tuple(groups), line=line)
    for raw in clean(text).splitlines():
        line = raw.strip()
        if not line or not re.fullmatch(r"[A-Za-z0-9_.:\- ]+", line) or "$" in line:
            continue
        user, sep, rest = line.partition(" : ")
        names = (rest if sep else line).split()
        return Identity(uid=None, user=user if sep else None, groups=tuple((None, n) for n in names), line=line)
    return None


# -- ldconfig -p ---------------------------------------------------------------------------------


def parse_ldconfig(text: str) -> Dict[str, List[Tuple[str, str]]]:
    """`ldconfig -p`: library name -> [(path, line)], in the cache's order."""
    out: Dict[str, List[Tuple[str, str]]] = {}
    for raw in clean(text).splitlines():
        m = re.match(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$", raw)
        if m:
            out.setdefault(m.group(1), []).append((m.group(3), raw.strip()))
    return out


# -- JSON captures -------------------------------------------------------------------------------


def load_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _s(v: Any) -> Optional[str]:
    return v if isinstance(v, str) else None


@dataclass(frozen=True)
class LibraryAnswer:
    name: str
    path: Optional[str]
    error: Optional[str]
    where: str  # the ICD file naming it, "OCL_ICD_FILENAMES", or "loader"


@dataclass(frozen=True)
class OpenClLoader:
    loader: Tuple[LibraryAnswer, ...]
    icds: Tuple[LibraryAnswer, ...]
    vendors_dir: Optional[str]
    vendors_dir_exists: Optional[bool]
    vendors_env: Optional[str]
    filenames_env: Optional[str]
    error: Optional[str]
    # per loader name, whether it reads OCL_ICD_FILENAMES (the device check's probe says; None: not known)
    reads_filenames: Tuple[Tuple[str, Optional[bool]], ...] = ()


def _answers(rows: Any, where_key: Optional[str], default_where: str, name_key: str) -> List[LibraryAnswer]:
    out = []
    for r in rows if isinstance(rows, list) else []:
        if isinstance(r, dict) and _s(r.get(name_key)):
            where = _s(r.get(where_key)) if where_key else None
            out.append(LibraryAnswer(name=str(r[name_key]), path=_s(r.get("path")), error=_s(r.get("error")),
                                     where=where or default_where))
    return out


def parse_opencl_icd(text: str) -> Optional[OpenClLoader]:
    doc = load_json(text)
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("loaders"), list):
        return _from_loader_probe(doc)
    exists = doc.get("vendors_dir_exists")
    return OpenClLoader(
        loader=tuple(_answers(doc.get("loader"), None, "loader", "name")),
        icds=tuple(_answers(doc.get("icd_files"), "file", "an ICD file", "library")
                   + _answers(doc.get("filenames"), None, "OCL_ICD_FILENAMES", "library")),
        vendors_dir=_s(doc.get("vendors_dir")), vendors_dir_exists=exists if isinstance(exists, bool) else None,
        vendors_env=_s(doc.get("OCL_ICD_VENDORS")), filenames_env=_s(doc.get("OCL_ICD_FILENAMES")),
        error=_s(doc.get("error")))


def _from_loader_probe(doc: Dict[str, Any]) -> OpenClLoader:
    """opencl-loaders.json (mlprobe.verify.devicecheck.probe_loaders: one record per loader name, each
    with the file it resolved to, its ICD files and whether it reads OCL_ICD_FILENAMES)."""
    recs = [r for r in doc["loaders"] if isinstance(r, dict) and _s(r.get("name"))]
    first = recs[0] if recs else {}
    raw_env = first.get("env")
    env: Dict[str, Any] = raw_env if isinstance(raw_env, dict) else {}
    icds = [LibraryAnswer(name=str(f["library"]), path=None, error=None,
                          where=str(first.get("vendors_dir") or "/etc/OpenCL/vendors") + "/" + str(f.get("file")))
            for f in first.get("icd_files") or [] if isinstance(f, dict) and _s(f.get("library"))]
    names = [n for n in str(env.get("OCL_ICD_FILENAMES") or "").split(":") if n.strip()]
    icds += [LibraryAnswer(name=n, path=None, error=None, where="OCL_ICD_FILENAMES") for n in names]
    return OpenClLoader(
        loader=tuple(LibraryAnswer(name=str(r["name"]), path=_s(r.get("path")), error=_s(r.get("error")),
                                   where="loader") for r in recs),
        icds=tuple(icds), vendors_dir=_s(first.get("vendors_dir")), vendors_dir_exists=None,
        vendors_env=_s(env.get("OCL_ICD_VENDORS")), filenames_env=_s(env.get("OCL_ICD_FILENAMES")), error=None,
        reads_filenames=tuple((str(r["name"]), r.get("reads_ocl_icd_filenames")
                               if isinstance(r.get("reads_ocl_icd_filenames"), bool) else None) for r in recs))


@dataclass(frozen=True)
class FrameworkDevices:
    name: str
    version: Optional[str]
    info: Dict[str, Any]
    devices: Tuple[Dict[str, Any], ...]
    unavailable: Tuple[Dict[str, Any], ...]
    error: Optional[str]

    def gpus(self) -> List[Dict[str, Any]]:
        return [d for d in self.devices if d.get("kind") not in ("cpu", None)]


@dataclass(frozen=True)
class Enumeration:
    python: Optional[str]
    frameworks: Tuple[FrameworkDevices, ...]
    error: Optional[str] = None
    source: str = "framework-devices.json"
    raw: Dict[str, Any] = field(default_factory=dict)


def parse_framework_devices(text: str) -> Optional[Enumeration]:
    """framework-devices.json (what mlprobe.doctor.enumerate writes); fields of the wrong type are
    read as absent."""
    doc = load_json(text)
    if not isinstance(doc, dict):
        return None
    return enumeration_from(doc)


def enumeration_from(doc: Dict[str, Any], source: str = "framework-devices.json") -> Enumeration:
    fws = []
    listed = doc.get("frameworks")
    for f in listed if isinstance(listed, list) else []:
        if not isinstance(f, dict) or not _s(f.get("name")):
            continue
        devs = tuple(d for d in f.get("devices") or [] if isinstance(d, dict)) \
            if isinstance(f.get("devices"), list) else ()
        una = tuple(u for u in f.get("unavailable") or [] if isinstance(u, dict)) \
            if isinstance(f.get("unavailable"), list) else ()
        fws.append(FrameworkDevices(name=str(f["name"]), version=_s(f.get("version")),
                                    info=f["info"] if isinstance(f.get("info"), dict) else {},
                                    devices=devs, unavailable=una, error=_s(f.get("error"))))
    return Enumeration(python=_s(doc.get("python")), frameworks=tuple(fws), error=_s(doc.get("error")),
                       source=source, raw=doc)


def json_line(text: str, key: str, value: Optional[str] = None) -> Optional[str]:
    """The line of a pretty-printed JSON capture that holds `"key": value` (evidence)."""
    pat = rf'"{re.escape(key)}"\s*:' + (rf'\s*"?{re.escape(value)}' if value is not None else "")
    return first_line(text, pat, 0)
