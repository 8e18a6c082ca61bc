"""Does an index answer, and does it serve a wheel that the target interpreter can install?

Reads one project page of a simple repository API: PEP 691 JSON when the server offers it, PEP 503
HTML otherwise, or a `file://` folder. The page parsers are pure (text in, files out); the check
itself makes one short request per (index, project).
"""

from __future__ import annotations

import html
import json
import sys
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple
from urllib.parse import unquote, urljoin, urlsplit
from urllib.request import url2pathname

from packaging import tags as ptags
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..errors import ParseError
from ..model.facts import Facts
from ..model.jsontypes import JsonObject
from ..urls import join_path, mask_credentials

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
DEFAULT_TIMEOUT_S = 6.0


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    requires_python: Optional[str] = None
    yanked: bool = False
    size: Optional[int] = None
    has_metadata: bool = False  # PEP 658/714: metadata without downloading the wheel


# ---------------------------------------------------------------- pure page parsers ----------

class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: List[Dict[str, Optional[str]]] = []
        self.tags_seen = 0

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        self.tags_seen += 1
        if tag.lower() == "a":
            self.anchors.append({k.lower(): v for k, v in attrs})


def _filename_of(href: str) -> str:
    path = urlsplit(href).path
    return unquote(path.rsplit("/", 1)[-1])


def parse_simple_html(text: str, base_url: str) -> List[IndexFile]:
    """Files on a PEP 503 project page. An empty page is a project with no files."""
    if text.strip() and "<" not in text:
        raise ParseError("not an HTML page")
    parser = _Anchors()
    try:
        parser.feed(text)
        parser.close()
    except Exception as exc:  # HTMLParser is lenient; this is for the truly unreadable
        raise ParseError(f"unreadable HTML: {exc}") from None
    if text.strip() and parser.tags_seen == 0:
        raise ParseError("not an HTML page")
    out: List[IndexFile] = []
    for a in parser.anchors:
        href = a.get("href")
        if not href:
            continue
        name = _filename_of(href)
        if not name:
            continue
        rp = a.get("data-requires-python")
        meta = a.get("data-core-metadata") or a.get("data-dist-info-metadata")
        out.append(IndexFile(
            filename=name,
            url=urljoin(base_url, href),
            requires_python=html.unescape(rp) if rp else None,
            yanked="data-yanked" in a,
            has_metadata=bool(meta) and meta != "false",
        ))
    return out


