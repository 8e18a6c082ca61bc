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
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Tuple

# The pip options that choose sources; neutralised when mlprobe chooses the sources itself. pip
# skips EMPTY configuration values, so a single space is what clears a list option (" ".split() == []).
_PIP_SOURCE_VARS = {"PIP_EXTRA_INDEX_URL": " ", "PIP_FIND_LINKS": " ", "PIP_NO_INDEX": "false"}
_UV_SOURCE_VARS = ("UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS", "UV_NO_INDEX", "UV_INDEX",
                   "UV_DEFAULT_INDEX")
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

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
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
    env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def uv_env(s: Sources) -> Dict[str, str]:
    env = dict(os.environ)
    for k in _UV_SOURCE_VARS:
        env.pop(k, None)
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
        ref="E506", kind="unavailable",
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
            return [self.uv, "pip", "install", "--python", self.python, *source_args(sources),
                    *(extra or []), *packages]
        return [*self.pip, "install", *COMMON_PIP, "--progress-bar", "off", *source_args(sources),
                *(extra or []), *packages]

    def env(self, sources: Sources) -> Dict[str, str]:
        return uv_env(sources) if self.name == "uv" else pip_env(sources)

    def display(self, packages: List[str], sources: Sources) -> str:
        """The command a person would type (python -m pip … / uv pip install …)."""
        import shlex

        if self.name == "uv":
            argv = ["uv", "pip", "install", "--python", self.python, *source_args(sources), *packages]
        else:
            argv = [self.python, "-m", "pip", "install", *source_args(sources), *packages]
        return " ".join(shlex.quote(a) for a in argv)


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
                         next_step="install uv, or use --installer pip", ref="E506", kind="usage")
    try:
        pip: Tuple[str, ...] = tuple(pip_command(python, has_pip))
    except Exception:
        if not use_uv:
            raise
        pip = ()  # uv installs; the dry run then needs uv too
    return Backend(name="uv" if use_uv else "pip", python=python, pip=pip, uv=uv if use_uv else None)
