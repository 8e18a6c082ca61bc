"""Every package set a recipe can hand to pip resolves for real, for every platform and Python its
knowledge rows claim. pip is asked through its own configuration (`pip install --dry-run
--ignore-installed --report -`, with `--platform`, `--python-version` and `--only-binary=:all:`);
a pin that no longer resolves fails with the recipe's name, the row and pip's last words.

Recipes whose packages come from PyTorch's own index (torch CPU/CUDA/ROCm/XPU builds on Linux and
Windows, and torch-npu on x86_64, whose torch==X+cpu pin only PyTorch's cpu index fills) are not
reachable from here: tests/test_install_mirror.py installs that path for real from
a local mirror with PyTorch's layout. Everything published on the default index is resolved here.
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from mlprobe.install.backends import Sources, pip_env
from mlprobe.install.resolve import (Resolution, ResolvedDist, classify_failure, dry_run, dry_run_argv,
                                     own_python_check)
from mlprobe.recipes import RECIPES_DIR, SCHEMA_FILE, knowledge

pytestmark = [pytest.mark.slow, pytest.mark.registry]

PYTHONS = [f"3.{m}" for m in range(7, 16)]
_PIP = Sources(use_pip_config=True, origin="pip configuration")
WORKERS = 4


def _linux(arch: str) -> List[str]:
    tags = [f"manylinux_2_{n}_{arch}" for n in range(40, 16, -1)] + [f"manylinux2014_{arch}"]
    if arch == "x86_64":
        tags += ["manylinux2010_x86_64", "manylinux1_x86_64"]
    return tags


def _macos(arch: str) -> List[str]:
    majors = [(m, 0) for m in range(26, 10, -1)] + [(10, n) for n in range(16, 8, -1)]
    kinds = [arch, "universal2"] + (["intel", "universal"] if arch == "x86_64" else [])
    return [f"macosx_{a}_{b}_{k}" for (a, b) in majors for k in kinds
            if not (arch == "arm64" and a == 10 and k == "arm64")]


PLATFORM_TAGS = {
    ("Linux", "x86_64"): _linux("x86_64"),
    ("Linux", "arm64"): _linux("aarch64"),
    ("Windows", "x86_64"): ["win_amd64"],
    ("Darwin", "arm64"): _macos("arm64"),
    ("Darwin", "x86_64"): _macos("x86_64"),
}


def _fill(template: str, row: Dict[str, Any]) -> str:
    return re.sub(r"\{row\.(\w+)\}", lambda m: str(row[m.group(1)]), template)


def _pythons(spec: Optional[str]) -> List[str]:
    if not spec:
        return [f"{sys.version_info[0]}.{sys.version_info[1]}"]
    s = SpecifierSet(spec)
    return [p for p in PYTHONS if s.contains(p)]


def _as_list(v: Any) -> List[str]:
    if v is None:
        return []
    return [str(x) for x in (v if isinstance(v, list) else [v])]


Case = Tuple[str, str, Tuple[str, ...], str, str, str]  # recipe, row label, packages, os, arch, python


def _recipe_docs() -> List[Dict[str, Any]]:
    """The recipe files as their JSON documents (their templates are what this test fills)."""
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(RECIPES_DIR.glob("*.json"))
            if p.name != SCHEMA_FILE.name]


def _needs_another_index(recipe: Dict[str, Any], arch: str) -> bool:
    """Whether one of the recipe's extra indexes applies on this architecture (its `when` names
    cpu.arch, or it has none: always)."""
    for ex in (recipe.get("install") or {}).get("extra_indexes") or []:
        when = ex.get("when") or {}
        if when.get("fact") != "cpu.arch":
            return True
        if arch == when.get("equals") or arch in (when.get("in") or []):
            return True
    return False


def _python_field(recipe: Dict[str, Any]) -> str:
    """The row field the recipe's variant conditions test the target Python against."""
    conds = ((recipe.get("variants") or {}).get("conditions") or {}).get("all") or []
    for c in conds:
        m = re.fullmatch(r"\{row\.(\w+)\}", str(c.get("specifier", "")))
        if c.get("fact") == "python.version" and m:
            return m.group(1)
    return "python"


