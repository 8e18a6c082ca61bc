"""A bundle for a machine without internet: the wheels of a recipe for *that* machine's Python and
platform (read from its report, not this machine's), a PEP 751 lock of them, and a README.

pip does the work, through the same sources as `mlprobe install` (the recipe's index, or pip's own
configuration): `pip install --dry-run --report` with --only-binary=:all:, --python-version,
--implementation, --abi and every --platform of the target resolves the set; `pip download
--no-deps` fetches exactly those files. Everything is written into a folder beside DIR and renamed
to DIR at the end, so an interruption or a failure leaves nothing half-written.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ..errors import ParseError, StageError
from ..model.facts import Facts
from ..model.jsontypes import JsonObject
from . import lock as locks
from .backends import COMMON_PIP, Sources, pip_env, source_args
from .index import target_from_report
from .proc import StepTimeout, Transcript, run_logged
from .steps import InstallPlan

TIMEOUT_S = 3600.0
_SYSTEMS = {"linux": "linux", "darwin": "darwin", "windows": "win32"}


@dataclass(frozen=True)
class BundleTarget:
    """The machine a bundle is for, as pip's target options and PEP 508 marker values."""
    python_version: str  # "3.12.3"
    implementation: str  # pip's --implementation: "cp"
    platforms: Tuple[str, ...]  # best first
    tags: Tuple[str, ...]  # interpreter-abi-platform, best first
    environment: Mapping[str, str]
    description: str

    @property
    def major_minor(self) -> str:
        return ".".join(self.python_version.split(".")[:2])

    @property
    def platform(self) -> str:
        """The platform to name it by: the best portable one (manylinux_2_39_x86_64, not linux_x86_64)."""
        return next((p for p in self.platforms if not p.startswith("linux_")), self.platforms[0])

    def pip_args(self) -> List[str]:
        nodot = self.major_minor.replace(".", "")
        args = ["--only-binary", ":all:", "--python-version", self.major_minor,
                "--implementation", self.implementation,
                "--abi", f"{self.implementation}{nodot}", "--abi", "abi3", "--abi", "none"]
        for p in self.platforms:
            args += ["--platform", p]
        return args

    def key(self) -> str:
        """A folder name for this target: cp312-manylinux_2_39_x86_64."""
        return f"{self.implementation}{self.major_minor.replace('.', '')}-{self.platform}"


def bundle_target(facts: Facts, where: str = "the report") -> BundleTarget:
    """The target of a scanned machine. E535 when its scan has no Python tags, E548 when it is for
    another Python than CPython."""
    py = facts.python
    tags = list(py.platform_tags)
    target = target_from_report(facts) if tags else None
    if target is None:
        raise StageError(f"{where} has no Python tags", why="without the Python version and the wheel tags "
                         "of that machine's interpreter mlprobe cannot tell which wheels fit it",
                         next_step="make a report there with this mlprobe: `mlprobe capture DIR` or "
                                   "`mlprobe report --include-raw -o report.json`",
                         ref="E535", kind="usage")
    impl = (py.implementation or "CPython").lower()
    if impl not in ("cpython", "cp"):
        raise StageError(f"{where} is for {py.implementation}", why="bundles are made for CPython",
                         next_step="use a CPython interpreter on that machine", ref="E548", kind="unavailable")
    system = (facts.os.system or "").lower()
    machine = str(py.machine or facts.cpu.arch or "")
    version = str(py.version)
    env = {"python_version": target.major_minor, "python_full_version": version,
           "implementation_name": "cpython", "platform_python_implementation": "CPython",
           "sys_platform": _SYSTEMS.get(system, system), "platform_system": system.capitalize() if system
           != "darwin" else "Darwin", "platform_machine": machine, "os_name": "nt" if system == "windows" else "posix"}
    # the machine's own tags first (what its interpreter said), then what its glibc allows
    all_tags = list(dict.fromkeys([*tags, *target.tags]))
    plat = next((p for p in target.platforms if not p.startswith("linux_")), target.platforms[0])
    return BundleTarget(python_version=version, implementation="cp", platforms=target.platforms,
                        tags=tuple(all_tags), environment=env, description=f"CPython {version} on {plat}")


