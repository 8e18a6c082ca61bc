"""pip and uv: their command lines, and where packages come from.

Where packages come from (Sources), in one place:
- default: the recipe's index (e.g. PyTorch's CPU index) REPLACES the index-url, extra-index-url
  and find-links of pip's configuration, so a configured extra index cannot slip a different build
  of the same package (a CUDA torch next to the CPU one) into the resolution. pip's other settings
  (cert, proxy, timeout, constraints) still apply.
- --index-url URL: your index replaces the recipe's, with the same isolation.
- --find-links DIR: adds a folder (or page) of wheels; --no-index: use only those folders.
- --use-pip-config: mlprobe passes no source at all; pip's own configuration (pip.conf, PIP_* variables)
  decides, find-links and extra indexes included. Always the pip backend: uv does not read pip.conf.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..model.jsontypes import JsonObject
from ..urls import mask_credentials, mask_doc

# The pip options that choose sources; neutralised when mlprobe chooses the sources itself. pip
# skips EMPTY configuration values, so a single space is what clears a list option (" ".split() == []).
_PIP_SOURCE_VARS = {"PIP_EXTRA_INDEX_URL": " ", "PIP_FIND_LINKS": " ", "PIP_NO_INDEX": "false"}
# pip options that add packages to every install (`-r`, `-e`), cleared the same way whatever the
# sources: the recipe decides what is installed. Those that move where packages land (`--target`,
# `--prefix`, `--root`, `--user`) would put them outside the environment the transaction watches.
_PIP_PACKAGE_VARS = {"PIP_REQUIREMENT": " ", "PIP_REQUIREMENTS": " ", "PIP_EDITABLE": " "}
_PIP_PLACE_VARS = ("PIP_TARGET", "PIP_PREFIX", "PIP_ROOT", "PIP_USER")
# uv's variables that add a source (an index, a folder of wheels, PyTorch's index through
# --torch-backend) or a package or version (overrides, constraints, build constraints, exclusions),
# or name a configuration file; uv also runs with --no-config (no uv.toml, no [tool.uv] of a
# pyproject.toml in the working folder or above, no ~/.config/uv, no /etc/uv).
_UV_SOURCE_VARS = ("UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS", "UV_NO_INDEX", "UV_INDEX",
                   "UV_DEFAULT_INDEX", "UV_TORCH_BACKEND", "UV_INDEX_STRATEGY", "UV_OVERRIDE", "UV_CONSTRAINT",
                   "UV_BUILD_CONSTRAINT", "UV_EXCLUDE", "UV_CONFIG_FILE", "UV_WORKING_DIR", "UV_PROJECT")
_UV_SOURCE_PREFIXES = ("UV_INDEX_",)
# Options a pip constraints file may carry besides constraints, which pip obeys as if given on the
# command line: sources above all. A constraints file is passed on without them.
_CONSTRAINT_NESTED = ("-c", "--constraint", "-r", "--requirement")
PIP_MIN_FOR_PYTHON_OPTION = (22, 3)  # `pip --python` (run this pip against another interpreter)


@dataclass(frozen=True)
class Sources:
    index_url: Optional[str] = None
    extra_index_urls: Tuple[str, ...] = ()
    find_links: Tuple[str, ...] = ()
    no_index: bool = False
    use_pip_config: bool = False
    origin: str = "recipe"  # recipe | --index-url | --find-links | pip configuration | default index

    @property
    def checkable_indexes(self) -> List[str]:
        """Indexes mlprobe can check itself before pip runs."""
        if self.use_pip_config or self.no_index:
            return []
        return [u for u in (self.index_url, *self.extra_index_urls) if u]

    def describe(self) -> str:
        """Where packages come from, in words; credentials in URLs masked (user:****@)."""
        return mask_credentials(self._describe())

    def _describe(self) -> str:
        if self.use_pip_config:
            extra = f" plus {', '.join(self.find_links)}" if self.find_links else ""
            return "pip's own configuration (pip.conf, PIP_* variables)" + extra
        parts = []
        if self.no_index:
            parts.append("no index")
        elif self.index_url and self.origin == "default index":
            parts.append(f"the Python Package Index {self.index_url} (pip's default index; the recipe's own)")
        elif self.index_url:
            parts.append(f"index {self.index_url} ({self.origin})")
        else:
            parts.append("the default index")
        parts += [f"extra index {u}" for u in self.extra_index_urls]
        parts += [f"wheels in {d}" for d in self.find_links]
        return "; ".join(parts)

    def to_dict(self) -> JsonObject:
        """`install --json`'s sources, credentials in URLs masked (user:****@)."""
        doc: JsonObject = {"index_url": self.index_url, "extra_index_urls": list(self.extra_index_urls),
                           "find_links": list(self.find_links), "no_index": self.no_index,
                           "use_pip_config": self.use_pip_config, "origin": self.origin}
        d = mask_doc(doc)
        d["description"] = self.describe()
        return d


