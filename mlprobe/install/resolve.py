"""Resolution without installing: `pip install --dry-run --report -` says which distributions and
versions would land; sizes come from the index (PEP 691), the disk (file:// wheels) or a HEAD request.

Also the reading of pip's and uv's failures into errors a person can act on, and the choice of a
recipe's build variant (+cpu, +cu126, +rocm6.2) when the recipe's own index is not the source.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import ParseError, StageError
from ..model.jsontypes import JsonObject
from .backends import COMMON_PIP, Sources, pip_env, source_args
from .proc import run_quiet

DRY_RUN_TIMEOUT_S = 600.0
HEAD_TIMEOUT_S = 4.0
MAX_HEAD_REQUESTS = 40

# Projects that PyTorch's indexes publish once per build variant, told apart by the local version
# label (2.5.1+cpu, 2.5.1+cu124, 2.5.1+rocm6.2). On the default index the same name is another build.
VARIANT_PROJECTS = frozenset({"torch", "torchvision", "torchaudio"})


@dataclass
class ResolvedDist:
    name: str
    version: str
    url: Optional[str] = None
    filename: Optional[str] = None
    size: Optional[int] = None
    requested: bool = False
    is_direct: bool = False
    sha256: Optional[str] = None  # as the resolver reported it (the index's hash)

    def to_dict(self) -> JsonObject:
        return {"name": self.name, "version": self.version, "url": self.url, "filename": self.filename,
                "size": self.size, "requested": self.requested, "is_direct": self.is_direct,
                "sha256": self.sha256}


@dataclass(frozen=True)
class Failure:
    # network | not-found | incompatible | conflict | broken | externally-managed | interrupted | pip-too-old | other
    kind: str
    what: str
    why: str
    next_step: str
    ref: str

    def to_error(self, kind: str = "failure") -> StageError:
        return StageError(self.what, why=self.why, next_step=self.next_step, ref=self.ref, kind=kind)


@dataclass
class Resolution:
    ok: bool
    dists: List[ResolvedDist] = field(default_factory=list)
    command: str = ""
    seconds: float = 0.0
    failure: Optional[Failure] = None
    skipped: Optional[str] = None  # why no resolution was tried
    output_tail: str = ""
    tool: str = "pip"  # the resolver: pip (install --dry-run --report) or uv (pip compile to a pylock.toml)
    lock_text: Optional[str] = None  # uv's pylock.toml of this resolution, installed as it is by --apply

    @property
    def sizes_known(self) -> bool:
        """Every distribution's size is known (the index or the disk said)."""
        return all(d.size is not None for d in self.dists)

    @property
    def hashed(self) -> bool:
        """Every distribution has a sha256 from the resolver, so it can be installed by hash."""
        return bool(self.dists) and all(d.sha256 and d.url for d in self.dists)

    def hashed_requirements(self) -> List[str]:
        """`name==version --hash=sha256:…` for each distribution: installed with --no-deps, exactly
        these files land (pip picks the file of that hash, and refuses any other)."""
        return [f"{d.name}=={d.version} --hash=sha256:{d.sha256}" if d.sha256 else f"{d.name}=={d.version}"
                for d in self.dists]

    @property
    def total_size(self) -> int:
        return sum(d.size or 0 for d in self.dists)

    @property
    def unknown_sizes(self) -> int:
        return sum(1 for d in self.dists if d.size is None)

    def to_dict(self) -> JsonObject:
        f = self.failure
        return {
            "ok": self.ok, "skipped": self.skipped, "command": self.command, "tool": self.tool,
            "seconds": round(self.seconds, 2),
            "distributions": [d.to_dict() for d in self.dists],
            "total_size": self.total_size, "unknown_sizes": self.unknown_sizes,
            "failure": {"kind": f.kind, "what": f.what, "why": f.why, "next_step": f.next_step, "ref": f.ref}
            if f is not None else None,
        }


# ---------------------------------------------------------------- pure readers ---------------

