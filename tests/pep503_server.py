"""A tiny package index for tests: wheels built here, served over HTTP on 127.0.0.1 (PEP 503 HTML,
PEP 691 JSON and PEP 658 metadata files), with failures to inject.

Everything is bounded: the server answers at most `max_requests` requests, lives at most
`lifetime_s` seconds, and stops by itself after either; a throttled download sends a few KiB at a
time. Nothing here reaches beyond the loopback address.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import threading
import time
import urllib.parse
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

from packaging.utils import canonicalize_name, parse_wheel_filename


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def metadata_text(name: str, version: str, requires: Sequence[str] = (),
                  requires_python: Optional[str] = None) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             "Summary: a wheel built by mlprobe's tests"]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    lines += [f"Requires-Dist: {r}" for r in requires]
    return "\n".join(lines) + "\n"


def build_wheel(
    folder: Path,
    name: str,
    version: str,
    requires: Sequence[str] = (),
    tag: str = "py3-none-any",
    modules: Optional[Dict[str, str]] = None,
    requires_python: Optional[str] = None,
    corrupt_payload: bool = False,
    padding_bytes: int = 0,
) -> Path:
    """Write a minimal, valid pure-Python wheel (METADATA, WHEEL, RECORD with hashes).

    corrupt_payload: the module's bytes are damaged inside the zip after it was written, so that the
    metadata still reads (a resolver is happy) but extracting the payload fails (a CRC error).
    padding_bytes: an extra incompressible data file, to make a download take a while.
    """
    dist = name.replace("-", "_")
    pkg = canonicalize_name(name).replace("-", "_")
    files: Dict[str, bytes] = {}
    mods = modules if modules is not None else {
        f"{pkg}/__init__.py": f"__version__ = {version!r}\nNAME = {name!r}\n",
    }
    for path, text in mods.items():
        files[path] = text.encode("utf-8")
    if padding_bytes:
        # Deterministic and incompressible, so the zip really is that big.
        chunks, seed = [], hashlib.sha256(name.encode()).digest()
        while sum(len(c) for c in chunks) < padding_bytes:
            seed = hashlib.sha256(seed).digest()
            chunks.append(seed * 64)
        files[f"{pkg}/padding.bin"] = b"".join(chunks)[:padding_bytes]
    info = f"{dist}-{version}.dist-info"
    files[f"{info}/METADATA"] = metadata_text(name, version, requires, requires_python).encode()
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: mlprobe-tests\nRoot-Is-Purelib: true\n"
                              f"Tag: {tag}\n").encode()
    files[f"{info}/top_level.txt"] = (pkg + "\n").encode()
    record = "".join(f"{p},{_record_hash(d)},{len(d)}\n" for p, d in files.items())
    record += f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    if corrupt_payload:
        target = next(p for p in mods)
        raw = bytearray(out.read_bytes())
        original = files[target]
        at = raw.find(original)
        assert at >= 0, "payload not found in the zip"
        raw[at] ^= 0xFF  # one flipped byte: the CRC no longer matches
        out.write_bytes(bytes(raw))
    return out


def wheel_metadata(path: Path) -> bytes:
    with zipfile.ZipFile(path) as zf:
        for n in zf.namelist():
            if n.endswith(".dist-info/METADATA"):
                return zf.read(n)
    raise ValueError(f"{path} has no METADATA")


@dataclass
class IndexConfig:
    missing_files: Set[str] = field(default_factory=set)  # listed on the page, 404 when fetched
    slow_files: Set[str] = field(default_factory=set)  # sent slowly (a few KiB per tick)
    slow_from_nth: int = 1  # slow from the n-th download of such a file on (2: the dry run's is quick)
    slow_chunk: int = 4096
    slow_tick_s: float = 0.05
    serve_metadata: bool = True  # PEP 658 `.metadata` files next to wheels
    status_override: Optional[int] = None  # every request answers this status (index "down" with 503)
    json_api: bool = True  # answer PEP 691 JSON when asked
    basic_auth: Optional[Tuple[str, str]] = None  # (user, password) every request must carry


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    def _send(self, status: int, body: bytes, ctype: str, head: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _serve(self, head: bool) -> None:
        idx = self.server.index
        idx._count_request(self.path)
        cfg = idx.config
        if cfg.basic_auth is not None:
            token = base64.b64encode(":".join(cfg.basic_auth).encode()).decode()
            if self.headers.get("Authorization", "") != f"Basic {token}":
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="mlprobe-tests"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        if cfg.status_override:
            self._send(cfg.status_override, b"unavailable\n", "text/plain", head)
            return
        path = urllib.parse.unquote(self.path.split("?", 1)[0])
        parts = [p for p in path.split("/") if p]
        if idx.variant is not None:
            # PyTorch's layout: /whl/<variant>/<project>/ pages, the files beside them in /whl/<variant>/
            if parts[:2] != ["whl", idx.variant]:
                self._send(404, b"not found\n", "text/plain", head)
                return
            rest = parts[2:]
            if len(rest) == 1 and rest[0].endswith((".whl", ".whl.metadata")):
                parts = ["files", rest[0]]
            else:
                parts = ["simple"] + rest
        if parts[:1] == ["simple"] and len(parts) == 1:
            body = "".join(f'<a href="{n}/">{n}</a>\n' for n in sorted(idx.projects()))
            self._send(200, f"<!DOCTYPE html><html><body>{body}</body></html>".encode(), "text/html", head)
            return
        if parts[:1] == ["simple"] and len(parts) == 2:
            project = canonicalize_name(parts[1])
            files = idx.files_for(project)
            if files is None:
                self._send(404, b"not found\n", "text/plain", head)
                return
            accept = self.headers.get("Accept", "")
            if cfg.json_api and "application/vnd.pypi.simple.v1+json" in accept:
                self._send(200, idx.json_page(project, files).encode(),
                           "application/vnd.pypi.simple.v1+json", head)
            else:
                self._send(200, idx.html_page(project, files).encode(), "text/html", head)
            return
        if parts[:1] == ["files"] and len(parts) == 2:
            name = parts[1]
            is_meta = name.endswith(".metadata")
            wheel_name = name[: -len(".metadata")] if is_meta else name
            wheel = idx.folder / wheel_name
            if not wheel.is_file() or (wheel_name in cfg.missing_files and not is_meta):
                self._send(404, b"not found\n", "text/plain", head)
                return
            if is_meta:
                if not cfg.serve_metadata:
                    self._send(404, b"not found\n", "text/plain", head)
                    return
                self._send(200, idx.metadata(wheel), "text/plain", head)
                return
            data = wheel.read_bytes()
            if wheel_name in cfg.slow_files and not head and idx._fetch_count(wheel_name) >= cfg.slow_from_nth:
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                idx.slow_started.set()
                try:
                    for i in range(0, len(data), cfg.slow_chunk):
                        if idx.stopping.is_set():
                            return
                        self.wfile.write(data[i:i + cfg.slow_chunk])
                        self.wfile.flush()
                        time.sleep(cfg.slow_tick_s)
                except (BrokenPipeError, ConnectionResetError):
                    return
                return
            self._send(200, data, "application/octet-stream", head)
            return
        self._send(404, b"not found\n", "text/plain", head)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    index: "LocalIndex"


class LocalIndex:
    """Serves the wheels in `folder` as /simple/<project>/ and /files/<wheel>."""

    def __init__(self, folder: Path, config: Optional[IndexConfig] = None,
                 max_requests: int = 2000, lifetime_s: float = 300.0, variant: Optional[str] = None) -> None:
        self.folder = folder
        self.variant = variant  # serve PyTorch's layout (/whl/<variant>/…) instead of /simple/
        self._hashes: Dict[Path, str] = {}
        self._metadata: Dict[Path, bytes] = {}
        self.config = config or IndexConfig()
        self.max_requests = max_requests
        self.lifetime_s = lifetime_s
        self.requests: List[str] = []
        self.slow_started = threading.Event()
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._server: Optional[_Server] = None
        self._thread: Optional[threading.Thread] = None
        self._timer: Optional[threading.Timer] = None
        self._port = 0

    # --- content -----------------------------------------------------------------------------
    def _wheels(self) -> List[Path]:
        return sorted(self.folder.glob("*.whl"))

    def projects(self) -> Set[str]:
        return {str(canonicalize_name(parse_wheel_filename(p.name)[0])) for p in self._wheels()}

    def files_for(self, project: str) -> Optional[List[Path]]:
        found = [p for p in self._wheels() if canonicalize_name(parse_wheel_filename(p.name)[0]) == project]
        return found or None

    def _sha256(self, wheel: Path) -> str:
        if wheel not in self._hashes:  # a torch wheel is hundreds of MB: hash it once
            h = hashlib.sha256()
            with open(wheel, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            self._hashes[wheel] = h.hexdigest()
        return self._hashes[wheel]

    def metadata(self, wheel: Path) -> bytes:
        if wheel not in self._metadata:
            self._metadata[wheel] = wheel_metadata(wheel)
        return self._metadata[wheel]

    def _href(self, name: str) -> str:
        if self.variant is not None:
            return f"/whl/{self.variant}/{urllib.parse.quote(name)}"
        return f"../../files/{name}"

    def _requires_python(self, wheel: Path) -> Optional[str]:
        for line in self.metadata(wheel).decode("utf-8", "replace").splitlines():
            if line.startswith("Requires-Python:"):
                return line.split(":", 1)[1].strip()
        return None

    def html_page(self, project: str, files: List[Path]) -> str:
        rows = []
        for p in files:
            sha = self._sha256(p)
            attrs = ""
            rp = self._requires_python(p)
            if rp:
                attrs += f' data-requires-python="{html.escape(rp)}"'
            if self.config.serve_metadata:
                msha = hashlib.sha256(self.metadata(p)).hexdigest()
                attrs += f' data-dist-info-metadata="sha256={msha}" data-core-metadata="sha256={msha}"'
            rows.append(f'<a href="{self._href(p.name)}#sha256={sha}"{attrs}>{p.name}</a><br/>')
        return ("<!DOCTYPE html><html><head><meta name=\"pypi:repository-version\" content=\"1.0\">"
                f"<title>Links for {project}</title></head><body><h1>Links for {project}</h1>\n"
                + "\n".join(rows) + "\n</body></html>\n")

    def json_page(self, project: str, files: List[Path]) -> str:
        out = []
        for p in files:
            entry: Dict[str, object] = {
                "filename": p.name, "url": self._href(p.name),
                "hashes": {"sha256": self._sha256(p)},
                "size": p.stat().st_size,
            }
            rp = self._requires_python(p)
            if rp:
                entry["requires-python"] = rp
            if self.config.serve_metadata:
                entry["core-metadata"] = {"sha256": hashlib.sha256(self.metadata(p)).hexdigest()}
            out.append(entry)
        return json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": out})

    def _fetch_count(self, filename: str) -> int:
        with self._lock:
            return sum(1 for r in self.requests if r.split("?", 1)[0].endswith("/" + filename))

    # --- bounds ----------------------------------------------------------------------------
    def _count_request(self, path: str) -> None:
        with self._lock:
            self.requests.append(path)
            over = len(self.requests) >= self.max_requests
        if over:
            threading.Thread(target=self.stop, daemon=True).start()

    # --- life --------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        if self.variant is not None:
            return f"http://127.0.0.1:{self.port}/whl"  # the base; <base>/<variant> is the index
        return f"http://127.0.0.1:{self.port}/simple/"

    def start(self) -> "LocalIndex":
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.index = self
        self._port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        server = self._server
        self._server = None
        if self._timer is not None:
            self._timer.cancel()
        if server is not None:
            try:
                server.shutdown()
                server.server_close()
            except Exception:
                pass

    def __enter__(self) -> "LocalIndex":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def free_port_url() -> str:
    """An index URL on a loopback port that nothing listens on (an index that is down)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/simple/"