def default_index_url() -> Optional[str]:
    """pip's built-in default index (the Python Package Index), as pip itself spells it; None when
    this pip does not say. mlprobe names it so that an index-url in pip's configuration cannot
    silently replace it."""
    try:
        from pip._internal.models.index import PyPI

        url = str(PyPI.simple_url)
    except Exception:  # pip's internals moved, or no pip: leave pip's own choice in place
        return None
    return url.rstrip("/") or None


def source_args(s: Sources) -> List[str]:
    """pip/uv options for these sources (the same spelling works for both)."""
    args: List[str] = []
    if s.no_index:
        args.append("--no-index")
    elif s.index_url and not s.use_pip_config:
        args += ["--index-url", s.index_url]
    for u in s.extra_index_urls:
        args += ["--extra-index-url", u]
    for d in s.find_links:
        args += ["--find-links", d]
    return args


def pip_env(s: Sources) -> Dict[str, str]:
    env = dict(os.environ)
    if not s.use_pip_config:
        env.update(_PIP_SOURCE_VARS)
        if s.no_index:
            env.pop("PIP_NO_INDEX", None)
        sanitised = _sanitised_constraints()
        if sanitised is not None:
            env["PIP_CONSTRAINT"] = sanitised[0]
    env.update(_PIP_PACKAGE_VARS)
    for k in _PIP_PLACE_VARS:
        env.pop(k, None)
    env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    env["PYTHONIOENCODING"] = "utf-8"
    _caches_without_home(env)
    return env


# ---------------------------------------------------------------- pip's constraints files ----

_CONSTRAINT_MAX_BYTES = 1 << 20


def _constraint_files() -> Tuple[str, List[str]]:
    """(where they are named, the constraints files pip would read): PIP_CONSTRAINT, else the
    `constraint` of pip's configuration files."""
    value = os.environ.get("PIP_CONSTRAINT")
    if value is not None:
        return "PIP_CONSTRAINT", value.split()
    try:
        from pip._internal.configuration import Configuration

        conf = Configuration(isolated=False)
        conf.load()
        found = []
        for k, v in conf.items():
            # pip before 23.x yields (key, value); later ones (file, {key: value}) per file
            for key, val in (v.items() if isinstance(v, dict) else [(k, v)]):
                if key in ("global.constraint", "install.constraint") and isinstance(val, str):
                    found.append(val)
    except Exception:  # pip's internals moved, or no pip here: pip's own files stay as they are
        return "", []
    return "pip's configuration (constraint)", " ".join(found).split()