def parse_pip_report(text: str) -> List[ResolvedDist]:
    """The `install` list of pip's installation report (format version 1)."""
    start = text.find("{")
    if start < 0:
        raise ParseError("no JSON report in pip's output")
    try:
        doc = json.loads(text[start:])
    except ValueError as exc:
        raise ParseError(f"pip's report is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("install"), list):
        raise ParseError("pip's report has no 'install' list")
    out: List[ResolvedDist] = []
    for item in doc["install"]:
        if not isinstance(item, dict):
            continue
        meta = item.get("metadata") or {}
        name, version = meta.get("name"), meta.get("version")
        if not isinstance(name, str) or not isinstance(version, str):
            continue
        info = item.get("download_info") or {}
        url = info.get("url") if isinstance(info.get("url"), str) else None
        filename = unquote(url.split("#", 1)[0].rsplit("/", 1)[-1]) if url else None
        out.append(ResolvedDist(name=name, version=version, url=url, filename=filename,
                                requested=bool(item.get("requested")), is_direct=bool(item.get("is_direct")),
                                sha256=_report_sha256(info)))
    return out


def _report_sha256(info: Any) -> Optional[str]:
    """The sha256 of a pip report's `download_info` (archive_info.hashes, or the older `hash`)."""
    archive = info.get("archive_info") if isinstance(info, dict) else None
    if not isinstance(archive, dict):
        return None
    hashes = archive.get("hashes")
    digest = hashes.get("sha256") if isinstance(hashes, dict) else None
    if isinstance(digest, str) and digest:
        return digest
    h = archive.get("hash")
    return h.split("=", 1)[1] if isinstance(h, str) and h.startswith("sha256=") else None


def parse_uv_pylock(text: str) -> List[ResolvedDist]:
    """`uv pip compile --format pylock.toml`'s lock -> its distributions, each with the one file uv
    chose (URL, size where the index said it, sha256). Raises ParseError when it is not such a lock."""
    from .lock import loads_toml

    try:
        doc = loads_toml(text)
    except ValueError as exc:
        raise ParseError(f"uv's pylock.toml does not read: {exc}") from None
    packages = doc.get("packages")
    if not isinstance(packages, list):
        raise ParseError("uv's pylock.toml has no [[packages]]")
    out: List[ResolvedDist] = []
    for pkg in packages:
        if not isinstance(pkg, dict) or not isinstance(pkg.get("name"), str):
            continue
        files = pkg.get("wheels") or ([pkg["sdist"]] if isinstance(pkg.get("sdist"), dict) else [])
        f = files[0] if isinstance(files, list) and files and isinstance(files[0], dict) else {}
        url = f.get("url") if isinstance(f.get("url"), str) else None
        if url is None and isinstance(f.get("path"), str):
            url = Path(f["path"]).absolute().as_uri()
        hashes = f.get("hashes")
        digest = hashes.get("sha256") if isinstance(hashes, dict) else None
        size = f.get("size")
        name = f.get("name") if isinstance(f.get("name"), str) else \
            (unquote(url.split("#", 1)[0].rsplit("/", 1)[-1]) if url else None)
        out.append(ResolvedDist(name=pkg["name"], version=str(pkg.get("version") or ""), url=url, filename=name,
                                size=size if isinstance(size, int) and not isinstance(size, bool) else None,
                                sha256=digest if isinstance(digest, str) and digest else None))
    return out


_NET = re.compile(r"(Could not fetch URL|NewConnectionError|Max retries exceeded|Connection refused|"
                  r"Network is unreachable|Name or service not known|Temporary failure in name resolution|"
                  r"ConnectTimeoutError|ReadTimeoutError|Failed to establish a new connection|"
                  r"error sending request|Failed to fetch|dns error|operation timed out|"
                  r"HTTP error 5\d\d|50[0-9] Server Error|Service Unavailable)", re.I)
_404 = re.compile(r"(404 Client Error|HTTP error 404|404 Not Found|status code 404|"
                  r"HTTP status client error \(404)", re.I)
_CONFLICT = re.compile(r"(ResolutionImpossible|conflicting dependencies|No solution found when resolving|"
                       r"requirements are unsatisfiable)", re.I)
_NOT_FOUND = re.compile(r"No matching distribution found for ([^\s]+)|Because ([^\s]+) was not found in the "
                        r"package registry|there is no version of ([^\s]+)", re.I)
_BROKEN = re.compile(r"(BadZipFile|Bad CRC-32|is invalid\.|is not a valid wheel|has an invalid wheel|"
                     r"invalid zip|Failed to read from zip|Failed to unzip|"
                     r"THESE PACKAGES DO NOT MATCH THE HASHES|Hash mismatch|RECORD|"
                     r"\.dist-info directory not found|Wheel '.*' located at .* is invalid|"
                     r"Failed to extract|Zip file|zip archive)", re.I)
_INCOMPAT = re.compile(r"(is not a supported wheel on this platform|"
                       r"no wheels with a matching (Python|platform)|"
                       r"no wheels are available with a matching|only has wheels for|Requires-Python)", re.I)
_PEP668 = re.compile(r"externally-managed-environment|externally managed", re.I)
_CANCEL = re.compile(r"Operation cancelled by user|KeyboardInterrupt", re.I)


def _first_match_name(m: "Optional[re.Match[str]]") -> str:
    if not m:
        return "a package"
    return next((g for g in m.groups() if g), "a package").strip(".,'\"`")


def classify_failure(output: str, tool: str = "pip", during: str = "resolving") -> Failure:
    """pip's or uv's failure text -> what failed, why, and the next step (pure)."""
    tail = "\n".join(line for line in output.strip().splitlines()[-60:])
    last = next((ln.strip() for ln in reversed(tail.splitlines())
                 if ln.strip().upper().startswith(("ERROR", "ZIPFILE", "× ", "ERROR:", "CAUSED BY"))),
                tail.strip().splitlines()[-1].strip() if tail.strip() else "no output")
    last = last[:300]
    offline = ("check the network, or use --find-links DIR / --index-url URL, or --use-pip-config to let "
               "pip's own configuration choose the sources")
    if _CANCEL.search(tail):
        return Failure("interrupted", f"{tool} was interrupted while {during}", last,
                       "run the same command again when ready", "E507")
    if _PEP668.search(tail):
        return Failure("externally-managed",
                       f"{tool} refused: the environment is externally managed (PEP 668)", last,
                       "install into a virtual environment (leave out --system)", "E508")
    if _CONFLICT.search(tail):
        return Failure("conflict", f"the requirements conflict ({tool} found no set of versions that fits)",
                       last, "pick another recipe (--recipe ID), or relax the pins that conflict; "
                       "an existing --venv's packages count too, so a fresh venv may resolve", "E504")
    if _404.search(tail):
        return Failure("not-found", f"the index lists a file that is not there (HTTP 404) while {during}",
                       last, f"try again later, or use another source: {offline}", "E502")
    if _BROKEN.search(tail) and during == "installing":
        return Failure("broken", "a downloaded wheel is damaged or not a valid wheel", last,
                       "try again (a download may have been cut); if it persists the index serves a bad "
                       "file: use another source (--index-url URL, --find-links DIR)", "E505")
    if _INCOMPAT.search(tail):
        return Failure("incompatible", "no wheel fits this interpreter or platform", last,
                       "use --python X.Y for an interpreter the wheels support, or pick another recipe",
                       "E503")
    if _NET.search(tail):
        return Failure("network", f"{tool} could not reach a package index while {during}", last, offline,
                       "E501")
    m = _NOT_FOUND.search(tail)
    if m:
        name = _first_match_name(m)
        return Failure("not-found", f"no installable version of {name} in the sources",
                       last, "the sources have no wheel for this interpreter and platform, or cannot be "
                       f"reached: {offline}; `mlprobe install` (without --apply) shows each index check",
                       "E503")
    if _BROKEN.search(tail):
        return Failure("broken", "a wheel is damaged or not a valid wheel", last,
                       "use another source (--index-url URL, --find-links DIR)", "E505")
    return Failure("other", f"{tool} failed while {during}", last,
                   "read the transcript log for the whole output; run again with another recipe or source",
                   "E506")


_OWN_PYTHON = re.compile(r"requires a different Python:?\.? (\d+)\.(\d+)(?:\.\d+)? not in")


def own_python_check(output: str, python_version: Optional[str]) -> Optional[Failure]:
    """pip before 23.3 checks a package's Requires-Python against the interpreter that runs pip,
    not the --python-version it was given (pip issue 12216, fixed by pip PR 12218): a dry run for
    another Python then fails for a package that fits the target. Say that, not "no wheel fits"."""
    if not python_version:
        return None
    m = _OWN_PYTHON.search(output)
    if m is None:
        return None
    checked = f"{m.group(1)}.{m.group(2)}"
    target = ".".join(python_version.split(".")[:2])
    if checked == target:
        return None
    line = next((ln.strip() for ln in output.splitlines() if _OWN_PYTHON.search(ln)), "")[:300]
    return Failure("pip-too-old",
                   f"pip checked Requires-Python against the Python that runs it ({checked}), "
                   f"not the target Python {target}",
                   f"{line} (pip before 23.3 ignores --python-version in that check)",
                   "upgrade pip where mlprobe runs: python -m pip install --upgrade \"pip>=23.3\"", "E522")


def parse_index_versions(text: str) -> List[str]:
    """`pip index versions NAME` -> the versions it lists (newest first)."""
    m = re.search(r"^Available versions:\s*(.*)$", text, re.M)
    if not m:
        raise ParseError("no 'Available versions:' line")
    return [v.strip() for v in m.group(1).split(",") if v.strip()]


# ---------------------------------------------------------------- running pip ----------------

def dry_run_argv(pip_cmd: Sequence[str], packages: Sequence[str], sources: Sources, *,
                 ignore_installed: bool, python_version: Optional[str] = None,
                 platforms: Sequence[str] = (), cache: bool = False) -> List[str]:
    argv = [*pip_cmd, "install", "--dry-run", "--report", "-", "--quiet", *COMMON_PIP]
    if not cache:
        argv.append("--no-cache-dir")
    if ignore_installed:
        argv.append("--ignore-installed")
    if python_version or platforms:
        # pip < 23.3 accepts these only with --target; a dry run writes nothing there.
        unused = os.path.join(tempfile.gettempdir(), "mlprobe-dry-run-target-never-written")
        argv += ["--only-binary", ":all:", "--target", unused]
        if python_version:
            argv += ["--python-version", python_version]
        for p in platforms:
            argv += ["--platform", p]
    return argv + source_args(sources) + list(packages)


def dry_run(pip_cmd: Sequence[str], packages: Sequence[str], sources: Sources, *, ignore_installed: bool,
            python_version: Optional[str] = None, platforms: Sequence[str] = (),
            timeout: float = DRY_RUN_TIMEOUT_S, cache: bool = False) -> Resolution:
    """Resolve without installing. Without `cache`, pip writes nothing but temporary files (it may
    still download wheels to read them); with it (--apply), the install reuses those downloads."""
    argv = dry_run_argv(pip_cmd, packages, sources, ignore_installed=ignore_installed,
                        python_version=python_version, platforms=platforms, cache=cache)
    shown = " ".join(argv)
    cp, seconds, gone = _run_resolver("pip", argv, shown, pip_env(sources), timeout)
    if cp is None:
        return gone
    if cp.returncode != 0:
        failure = own_python_check(cp.stderr, python_version) or \
            classify_failure(cp.stderr + "\n" + cp.stdout[-2000:], "pip")
        return Resolution(ok=False, command=shown, seconds=seconds, output_tail=cp.stderr[-4000:],
                          failure=failure)
    try:
        dists = parse_pip_report(cp.stdout)
    except ParseError as exc:
        return Resolution(ok=False, command=shown, seconds=seconds, output_tail=cp.stderr[-4000:],
                          failure=Failure("other", "pip's dry run gave no readable report", str(exc),
                                          "pip >= 22.2 is needed for --report; upgrade pip", "E539"))
    return Resolution(ok=True, dists=dists, command=shown, seconds=seconds)


def _run_resolver(tool: str, argv: List[str], shown: str, env: Dict[str, str], timeout: float,
                  stdin: Optional[str] = None) -> "Tuple[Any, float, Resolution]":
    """(the finished process or None, seconds, the Resolution to return when it did not finish)."""
    started = time.perf_counter()
    try:
        cp = run_quiet(argv, timeout=timeout, env=env, stdin=stdin)
    except Exception as exc:  # TimeoutExpired, OSError
        seconds = time.perf_counter() - started
        return None, seconds, Resolution(
            ok=False, command=shown, seconds=seconds,
            failure=Failure("other", f"{tool}'s dry run did not finish", str(exc)[:300],
                            "run again; read the index checks above", "E506"))
    return cp, time.perf_counter() - started, Resolution(ok=False)


_UV_INSTALL_ONLY = frozenset({"--require-hashes", "--verify-hashes", "--no-verify-hashes"})
def uv_compile_argv(uv: str, python: str, packages: Sequence[str], sources: Sources,
                    extra: Sequence[str] = ()) -> Tuple[List[str], str]:
    """(argv, stdin) of `uv pip compile --format pylock.toml` for `python`: the packages on stdin,
    requirement files (`-r FILE`) as its positional sources, the install-only options (hash
    checking) left to the install."""
    compile_extra: List[str] = []
    files: List[str] = []
    it = iter(extra)
    for a in it:
        if a in ("-r", "--requirement"):
            files.append(next(it, ""))
        elif a.startswith("--requirement="):
            files.append(a.split("=", 1)[1])
        elif a not in _UV_INSTALL_ONLY:
            compile_extra.append(a)
    argv = [uv, "pip", "compile", "-", *[f for f in files if f], "--no-config", "--format", "pylock.toml",
            "--python", python, "--no-header", "--quiet", *source_args(sources), *compile_extra]
    return argv, "\n".join(packages) + "\n"


def uv_dry_run(uv: str, python: str, packages: Sequence[str], sources: Sources, env: Dict[str, str], *,
               extra: Sequence[str] = (), timeout: float = DRY_RUN_TIMEOUT_S) -> Resolution:
    """Resolve once with uv, the installer `--apply` will run, with the same sources and options, for
    that interpreter: `uv pip compile --format pylock.toml`. The lock it prints (every file's URL,
    sha256 and, where the index says, size) is what --apply installs (`uv pip install -r
    pylock.toml`: no second resolution) and what mlprobe's own lock is written from."""
    argv, stdin = uv_compile_argv(uv, python, packages, sources, extra)
    shown = " ".join(argv + ["<<<", " ".join(packages)]) if packages else " ".join(argv)
    cp, seconds, gone = _run_resolver("uv", argv, shown, env, timeout, stdin)
    if cp is None:
        gone.tool = "uv"
        return gone
    if cp.returncode != 0:
        return Resolution(ok=False, command=shown, seconds=seconds, output_tail=cp.stderr[-4000:], tool="uv",
                          failure=classify_failure(cp.stderr + "\n" + cp.stdout[-2000:], "uv"))
    try:
        dists = parse_uv_pylock(cp.stdout)
    except ParseError as exc:
        return Resolution(ok=False, command=shown, seconds=seconds, output_tail=cp.stderr[-4000:], tool="uv",
                          failure=Failure("other", "uv's resolution gave no readable pylock.toml", str(exc),
                                          "use --installer pip, or a uv that writes pylock.toml (>= 0.6)",
                                          "E539"))
    wanted = {canonicalize_name(_req_name(p)) for p in packages}
    for d in dists:
        d.requested = canonicalize_name(d.name) in wanted
    return Resolution(ok=True, dists=dists, command=shown, seconds=seconds, tool="uv", lock_text=cp.stdout)


def _req_name(text: str) -> str:
    try:
        return Requirement(text).name
    except InvalidRequirement:
        return re.split(r"[<>=!~\[;@ ]", text.strip(), maxsplit=1)[0]


def _head_size(url: str) -> Optional[int]:
    try:
        import requests

        r = requests.head(url, timeout=HEAD_TIMEOUT_S, allow_redirects=True)
        n = r.headers.get("Content-Length")
        return int(n) if r.status_code < 400 and n and n.isdigit() else None
    except Exception:
        return None


def fill_sizes(dists: List[ResolvedDist], known: Dict[str, int], ask_network: bool = True) -> None:
    """Sizes from the index pages already read, local files, then (bounded) HEAD requests."""
    ask: List[ResolvedDist] = []
    for d in dists:
        if not d.url:
            continue
        url = d.url.split("#", 1)[0]
        if url in known:
            d.size = known[url]
        elif url.startswith("file:"):
            try:
                d.size = Path(url2pathname(urlsplit(url).path)).stat().st_size
            except OSError:
                pass
        elif url.startswith(("http://", "https://")):
            ask.append(d)
    if ask and ask_network:
        ask = ask[:MAX_HEAD_REQUESTS]
        with ThreadPoolExecutor(max_workers=min(8, len(ask))) as pool:
            for d, size in zip(ask, pool.map(lambda x: _head_size((x.url or "").split("#", 1)[0]), ask)):
                d.size = size


# ---------------------------------------------------------------- variants -------------------

def _requirement(spec: str) -> Optional[Requirement]:
    try:
        return Requirement(spec)
    except InvalidRequirement:
        return None


def pick_variant(versions: Sequence[str], requirement: str, label: str) -> Optional[str]:
    """Newest version with this local label (e.g. 'cpu') that fits the requirement (pure)."""
    req = _requirement(requirement)
    best: Optional[Version] = None
    for v in versions:
        try:
            ver = Version(v)
        except InvalidVersion:
            continue
        if (ver.local or "").lower() != label.lower():
            continue
        if req is not None and req.specifier and not req.specifier.contains(ver, prereleases=True):
            continue
        if best is None or ver > best:
            best = ver
    return str(best) if best is not None else None


def needs_variant(requirement: str) -> bool:
    req = _requirement(requirement)
    if req is None or canonicalize_name(req.name) not in VARIANT_PROJECTS:
        return False
    return not any(sp.operator == "===" or "+" in sp.version for sp in req.specifier)


def pin_variants(pip_cmd: Sequence[str], packages: Sequence[str], label: str, sources: Sources,
                 python_version: Optional[str] = None, timeout: float = 120.0) -> Tuple[List[str], List[str]]:
    """When the recipe's index is not the source, keep its build: `torch` -> `torch==2.13.0+cpu`,
    the newest +label build that the chosen sources have. Returns (packages, notes); raises when a
    variant project has no such build (installing the default index's build would be another stack)."""
    out: List[str] = []
    notes: List[str] = []
    for spec in packages:
        if not needs_variant(spec):
            out.append(spec)
            continue
        req = _requirement(spec)
        assert req is not None
        argv = [*pip_cmd, "index", "versions", req.name, *COMMON_PIP, *source_args(sources)]
        if python_version:
            argv += ["--python-version", python_version, "--only-binary", ":all:"]
        try:
            cp = run_quiet(argv, timeout=timeout, env=pip_env(sources))
            versions = parse_index_versions(cp.stdout) if cp.returncode == 0 else []
        except (ParseError, OSError, Exception):
            versions = []
        pinned, note = variant_pin(spec, versions, label, sources)
        out.append(pinned)
        notes.append(note)
    return out, notes


def variant_pin(spec: str, versions: Sequence[str], label: str, sources: Sources) -> Tuple[str, str]:
    """(the requirement pinned to the newest +label build among `versions`, the note saying so);
    E514 when the sources have no such build."""
    req = _requirement(spec)
    assert req is not None
    chosen = pick_variant(versions, spec, label)
    if chosen is None:
        labelled = [v for v in versions if "+" in v][:6]
        raise StageError(
            f"the sources have no {req.name} build labelled +{label}",
            why=(f"the recipe asks for the +{label} build; the sources ({sources.describe()}) list "
                 + (f"only {', '.join(labelled)} among labelled builds" if labelled else
                    f"{', '.join(versions[:6]) or 'no versions'} (builds without a label are another "
                    "variant, e.g. CUDA on Linux)")),
            next_step=(f"add a folder or mirror that has the +{label} wheel (--find-links DIR, "
                       "--index-url URL), or use the recipe's own index (leave out the source options)"),
            ref="E514", kind="unavailable",
        )
    marker = f"; {req.marker}" if req.marker else ""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return (f"{req.name}{extras}=={chosen}{marker}",
            f"{req.name} pinned to {chosen}: the +{label} build the recipe's index would give")


def installed_names(dists: Sequence[ResolvedDist]) -> List[str]:
    return sorted({str(canonicalize_name(d.name)) for d in dists})