def _table_cases() -> Iterable[Case]:
    kb = knowledge()
    for r in _recipe_docs():
        inst = r.get("install") or {}
        variants = r.get("variants") or {}
        if r.get("status") == "retired" or not inst.get("packages") or not variants.get("table"):
            continue
        stem, key = variants["table"].split(".", 1)
        templates = inst.get("pinned_packages") or inst["packages"]
        for row in kb.table(stem).doc.get(key, []):
            if row.get("index"):
                continue  # PyTorch's own index: see the module docstring
            packages = tuple(_fill(t, row) for t in templates)
            oses = _as_list(row.get("os")) or (["Darwin"] if row.get("macos") else ["Linux"])
            arches = _as_list(row.get("arch")) or ["x86_64"]
            label = " ".join(f"{k}={row[k]}" for k in ("torch", "tf", "metal", "cuda") if row.get(k))
            for os_name in oses:
                for arch in arches:
                    if _needs_another_index(r, arch):
                        continue  # PyTorch's own index: see the module docstring
                    if stem == "tensorflow" and key == "cuda" and (os_name, arch) != ("Linux", "x86_64"):
                        continue
                    for py in _pythons(row.get(_python_field(r))):
                        yield r["id"], label, packages, os_name, arch, py


def _fixed_cases() -> Iterable[Case]:
    """Recipes without a variant table: their packages, with the rows that say where they run."""
    kb = knowledge()
    recipes = {r["id"]: r for r in _recipe_docs()}
    for row in kb.table("directml").doc.get("packages", []):
        recipe = "torch-directml" if row["package"] == "torch-directml" else "tensorflow-directml-plugin"
        packages = tuple(recipes[recipe]["install"]["packages"])
        for arch in _as_list(row.get("arch")):
            for py in _pythons(row.get("python")):
                yield recipe, f"{row['package']} {row['version']}", packages, "Windows", arch, py
    for row in kb.table("plaidml").doc.get("release", []):
        packages = tuple(recipes["plaidml-keras"]["install"]["packages"])
        for os_name in _as_list(row.get("os")):
            for arch in _as_list(row.get("wheel_arch")):
                # PlaidML claims no Python range: its wheels are py2.py3; mlprobe runs it from 3.9 on
                for py in ("3.9", "3.12"):
                    yield "plaidml-keras", f"plaidml {row['version']}", packages, os_name, arch, py


CASES = sorted(set(_table_cases()) | set(_fixed_cases()))


def test_this_pip_checks_the_target_python() -> None:
    """pip before 23.3 checks Requires-Python against the interpreter that runs it, not
    --python-version (pip issue 12216): every case for another Python would fail for no reason."""
    from packaging.version import Version

    cp = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, timeout=60)
    version = Version(cp.stdout.split()[1])
    assert version >= Version("23.3"), (
        f"pip {version} runs these tests; install the test extra (it asks for pip>=23.3): "
        'python3 -m pip install -e ".[test]"')


def test_every_claim_is_collected() -> None:
    recipes = {c[0] for c in CASES}
    for expected in ("tensorflow-cpu", "tensorflow-cuda", "tensorflow-metal", "tensorflow-directml-plugin",
                     "torch-directml", "torch-mps", "torch-cpu", "plaidml-keras"):
        assert expected in recipes, f"{expected} has no package set to resolve"
    platforms = {(c[3], c[4]) for c in CASES}
    assert {("Windows", "x86_64"), ("Darwin", "arm64"), ("Linux", "x86_64")} <= platforms