def sample_wheels(folder: Path) -> Dict[str, Path]:
    """The standard set the install tests use."""
    w: Dict[str, Path] = {}
    w["goodlib1"] = build_wheel(folder, "goodlib", "1.0")
    w["goodlib2"] = build_wheel(folder, "goodlib", "2.0")
    w["app"] = build_wheel(folder, "demo-app", "1.0", requires=["goodlib>=2"])
    # Metadata reads fine, the payload is damaged: fails only when pip extracts it.
    w["broken"] = build_wheel(folder, "brokenlib", "1.0", corrupt_payload=True)
    w["broken_app"] = build_wheel(folder, "broken-app", "1.0", requires=["goodlib>=2", "brokenlib"])
    w["incompat"] = build_wheel(folder, "incompat-lib", "1.0", tag="cp27-cp27mu-manylinux1_x86_64")
    w["conflict_a"] = build_wheel(folder, "conflict-a", "1.0", requires=["goodlib==1.0"])
    w["conflict_b"] = build_wheel(folder, "conflict-b", "1.0", requires=["goodlib==2.0"])
    w["gone"] = build_wheel(folder, "gone-lib", "1.0")
    w["gone_app"] = build_wheel(folder, "gone-app", "1.0", requires=["goodlib>=2", "gone-lib"])
    w["big"] = build_wheel(folder, "big-lib", "1.0", padding_bytes=3 * 1024 * 1024)
    w["big_app"] = build_wheel(folder, "big-app", "1.0", requires=["goodlib>=2", "big-lib"])
    w["bad_import"] = build_wheel(folder, "bad-import", "1.0",
                                  modules={"bad_import/__init__.py": "raise ImportError('planted')\n"})
    return w


