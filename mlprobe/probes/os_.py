"""OS: system, release, distro (os-release), glibc, WSL, macOS version, Windows build."""

from __future__ import annotations

import re
from typing import Dict, List, Optional

from ..model import knowledge as kb
from ..model.facts import Contribution, OsFacts
from ..scan.capture import Host
from ._util import clean_lines, key_values


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


def real_macos_version(reported: Optional[str], darwin_release: Optional[str]) -> Optional[str]:
    """platform.mac_ver() of a Python built with an older SDK gives the compatibility version
    (16.0 on macOS 26, 10.16 on macOS 11): with the Darwin kernel's major number, the real one
    (host_inference.json `macos_compat_versions`). Anything else is returned unchanged."""
    if not reported or not darwin_release:
        return reported
    m = re.match(r"^(\d+)", darwin_release)
    if not m:
        return reported
    darwin = int(m.group(1))
    for row in kb.rows("host_inference", "macos_compat_versions"):
        if row.get("darwin_major") != darwin:
            continue
        if row.get("reported") and (reported == row["reported"] or reported.startswith(str(row["reported"]) + ".")):
            return f"{row['macos_major']}.0"
        major, _, rest = reported.partition(".")
        if major.isdigit() and int(major) == row.get("reported_major"):
            return f"{row['macos_major']}.{rest}" if rest else f"{row['macos_major']}.0"
    return reported


_UNAME_SYSNAME = re.compile(r"^(Linux|Darwin|GNU|SunOS|AIX|[A-Za-z]*BSD|CYGWIN\S*|MINGW\S*|MSYS\S*)\s")


def uname_fields(text: str) -> List[str]:
    """The words of `uname -a`'s line (kernel name, host, release, version, ...). A paste's prompt
    line (`user@host:~$ uname -a`) is skipped: the line is the one that begins with a kernel name,
    else the first line that is not empty."""
    lines = [line.strip() for line in clean_lines(text) if line.strip()]
    line = next((x for x in lines if _UNAME_SYSNAME.match(x)), lines[0] if lines else "")
    return line.split()


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
    compat_note: Optional[str] = None
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
                parts = uname_fields(uname.text())
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
        if not macos and isinstance(info.get("mac_ver"), str):
            reported = info["mac_ver"]
            macos = real_macos_version(reported, release if isinstance(release, str) else None)
            if macos != reported:
                compat_note = (f"Python's platform.mac_ver() says macOS {reported}, the compatibility number its "
                               f"SDK sees; Darwin {release} is macOS {macos}")
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
    if compat_note:
        out.warnings.append(compat_note)
    if system is None:
        out.status = "absent"
        out.error = "the capture does not say which OS it came from (no host.json)"
    return out