def parse_simple_json(text: str, base_url: str) -> List[IndexFile]:
    """Files in a PEP 691 project document."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
        raise ParseError("not a PEP 691 project document (no 'files' list)")
    out: List[IndexFile] = []
    for f in doc["files"]:
        if not isinstance(f, dict):
            continue
        name, url = f.get("filename"), f.get("url")
        if not isinstance(name, str) or not isinstance(url, str):
            continue
        size = f.get("size")
        meta = f.get("core-metadata", f.get("dist-info-metadata"))
        rp = f.get("requires-python")
        out.append(IndexFile(
            filename=name,
            url=urljoin(base_url, url),
            requires_python=rp if isinstance(rp, str) and rp else None,
            yanked=bool(f.get("yanked")),
            size=size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
            has_metadata=bool(meta),
        ))
    return out


def parse_folder_listing(names: Iterable[str], base_url: str) -> List[IndexFile]:
    return [IndexFile(filename=n, url=urljoin(base_url, n)) for n in sorted(names)
            if n.endswith((".whl", ".tar.gz", ".zip"))]


# ---------------------------------------------------------------- the target interpreter -----

@dataclass(frozen=True)
class Target:
    """What wheels the interpreter that will receive the packages accepts."""

    python_version: str  # "3.11.7" or "3.11"
    tags: Tuple[str, ...]  # best first
    implementation: str = "cpython"
    description: str = ""
    platforms: Tuple[str, ...] = ()

    @property
    def major_minor(self) -> str:
        return ".".join(self.python_version.split(".")[:2])

    def tag_rank(self) -> Dict[str, int]:
        return {t: i for i, t in enumerate(self.tags)}


def _cpython_tags(major: int, minor: int, abiflags: str, platforms: Sequence[str]) -> List[str]:
    abi = f"cp{major}{minor}{abiflags}"
    out = [str(t) for t in ptags.cpython_tags((major, minor), abis=[abi], platforms=list(platforms))]
    out += [str(t) for t in ptags.compatible_tags((major, minor), f"cp{major}{minor}", list(platforms))]
    return list(dict.fromkeys(out))


def target_for_interpreter(version: str, implementation: str = "cpython", abiflags: str = "",
                           same_as_running: bool = False, executable: Optional[str] = None) -> Target:
    """Tags for an interpreter on this machine (so this machine's platform tags apply)."""
    if same_as_running:
        tag_list = list(dict.fromkeys(str(t) for t in ptags.sys_tags()))
    else:
        major, minor = (int(x) for x in version.split(".")[:2])
        platforms = list(dict.fromkeys(ptags.platform_tags()))
        if implementation == "cpython":
            tag_list = _cpython_tags(major, minor, abiflags, platforms)
        else:
            interp = f"{ptags.interpreter_name()}{major}{minor}"
            tag_list = [str(t) for t in ptags.generic_tags(interp, None, platforms)]
            tag_list += [str(t) for t in ptags.compatible_tags((major, minor), interp, platforms)]
    plats = tuple(dict.fromkeys(t.split("-")[2] for t in tag_list if t.count("-") == 2))
    desc = f"{'CPython' if implementation == 'cpython' else implementation} {version}"
    if plats:
        desc += f" on {plats[0]}"
    return Target(python_version=version, tags=tuple(tag_list), implementation=implementation,
                  description=desc, platforms=plats)


def _linux_platforms(glibc: Optional[str], arch: str) -> List[str]:
    out: List[str] = []
    if glibc:
        try:
            gmaj, gmin = (int(x) for x in glibc.split(".")[:2])
        except ValueError:
            gmaj, gmin = 0, 0
        if gmaj == 2:
            for m in range(gmin, 4, -1):
                out.append(f"manylinux_2_{m}_{arch}")
                legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}.get(m)
                if legacy and (m == 17 or arch in ("x86_64", "i686")):
                    out.append(f"{legacy}_{arch}")
    out.append(f"linux_{arch}")
    return out


def target_from_report(facts: Facts) -> Optional[Target]:
    """Tags for a replayed machine's interpreter, from its scanned facts (None when unknown)."""
    py = facts.python
    version = py.version
    if not isinstance(version, str) or not version[:1].isdigit():
        return None
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return None
    arch = str(py.machine or facts.cpu.arch or "x86_64").lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)
    system = (facts.os.system or "").lower()
    plats: List[str] = []
    for t in py.platform_tags:
        parts = str(t).split("-")
        if len(parts) == 3 and parts[2] not in plats:
            plats.append(parts[2])
    if system == "linux":
        for p in _linux_platforms(facts.os.glibc, arch):
            if p not in plats:
                plats.append(p)
    elif system == "windows" and not plats:
        plats = ["win_amd64" if arch == "x86_64" else f"win_{arch}"]
    if not plats:
        return None
    impl = (py.implementation or "cpython").lower()
    tag_list = _cpython_tags(major, minor, "", plats)
    return Target(python_version=version, tags=tuple(tag_list), implementation=impl,
                  description=f"Python {version} on {plats[0]} (replayed machine)", platforms=tuple(plats))


# ---------------------------------------------------------------- the check ------------------

@dataclass
class IndexCheck:
    index_url: str
    requirement: str
    project: str
    ok: bool = False
    reachable: bool = False
    status: Optional[int] = None
    api: Optional[str] = None  # "json", "html", "folder"
    files_seen: int = 0
    matching_version: int = 0  # files whose version fits the requirement
    compatible: List[str] = field(default_factory=list)  # best first
    best_version: Optional[str] = None
    best_size: Optional[int] = None
    seen_tags: List[str] = field(default_factory=list)  # a few tags of files that did not fit
    message: str = ""
    ref: Optional[str] = None
    seconds: float = 0.0
    sizes: Dict[str, int] = field(default_factory=dict)  # url -> size, where the index told
    versions: List[str] = field(default_factory=list)  # every version with a wheel that fits, newest first
    files: List[IndexFile] = field(default_factory=list)  # the page as read (for recheck)

    def to_dict(self) -> JsonObject:
        """`install --json`'s `index_checks` entry (the sizes by URL stay inside)."""
        return {"index_url": self.index_url, "requirement": self.requirement, "project": self.project,
                "ok": self.ok, "reachable": self.reachable, "status": self.status, "api": self.api,
                "files_seen": self.files_seen, "matching_version": self.matching_version,
                "compatible": list(self.compatible), "best_version": self.best_version,
                "best_size": self.best_size, "seen_tags": list(self.seen_tags), "message": self.message,
                "ref": self.ref, "seconds": self.seconds}