# ---------------------------------------------------------------- venv helpers for the tests --

def make_venv(path: Path, with_pip: bool = False) -> Path:
    """A real venv (without pip by default: this interpreter's pip drives it with --python)."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "venv"] + ([] if with_pip else ["--without-pip"]) + [str(path)]
    subprocess.run(argv, check=True, capture_output=True, timeout=300)
    return path / "bin" / "python"


def pip_env() -> Dict[str, str]:
    """pip's environment for the tests: only the index a test names (this machine's pip.conf adds
    find-links and extra indexes, which a test must not see)."""
    import os

    env = dict(os.environ)
    env.update({"PIP_FIND_LINKS": " ", "PIP_EXTRA_INDEX_URL": " ", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PIP_NO_CACHE_DIR": "1"})
    return env


def pip_for(python: Path) -> List[str]:
    import sys

    return [sys.executable, "-m", "pip", "--python", str(python)]


def pip_install(python: Path, index_url: str, *packages: str) -> None:
    import subprocess

    subprocess.run([*pip_for(python), "install", "--index-url", index_url, *packages], check=True,
                   capture_output=True, timeout=300, env=pip_env())


def pip_freeze(python: Path) -> str:
    import subprocess

    cp = subprocess.run([*pip_for(python), "freeze", "--all"], check=True, capture_output=True, text=True,
                        timeout=120, env=pip_env())
    return cp.stdout


def tree_state(root: Path, skip_pycache: bool = True) -> Dict[str, str]:
    """Every file under root with a digest of its bytes (and every folder)."""
    out: Dict[str, str] = {}
    if not root.exists():
        return out
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if skip_pycache and ("__pycache__" in p.parts or p.suffix == ".pyc"):
            continue
        if p.is_symlink():
            import os

            out[rel] = "link:" + os.readlink(p)
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out