def _read_constraints(path: str, depth: int, kept: List[str], dropped: List[str]) -> None:
    """Append the constraint lines of `path` (and of the files it includes) to kept; every other
    option line to dropped. A constraints file at a URL is dropped whole: pip would fetch it and obey
    the option lines in it, which mlprobe cannot see beforehand."""
    if path.lower().startswith("file:"):
        from urllib.parse import unquote, urlsplit

        path = unquote(urlsplit(path).path)
    elif "://" in path:
        dropped.append(f"-c {mask_credentials(path)} (a constraints file at a URL: download it and name the file, "
                       "so mlprobe can read it before pip does)")
        return
    try:
        with open(path, "rb") as f:
            text = f.read(_CONSTRAINT_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        kept.append(f"-c {path}")  # pip itself says what is wrong with it
        return
    joined = text.replace("\\\r\n", " ").replace("\\\n", " ")
    for raw in joined.splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        if line.startswith("-"):
            opt, _, arg = line.replace("=", " ", 1).partition(" ")
            if opt in _CONSTRAINT_NESTED and arg.strip() and depth < 8:
                nested = arg.strip()
                if not os.path.isabs(nested) and "://" not in nested:
                    nested = os.path.join(os.path.dirname(path), nested)
                _read_constraints(nested, depth + 1, kept, dropped)
            else:
                dropped.append(f"{mask_credentials(line)} (in {path})")
            continue
        words = line.split()
        req = [w for w in words if not w.startswith("-")]
        hashes = [w for w in words if w.startswith("--hash")]
        other = [w for w in words if w.startswith("-") and not w.startswith("--hash")]
        if other:
            dropped.append(f"{mask_credentials(' '.join(other))} (in {path})")
        kept.append(" ".join(req + hashes))


_SANITISED: Dict[Tuple[str, ...], Optional[Tuple[str, List[str]]]] = {}


def _sanitised_constraints() -> Optional[Tuple[str, List[str]]]:
    """(a constraints file without the option lines, what was dropped), or None when the
    constraints files pip reads carry nothing but constraints."""
    where, files = _constraint_files()
    key = (where, *files)
    if key in _SANITISED:
        return _SANITISED[key]
    kept: List[str] = []
    dropped: List[str] = []
    for f in files:
        _read_constraints(f, 0, kept, dropped)
    result: Optional[Tuple[str, List[str]]] = None
    if dropped:
        import atexit
        import tempfile

        folder = tempfile.mkdtemp(prefix="mlprobe-constraints-")
        atexit.register(shutil.rmtree, folder, True)
        out = os.path.join(folder, "constraints.txt")
        with open(out, "w", encoding="utf-8") as fh:
            fh.write("# the constraints of " + " ".join(files) + ", without their option lines\n")
            fh.write("\n".join(kept) + "\n")
        result = (out, [f"{where}: {d}" for d in dropped])
    _SANITISED[key] = result
    return result


def set_aside(sources: Sources, backend: str) -> List[str]:
    """What of pip's and uv's configuration this install does not let in, in words (empty when
    nothing of the kind is set)."""
    out: List[str] = []
    if not sources.use_pip_config and backend != "uv":  # uv reads neither pip's variables nor its files
        names = [k for k in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX")
                 if os.environ.get(k, "").strip() and k != "PIP_INDEX_URL"]
        if names:
            out.append("pip's sources from " + ", ".join(names))
        sanitised = _sanitised_constraints()
        if sanitised is not None:
            out.append("option lines of pip's constraints files: " + "; ".join(sanitised[1][:6]))
    names = [k for k in (*_PIP_PACKAGE_VARS, *_PIP_PLACE_VARS) if os.environ.get(k, "").strip()]
    if names:
        out.append("packages or install places from " + ", ".join(names))
    if backend == "uv":
        names = sorted(k for k in os.environ if k in _UV_SOURCE_VARS or k.startswith(_UV_SOURCE_PREFIXES))
        if names:
            out.append("uv's " + ", ".join(names))
        files = _uv_config_files()
        if files:
            out.append("uv's configuration files (uv runs with --no-config): " + ", ".join(files))
    return out


def _uv_config_files() -> List[str]:
    """The uv configuration files uv would read here (so that the note names them)."""
    found: List[str] = []
    folder = os.path.abspath(os.getcwd())
    while True:
        for name in ("uv.toml", "pyproject.toml"):
            p = os.path.join(folder, name)
            try:
                if name == "uv.toml" and os.path.isfile(p):
                    found.append(p)
                elif os.path.isfile(p):
                    with open(p, "rb") as f:
                        if b"[tool.uv" in f.read(_CONSTRAINT_MAX_BYTES):
                            found.append(p)
            except OSError:
                continue
        parent = os.path.dirname(folder)
        if parent == folder or found:
            break
        folder = parent
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    for p in (os.path.join(xdg, "uv", "uv.toml"), "/etc/uv/uv.toml", os.environ.get("UV_CONFIG_FILE") or ""):
        if p and os.path.isfile(p):
            found.append(p)
    return found


def _caches_without_home(env: Dict[str, str]) -> None:
    """With no home folder (HOME=/nonexistent), pip's and uv's caches go beside mlprobe's own files
    instead of making the missing home folder."""
    from .guard import cache_base, has_home

    if os.name == "nt" or has_home() or env.get("XDG_CACHE_HOME"):
        return
    base = cache_base()
    env.setdefault("PIP_CACHE_DIR", str(base / "pip"))
    env.setdefault("UV_CACHE_DIR", str(base / "uv"))


def uv_env(s: Sources) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in _UV_SOURCE_VARS and not k.startswith(_UV_SOURCE_PREFIXES)}
    env["UV_NO_CONFIG"] = "1"
    _caches_without_home(env)
    return env


def _pip_version_tuple() -> Tuple[int, ...]:
    try:
        import pip

        return tuple(int(x) for x in pip.__version__.split(".")[:2] if x.isdigit())
    except Exception:
        return (0,)