@dataclass
class BundleResult:
    folder: Path
    lock: Path
    target: BundleTarget
    files: List[locks.LockEntry] = field(default_factory=list)
    provided: List[str] = field(default_factory=list)  # name==version the machine already has
    seconds: float = 0.0

    @property
    def total_bytes(self) -> int:
        return sum(e.size or 0 for e in self.files)

    def to_dict(self) -> JsonObject:
        return {"folder": str(self.folder), "lock": str(self.lock), "target": self.target.description,
                "python_version": self.target.python_version, "platforms": list(self.target.platforms[:6]),
                "files": [{"name": e.name, "version": e.version, "file": e.filename, "sha256": e.sha256,
                           "size": e.size} for e in self.files],
                "provided_by_target": list(self.provided), "bytes": self.total_bytes, "seconds": round(self.seconds, 1)}


# ---------------------------------------------------------------- pure helpers ----------------

_NO_MATCH = re.compile(r"(?:No matching distribution found for|Could not find a version that satisfies the "
                       r"requirement)\s+([A-Za-z0-9][A-Za-z0-9._\-\[\],]*(?:[<>=!~]=?[^\s)]*)?)")


def missing_wheel(output: str) -> Optional[str]:
    """The requirement pip found no file for (pure), or None."""
    m = _NO_MATCH.search(output)
    return m.group(1).rstrip(".,") if m else None


def check_fits(filename: str, tags: Sequence[str]) -> bool:
    try:
        _n, _v, _b, ftags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, ValueError):
        return False
    wanted = set(tags)
    return any(str(t) in wanted for t in ftags)


