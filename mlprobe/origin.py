"""How this mlprobe was installed, so that advice to add one of its extras is a command that works:
`pip install 'mlprobe[ray]'` fetches mlprobe from the index, which fails for (or replaces) a copy
installed from a checkout or a wheel. pip records where a distribution came from in its
`direct_url.json` (PEP 610); without one the distribution came from an index."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import unquote, urlparse


@dataclass(frozen=True)
class Origin:
    kind: str  # "index", "editable", "folder", "file", "url", "vcs", "checkout" (not installed)
    location: Optional[str] = None  # a local path, or the URL pip was given
    vcs: Optional[str] = None
    commit: Optional[str] = None


def _local_path(url: str) -> Optional[str]:
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return None
    return unquote(parsed.path) if not parsed.netloc else f"//{parsed.netloc}{unquote(parsed.path)}"


def origin_from_direct_url(doc: Any) -> Origin:
    """PEP 610's document -> Origin (an unreadable one counts as an index install)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("url"), str):
        return Origin("index")
    url = doc["url"]
    local = _local_path(url)
    if isinstance(doc.get("vcs_info"), dict):
        info = doc["vcs_info"]
        return Origin("vcs", url, vcs=str(info.get("vcs") or "git"), commit=info.get("commit_id"))
    if isinstance(doc.get("dir_info"), dict):
        editable = bool(doc["dir_info"].get("editable"))
        return Origin("editable" if editable else "folder", local or url)
    if local is not None:
        return Origin("file", local)
    return Origin("url", url)


def installed_origin(read: Optional[Callable[[], Optional[str]]] = None,
                     package_dir: Optional[Path] = None) -> Origin:
    """Where the running mlprobe came from. Code that runs from a source tree (an editable install,
    or a checkout on PYTHONPATH) is that checkout; otherwise its distribution's direct_url.json
    says (a folder, a wheel or archive file, a URL, a VCS), and without one it came from an index."""
    here = package_dir or Path(__file__).resolve().parent
    if (here.parent / "pyproject.toml").is_file():
        return Origin("checkout", str(here.parent))
    if read is None:
        from importlib import metadata

        try:
            dist = metadata.distribution("mlprobe")
        except metadata.PackageNotFoundError:
            return Origin("index")

        def read() -> Optional[str]:
            return dist.read_text("direct_url.json")
    try:
        text = read()
    except OSError:
        text = None
    if not text:
        return Origin("index")
    try:
        return origin_from_direct_url(json.loads(text))
    except ValueError:
        return Origin("index")


def extra_install_command(extra: str, origin: Optional[Origin] = None) -> str:
    """The pip command that adds mlprobe's `extra` the way this mlprobe was installed."""
    o = origin or installed_origin()
    pip = "python -m pip install"
    if o.kind in ("editable", "checkout") and o.location:
        return f"{pip} -e {shlex.quote(f'{o.location}[{extra}]')}"
    if o.kind in ("folder", "file") and o.location:
        return f"{pip} {shlex.quote(f'{o.location}[{extra}]')}"
    if o.kind == "vcs" and o.location:
        ref = f"@{o.commit}" if o.commit else ""
        return f"{pip} {shlex.quote(f'mlprobe[{extra}] @ {o.vcs}+{o.location}{ref}')}"
    if o.kind == "url" and o.location:
        return f"{pip} {shlex.quote(f'mlprobe[{extra}] @ {o.location}')}"
    return f"{pip} {shlex.quote(f'mlprobe[{extra}]')}"