def pip_command(target_python: str, target_has_pip: bool) -> List[str]:
    """How to run pip for target_python: its own pip, or this interpreter's pip with --python."""
    if target_has_pip:
        return [target_python, "-m", "pip"]
    # Not realpath: a venv's python is a symlink to the base interpreter, yet another environment.
    same = os.path.normcase(os.path.abspath(target_python)) == \
        os.path.normcase(os.path.abspath(sys.executable))
    if same and _pip_version_tuple() >= (1,):
        return [sys.executable, "-m", "pip"]
    if _pip_version_tuple() >= PIP_MIN_FOR_PYTHON_OPTION:
        return [sys.executable, "-m", "pip", "--python", target_python]
    from ..errors import StageError

    raise StageError(
        f"no pip for {target_python}",
        why="that interpreter has no pip, and the one running mlprobe has none new enough to drive it "
            f"(pip >= {'.'.join(map(str, PIP_MIN_FOR_PYTHON_OPTION))} has --python)",
        next_step=f"`{target_python} -m ensurepip`, or install uv",
        ref="E550", kind="unavailable",
    )


COMMON_PIP = ["--disable-pip-version-check", "--no-input"]


@dataclass(frozen=True)
class Backend:
    name: str  # "pip" or "uv"
    python: str  # the interpreter that receives the packages
    pip: Tuple[str, ...] = ()  # how to run pip (also used by uv mode for queries)
    uv: Optional[str] = None

    def install_argv(self, packages: List[str], sources: Sources,
                     extra: Optional[List[str]] = None) -> List[str]:
        if self.name == "uv":
            assert self.uv is not None
            return [self.uv, "pip", "install", "--no-config", "--python", self.python, *source_args(sources),
                    *(extra or []), *packages]
        return [*self.pip, "install", *COMMON_PIP, "--progress-bar", "off", *source_args(sources),
                *(extra or []), *packages]

    def install_resolved_argv(self, resolved_file: str, sources: Sources, hashes: bool) -> List[str]:
        """Install exactly a resolution: uv from its pylock.toml (`-r pylock.toml`: no resolution,
        each file checked against its sha256), pip from a requirements file of `name==version
        --hash=…` lines with --no-deps (no resolution; --require-hashes when every line has one)."""
        if self.name == "uv":
            assert self.uv is not None
            return [self.uv, "pip", "install", "--no-config", "--python", self.python, *source_args(sources),
                    "-r", resolved_file]
        return [*self.pip, "install", *COMMON_PIP, "--progress-bar", "off", *source_args(sources), "--no-deps",
                *(["--require-hashes"] if hashes else []), "-r", resolved_file]

    def env(self, sources: Sources) -> Dict[str, str]:
        return uv_env(sources) if self.name == "uv" else pip_env(sources)

    def display(self, packages: List[str], sources: Sources, resolved_file: Optional[str] = None) -> str:
        """The command a person would type (python -m pip … / uv pip install …); with resolved_file,
        the install of exactly that resolution."""
        import shlex

        if resolved_file is not None:
            argv = self.install_resolved_argv(resolved_file, sources, hashes=True)
            argv = ["uv", *argv[1:]] if self.name == "uv" else [self.python, "-m", "pip", "install",
                                                                   *argv[len(self.pip) + 1:]]
            argv = [a for a in argv if a not in COMMON_PIP and a not in ("--progress-bar", "off")]
            return " ".join(shlex.quote(mask_credentials(a)) for a in argv)
        if self.name == "uv":
            argv = ["uv", "pip", "install", "--no-config", "--python", self.python, *source_args(sources),
                    *packages]
        else:
            argv = [self.python, "-m", "pip", "install", *source_args(sources), *packages]
        return " ".join(shlex.quote(mask_credentials(a)) for a in argv)


def needs_pip(sources: Sources, variant_label: Optional[str]) -> bool:
    """pip's configuration chooses the sources (uv does not read pip.conf): explicitly, or for a
    build-variant recipe whose index URL is unknown (the variant pin was found through pip)."""
    return sources.origin == "pip configuration" or (sources.use_pip_config and bool(variant_label))


def choose_backend(prefer: str, sources: Sources, python: str, has_pip: bool,
                   pip_only: bool = False) -> Backend:
    """uv when it is on PATH (and not told otherwise), pip otherwise; pip when pip_only."""
    uv = shutil.which("uv")
    use_uv = prefer == "uv" or (prefer == "auto" and uv is not None)
    if pip_only:
        use_uv = False
    if prefer == "uv" and uv is None:
        from ..errors import StageError

        raise StageError("uv is not on PATH", why="--installer uv was asked for",
                         next_step="install uv, or use --installer pip", ref="E541", kind="usage")
    try:
        pip: Tuple[str, ...] = tuple(pip_command(python, has_pip))
    except Exception:
        if not use_uv:
            raise
        pip = ()  # uv installs; the dry run then needs uv too
    return Backend(name="uv" if use_uv else "pip", python=python, pip=pip, uv=uv if use_uv else None)