def check_empty_target(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise StageError(f"{out} is not empty", why="a bundle is written into a new or empty folder, so that "
                         "nothing else is mistaken for one of its files",
                         next_step="pass -o with a new folder name, or empty that folder", ref="E536", kind="usage")


def partial_folder(out: Path) -> Path:
    return out.parent / f".{out.name}.mlprobe-partial-{os.getpid()}"


def readme(result: BundleResult, plan: InstallPlan, made_from: str) -> str:
    t = result.target
    rows = "\n".join(f"| {e.filename} | {e.size or 0:,} | `{e.sha256[:16]}…` |" for e in result.files)
    provided = ""
    if result.provided:
        provided = ("\nLeft out because the machine already has them (its report lists them; the venv must see "
                    "them, e.g. `python3 -m venv --system-site-packages`):\n"
                    + "\n".join(f"- {p}" for p in result.provided) + "\n")
    return f"""# mlprobe bundle: {plan.recipe}

{plan.title}, for {t.description} (the machine of {made_from}), made by `mlprobe bundle`.
`pylock.toml` (PEP 751) lists every file below with its sha256.

On that machine, with no network:

```sh
mlprobe install --from-lock pylock.toml --find-links . --no-index --apply --venv VENV
```

(run it in this folder, or give both paths in full). It checks every file against its sha256,
installs nothing else, sets the recipe's variables and files, keeps the build pinned, and verifies.

| file | bytes | sha256 |
| --- | ---: | --- |
{rows}
{provided}"""


# ---------------------------------------------------------------- making one ------------------

def _tool(plan: InstallPlan, target: BundleTarget, provided: Sequence[str], made_from: str) -> locks.ToolTable:
    from .keep import tool_table

    return tool_table(plan, dict(target.environment), {
        "bundle-for": target.description, "made-from": made_from, "target-tags": list(target.tags[:12]),
        **({"provided-by-target": list(provided)} if provided else {})})


def make_bundle(plan: InstallPlan, target: BundleTarget, out: Path, pip_cmd: Sequence[str], *,
                made_from: str, provided: Optional[Mapping[str, str]] = None, log: Optional[Path] = None,
                on_line: Optional[Callable[[str], None]] = None, timeout: float = TIMEOUT_S) -> BundleResult:
    """Resolve, download and lock `plan`'s packages for `target` into the new folder `out`."""
    import time

    started = time.perf_counter()
    from ..model.folders import real_folder

    out = real_folder(out)  # a symlink to an (empty) folder: written where it leads, the link stays
    check_empty_target(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = partial_folder(out)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    transcript = Transcript(log)
    say = on_line or (lambda _s: None)
    cfile: Optional[str] = None
    try:
        if provided:
            fd, cfile = tempfile.mkstemp(prefix="mlprobe-provided-", suffix=".txt")
            with open(fd, "w", encoding="utf-8") as fh:
                fh.write("".join(f"{n}=={v}\n" for n, v in sorted(provided.items())))
        entries = _resolve(plan, target, pip_cmd, cfile, transcript, say, timeout)
        have = {str(canonicalize_name(n)): v for n, v in (provided or {}).items()}
        kept = [e for e in entries if have.get(str(canonicalize_name(e.name))) != e.version]
        left_out = sorted(f"{e.name}=={e.version}" for e in entries if e not in kept)
        files = _download(plan, target, pip_cmd, kept, tmp, transcript, say, timeout)
        lock = locks.build_lock(files, requires_python=f"=={target.major_minor}.*",
                                environments=[_marker(target)], tool=_tool(plan, target, left_out, made_from))
        locks.select(lock, target.environment, target.tags)  # the lock installs on its machine
        locks.write_lock(tmp / locks.LOCK_NAME, lock)
        result = BundleResult(folder=out, lock=out / locks.LOCK_NAME, target=target, files=files,
                              provided=left_out)
        (tmp / "README.md").write_text(readme(result, plan, made_from), encoding="utf-8")
        if out.exists():
            out.rmdir()  # empty (checked above)
        os.rename(tmp, out)
        result.seconds = time.perf_counter() - started
        transcript.note(f"bundle written: {out}")
        return result
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        transcript.close()
        if cfile:
            os.unlink(cfile)


def _marker(target: BundleTarget) -> str:
    e = target.environment
    return (f'sys_platform == "{e["sys_platform"]}" and platform_machine == "{e["platform_machine"]}" and '
            f'implementation_name == "cpython" and python_version == "{target.major_minor}"')


def _run(argv: List[str], transcript: Transcript, say: Callable[[str], None], timeout: float,
         sources: Sources) -> Tuple[int, str]:
    try:
        r = run_logged(argv, timeout=timeout, transcript=transcript, env=pip_env(sources), on_line=say)
    except StepTimeout as exc:
        raise StageError(f"pip did not finish within {exc.seconds:g} s", why=" ".join(argv[:5]) + " …",
                         next_step="check the network, or run again", ref="E515", kind="failure") from None
    return r.rc, r.output


def _resolve(plan: InstallPlan, target: BundleTarget, pip_cmd: Sequence[str], cfile: Optional[str],
             transcript: Transcript, say: Callable[[str], None], timeout: float) -> List[locks.LockEntry]:
    unused = os.path.join(tempfile.gettempdir(), "mlprobe-bundle-target-never-written")
    fd, report = tempfile.mkstemp(prefix="mlprobe-bundle-report-", suffix=".json")
    os.close(fd)
    try:
        return _resolve_into(plan, target, pip_cmd, cfile, transcript, say, timeout, unused, report)
    finally:
        os.unlink(report)


def _resolve_into(plan: InstallPlan, target: BundleTarget, pip_cmd: Sequence[str], cfile: Optional[str],
                  transcript: Transcript, say: Callable[[str], None], timeout: float, unused: str,
                  report: str) -> List[locks.LockEntry]:
    argv = [*pip_cmd, "install", "--dry-run", "--report", report, "--quiet", "--ignore-installed",
            "--target", unused, *target.pip_args(), *COMMON_PIP, *source_args(plan.sources),
            *(["-c", cfile] if cfile else []), *plan.packages]
    say(f"resolving {' '.join(plan.packages)} for {target.description}")
    def quiet_say(line: str) -> None:
        if line.startswith(("ERROR", "WARNING: Retry")):
            say(line)

    rc, output = _run(argv, transcript, quiet_say, timeout, plan.sources)
    if rc != 0:
        req = missing_wheel(output)
        if req:
            shown = ", ".join(target.tags[:3]) + f", … ({len(target.tags)} tags)"
            raise StageError(f"no wheel of {req} for {target.description}",
                             why=f"the sources ({plan.sources.describe()}) have no file of it with the tags of "
                                 f"that machine: {shown}; a source archive would have to be built there",
                             next_step="pick another recipe (--recipe ID) or another source (--index-url, "
                                       "--find-links); `mlprobe plan --replay REPORT` shows what fits that machine",
                             ref="E537", kind="unavailable")
        from .resolve import classify_failure

        raise classify_failure(output, "pip", "resolving").to_error("unavailable")
    try:
        return locks.entries_from_pip_report(Path(report).read_text(encoding="utf-8"))
    except (ParseError, OSError) as exc:
        raise StageError("pip's dry run gave no readable report", why=str(exc),
                         next_step="pip >= 22.2 is needed for --report; upgrade pip", ref="E539",
                         kind="failure") from None


def _download(plan: InstallPlan, target: BundleTarget, pip_cmd: Sequence[str], entries: List[locks.LockEntry],
              dest: Path, transcript: Transcript, say: Callable[[str], None],
              timeout: float) -> List[locks.LockEntry]:
    if not entries:
        return []
    argv = [*pip_cmd, "download", "--no-deps", "--progress-bar", "off", "-d", str(dest), *target.pip_args(),
            *COMMON_PIP, *source_args(plan.sources), *[f"{e.name}=={e.version}" for e in entries]]
    say(f"downloading {len(entries)} file(s)")

    def shown(line: str) -> None:
        text = line.strip()
        if text.startswith(("Downloading", "Saved", "File was already downloaded", "ERROR")):
            say(text)

    rc, output = _run(argv, transcript, shown, timeout, plan.sources)
    if rc != 0:
        from .resolve import classify_failure

        raise classify_failure(output, "pip", "downloading").to_error("failure")
    by_name = {(str(canonicalize_name(e.name)), e.version): e for e in entries}
    out: List[locks.LockEntry] = []
    for f in sorted(dest.iterdir()):
        if f.name.startswith(".") or not f.is_file():
            continue
        if not check_fits(f.name, target.tags):
            raise StageError(f"{f.name} does not fit {target.description}", why="pip downloaded a file whose tags "
                             "are not that machine's", next_step="report this with the transcript",
                             ref="E549", kind="failure")
        name, version, _b, _t = parse_wheel_filename(f.name)
        src = by_name.get((str(name), str(version)))
        digest = locks.sha256_of(f)
        if src is not None and src.sha256 and src.sha256 != digest and src.filename == f.name:
            raise StageError(f"{f.name} does not match the sha256 its index gave", why=f"{digest} != {src.sha256}",
                             next_step="run again; if it persists the index serves another file than it lists",
                             ref="E505", kind="failure")
        out.append(locks.LockEntry(name=str(name), version=str(version), filename=f.name, sha256=digest,
                                   path=f"./{f.name}", size=f.stat().st_size,
                                   index=plan.sources.index_url if not plan.sources.use_pip_config else None,
                                   requested=bool(src and src.requested)))
    got = {(str(canonicalize_name(e.name)), e.version) for e in out}
    missing = [f"{e.name}=={e.version}" for e in entries if (str(canonicalize_name(e.name)), e.version) not in got]
    if missing:
        raise StageError("pip did not download every file", why=", ".join(missing[:6]),
                         next_step="read the transcript log; run again", ref="E506", kind="failure")
    return out


def group_key(plan: InstallPlan, target: BundleTarget) -> str:
    """Machines that get the same bundle: the same recipe, packages and env, for the same target."""
    import hashlib
    import json

    rec = plan.recommendation.to_json() if plan.recommendation is not None else {}
    doc = json.dumps({"rec": rec, "tags": target.tags[:40], "py": target.major_minor},
                     sort_keys=True)
    return f"{plan.recipe}-{target.key()}-{hashlib.sha256(doc.encode()).hexdigest()[:8]}"