def _project_url(index_url: str, project: str) -> str:
    return join_path(index_url, project, slash=True)


def host_of(url: str) -> str:
    """The host (and port) of an index URL, never its user name or password."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return netloc or mask_credentials(parts.path or url)


def _fetch_file_index(url: str) -> Tuple[Optional[int], str, str]:
    """A file:// simple index: <dir>/<project>/index.html, or a folder of files."""
    path = Path(url2pathname(urlsplit(url).path))
    if path.is_dir():
        page = path / "index.html"
        if page.is_file():
            return 200, "html", page.read_text(encoding="utf-8", errors="replace")
        return 200, "folder", "\n".join(p.name for p in path.iterdir())
    return 404, "html", ""


def evaluate_files(check: IndexCheck, files: List[IndexFile], target: Target) -> IndexCheck:
    """Pure: which files fit the requirement and the target. Fills check in place and returns it."""
    try:
        req: Optional[Requirement] = Requirement(check.requirement)
    except InvalidRequirement:
        req = None
    rank = target.tag_rank()
    py_version = target.python_version
    check.files_seen = len(files)
    candidates: List[Tuple[Version, int, IndexFile]] = []
    other_tags: List[str] = []
    only_sdists = True
    for f in files:
        if f.size is not None:
            check.sizes[f.url.split("#", 1)[0]] = f.size
        if not f.filename.endswith(".whl"):
            continue
        only_sdists = False
        try:
            name, version, _build, ftags = parse_wheel_filename(f.filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if canonicalize_name(name) != canonicalize_name(check.project) or f.yanked:
            continue
        if req is not None and req.specifier and not req.specifier.contains(version, prereleases=True):
            continue
        check.matching_version += 1
        if f.requires_python:
            try:
                if not SpecifierSet(f.requires_python).contains(py_version, prereleases=True):
                    other_tags.append(f"requires Python {f.requires_python}")
                    continue
            except InvalidSpecifier:
                pass
        best = min((rank[str(t)] for t in ftags if str(t) in rank), default=None)
        if best is None:
            other_tags.extend(sorted(str(t) for t in ftags)[:1])
            continue
        candidates.append((version, -best, f))
    candidates.sort(key=lambda c: (c[0], c[1]), reverse=True)
    check.versions = list(dict.fromkeys(str(c[0]) for c in candidates))
    check.compatible = [c[2].filename for c in candidates[:5]]
    check.seen_tags = list(dict.fromkeys(other_tags))[:5]
    if candidates:
        check.ok = True
        check.best_version = str(candidates[0][0])
        check.best_size = candidates[0][2].size
        check.message = f"serves {check.compatible[0]}"
        return check
    check.ok = False
    where = host_of(check.index_url)
    if not files:
        check.message = f"{where} lists no files for {check.project}"
        check.ref = "E502"
    elif only_sdists:
        check.message = f"{where} has only source archives for {check.project}, no wheels"
        check.ref = "E503"
    elif check.matching_version == 0:
        check.message = f"{where} has {check.project}, but no version that fits {check.requirement}"
        check.ref = "E503"
    else:
        seen = ", ".join(check.seen_tags) or "other platforms"
        check.message = (f"{where} has {check.requirement} but no wheel for {target.description} "
                         f"(it has: {seen})")
        check.ref = "E503"
    return check


def check_index(index_url: str, requirement: str, target: Target, timeout: float = DEFAULT_TIMEOUT_S,
                session: Any = None) -> IndexCheck:
    """One request: does `index_url` answer for this requirement's project, with a wheel that fits?"""
    started = time.perf_counter()
    try:
        project = str(canonicalize_name(Requirement(requirement).name))
    except InvalidRequirement:
        project = str(canonicalize_name(requirement.split(";")[0].strip()))
    check = IndexCheck(index_url=mask_credentials(index_url), requirement=requirement, project=project)
    url = _project_url(index_url, project)
    try:
        if url.startswith("file:"):
            status, kind, text = _fetch_file_index(url)
            final_url = url
        else:
            import requests

            sess = session or requests
            resp = sess.get(url, headers={"Accept": ACCEPT}, timeout=(min(timeout, 4.0), timeout),
                            allow_redirects=True)
            status, text, final_url = resp.status_code, resp.text, resp.url or url
            ctype = resp.headers.get("Content-Type", "")
            kind = "json" if JSON_TYPE in ctype or ctype.startswith("application/json") else "html"
    except Exception as exc:  # requests' ConnectionError, Timeout, SSLError, InvalidURL, OSError
        check.reachable = False
        check.ok = False
        check.ref = "E501"
        check.message = f"cannot reach {host_of(index_url)}: {mask_credentials(_short_reason(exc))}"
        check.seconds = time.perf_counter() - started
        return check
    check.reachable = True
    check.status = status = status or 0
    check.api = kind
    check.seconds = time.perf_counter() - started
    if status == 404:
        check.ref = "E502"
        check.message = (f"{host_of(index_url)} has no folder {project}" if url.startswith("file:")
                         else f"{host_of(index_url)} answers, but has no project {project} (HTTP 404)")
        return check
    if status >= 400:
        check.ref = "E501"
        check.message = f"{host_of(index_url)} answered HTTP {status} for {project}"
        return check
    try:
        if kind == "json":
            files = parse_simple_json(text, final_url)
        elif kind == "folder":
            files = parse_folder_listing(text.splitlines(), final_url)
        else:
            files = parse_simple_html(text, final_url)
    except ParseError as exc:
        check.ref = "E502"
        check.message = f"{host_of(index_url)} answered, but not with a package index page ({exc})"
        return check
    check.files = files
    return evaluate_files(check, files, target)


def recheck(check: IndexCheck, requirement: str, target: Target) -> IndexCheck:
    """The same page read again for another requirement of its project (a variant's pin), without
    asking the index again."""
    again = IndexCheck(index_url=check.index_url, requirement=requirement, project=check.project,
                       reachable=check.reachable, status=check.status, api=check.api, seconds=check.seconds,
                       files=check.files)
    return evaluate_files(again, check.files, target)


def _short_reason(exc: BaseException) -> str:
    text = str(exc)
    for needle, say in (
        ("Name or service not known", "the name does not resolve (offline, or DNS blocked)"),
        ("Temporary failure in name resolution", "the name does not resolve (offline, or DNS blocked)"),
        ("nodename nor servname", "the name does not resolve (offline, or DNS blocked)"),
        ("getaddrinfo failed", "the name does not resolve (offline, or DNS blocked)"),
        ("Connection refused", "connection refused (nothing listens there)"),
        ("Network is unreachable", "the network is unreachable"),
        ("timed out", "no answer within the timeout"),
        ("Timeout", "no answer within the timeout"),
        ("CERTIFICATE_VERIFY_FAILED", "its TLS certificate is not trusted here"),
    ):
        if needle in text:
            return say
    return f"{type(exc).__name__}: {text[:160]}"


def running_target() -> Target:
    v = sys.version_info
    impl = sys.implementation.name
    return target_for_interpreter(f"{v[0]}.{v[1]}.{v[2]}", impl, same_as_running=True,
                                  executable=sys.executable)


def offline_hint() -> str:
    return ("if this machine is offline or the index is blocked: --find-links DIR (a folder of wheels), "
            "--index-url URL (a mirror), or --use-pip-config (let pip's own configuration choose)")


__all__ = [
    "IndexFile", "IndexCheck", "Target", "check_index", "evaluate_files", "parse_simple_html",
    "parse_simple_json", "parse_folder_listing", "target_for_interpreter", "target_from_report",
    "running_target", "offline_hint", "host_of",
]
