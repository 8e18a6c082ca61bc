"""OS: system, release, distro (os-release), glibc, WSL, macOS version, Windows build."""

from __future__ import annotations

import re
from typing import Dict, Optional

from ..model.facts import Contribution, OsFacts
from ..scan.capture import Host
from ._util import key_values


def parse_os_release(text: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Z0-9_]+)=(.*)$", line.strip())
        if m:
            value = m.group(2).strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            out[m.group(1)] = value
    return out


def parse_sw_vers(text: str) -> Dict[str, str]:
    return key_values(text)


def _windows_build(version: Optional[str]) -> Optional[int]:
    # platform.version() on Windows: "10.0.22631"
    if version:
        m = re.match(r"^\d+\.\d+\.(\d+)", version)
        if m:
            return int(m.group(1))
    return None


def probe(host: Host) -> Contribution:
    info = host.info()
    system = info.get("system")
    release = info.get("release")
    version = info.get("version")
    distro = distro_id = distro_version = None
    macos = None
    wsl: Optional[bool] = None
    glibc = None
    libc = info.get("libc")
    if isinstance(libc, str) and libc.startswith("glibc"):
        glibc = libc.split()[-1]
    if system == "Linux":
        cap = host.get("os-release.txt")
        if cap.ok:
            rel = parse_os_release(cap.text())
            distro = rel.get("PRETTY_NAME") or " ".join(filter(None, (rel.get("NAME"), rel.get("VERSION")))) or None
            distro_id = rel.get("ID")
            distro_version = rel.get("VERSION_ID")
        if release is None:
            uname = host.get("uname.txt")
            if uname.ok:
                parts = uname.text().split()
                release = parts[2] if len(parts) > 2 else None
        text = " ".join(str(x) for x in (release, version) if x)
        wsl = bool(re.search(r"microsoft|wsl", text, re.I)) or bool(host.env("WSL_DISTRO_NAME"))
        if release is None and version is None:
            wsl = None if not host.env("WSL_DISTRO_NAME") else True
    elif system == "Darwin":
        cap = host.get("sw_vers.txt")
        if cap.ok:
            sw = parse_sw_vers(cap.text())
            macos = sw.get("ProductVersion")
            if macos:
                distro = f"{sw.get('ProductName', 'macOS')} {macos}"
        macos = macos or info.get("mac_ver")
        if distro is None and macos:
            distro = f"macOS {macos}"
        wsl = False
    elif system == "Windows":
        wsl = False
        w = info.get("win32_ver")
        if isinstance(w, list) and w and w[0]:
            distro = f"Windows {w[0]}" + (f" ({w[1]})" if len(w) > 1 and w[1] else "")
    out = Contribution()
    out.os = OsFacts(
        system=system, release=release, version=version, distro=distro, distro_id=distro_id,
        distro_version=distro_version, wsl=wsl, glibc=glibc, macos_version=macos,
        windows_build=_windows_build(version) if system == "Windows" else None,
    )
    if system is None:
        out.status = "absent"
        out.error = "the capture does not say which OS it came from (no host.json)"
    return out