_MARKER_ENV = {
    "Linux": {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"},
    "Windows": {"sys_platform": "win32", "platform_system": "Windows", "os_name": "nt"},
    "Darwin": {"sys_platform": "darwin", "platform_system": "Darwin", "os_name": "posix"},
}
_MACHINE = {("Windows", "x86_64"): "AMD64", ("Linux", "arm64"): "aarch64"}


def _native(os_name: str, arch: str) -> bool:
    machine = platform.machine().lower().replace("amd64", "x86_64").replace("aarch64", "arm64")
    return (os_name, arch) == (platform.system(), machine)


def _marker_env(os_name: str, arch: str, py: str) -> Dict[str, str]:
    env = dict(_MARKER_ENV[os_name], platform_machine=_MACHINE.get((os_name, arch), arch), python_version=py,
               python_full_version=py + ".0", implementation_name="cpython",
               platform_python_implementation="CPython", platform_release="", platform_version="",
               implementation_version=py + ".0")
    return env


def _pip_no_deps(requirements: Sequence[str], os_name: str, arch: str, py: str) -> Tuple[bool, str, List[Any]]:
    argv = dry_run_argv([sys.executable, "-m", "pip"], list(requirements), _PIP, ignore_installed=True,
                        python_version=py, platforms=PLATFORM_TAGS[(os_name, arch)])
    argv.insert(argv.index("--dry-run") + 1, "--no-deps")
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=pip_env(_PIP))
    if cp.returncode != 0:
        return False, cp.stderr, []
    return True, "", list(json.loads(cp.stdout).get("install") or [])


def _resolve(case: Case) -> Tuple[Case, Resolution]:
    """On this machine's own platform pip resolves the whole tree. For another platform pip would
    still evaluate environment markers for this machine (Linux-only CUDA libraries on a Mac), so
    there the recipe's packages and, with markers evaluated for the target, their direct
    dependencies must each have a wheel for that platform and Python."""
    _recipe, _label, packages, os_name, arch, py = case
    if _native(os_name, arch):
        res = dry_run([sys.executable, "-m", "pip"], list(packages), _PIP, ignore_installed=True,
                      python_version=py, platforms=PLATFORM_TAGS[(os_name, arch)], timeout=600)
        return case, res
    ok, err, top = _pip_no_deps(packages, os_name, arch, py)
    if not ok:
        return case, Resolution(ok=False, output_tail=err,
                                failure=own_python_check(err, py) or classify_failure(err, "pip"))
    env = _marker_env(os_name, arch, py)
    deps: List[str] = []
    for item in top:
        meta = item.get("metadata") or {}
        extras = [re.sub(r"[-_.]+", "-", x).lower() for x in (item.get("requested_extras") or [])]
        for text in meta.get("requires_dist") or []:
            req = Requirement(text)
            if req.marker is not None and not any(
                    req.marker.evaluate(dict(env, extra=e)) for e in (extras or [""])):
                continue
            deps.append(f"{req.name}{req.specifier}")
    dists = [ResolvedDist(name=str(i.get("metadata", {}).get("name")), version=str(i.get("metadata", {})
                                                                                  .get("version")))
             for i in top]
    if deps:
        ok, err, more = _pip_no_deps(sorted(set(deps)), os_name, arch, py)
        if not ok:
            return case, Resolution(ok=False, output_tail=err,
                                    failure=own_python_check(err, py) or classify_failure(err, "pip"))
    return case, Resolution(ok=True, dists=dists)


def _summary(case: Case, res: Resolution) -> str:
    recipe, label, packages, os_name, arch, py = case
    why = f"{res.failure.what}: {res.failure.why}" if res.failure is not None else ""
    tail = " | ".join(ln.strip() for ln in res.output_tail.strip().splitlines()[-3:])
    return f"{recipe} [{label}] {' '.join(packages)} on {os_name} {arch}, Python {py}: {why} {tail}"


def test_every_recipe_resolves_on_every_platform_and_python_it_claims() -> None:
    failures: List[str] = []
    resolved: Dict[Tuple[str, str, str, str], Sequence[str]] = {}
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        for case, res in pool.map(_resolve, CASES):
            if not res.ok:
                failures.append(_summary(case, res))
                continue
            names = {d.name.lower().replace("_", "-") for d in res.dists}
            for spec in case[2]:
                name = re.split(r"[\[=<>!~ ]", spec, 1)[0].lower().replace("_", "-")
                if name not in names:
                    failures.append(_summary(case, res) + f" ({name} missing from pip's report)")
            resolved[(case[0], case[3], case[4], case[5])] = sorted(names)
    print(f"\n{len(CASES)} package sets asked, {len(CASES) - len(failures)} resolved")
    assert not failures, f"{len(failures)} of {len(CASES)} package sets do not resolve:\n" + "\n".join(failures)
