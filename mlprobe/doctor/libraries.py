"""Which shared libraries a framework's process really loaded, and from where: the `loaded-libraries`
capture kind.

Live: the verify payload's `libraries` mode runs in the target interpreter, imports each framework
alone and, where two are installed that fight over the CUDA libraries, together in the order a script
would (TensorFlow, then JAX), lists their devices, and sends the paths the process had mapped (Linux
/proc/self/maps, macOS the dyld image list, Windows the module list). Here each path gets its owner:
the installed distribution whose RECORD lists it (as `pip show -f` does), else the conda prefix, the
LD_LIBRARY_PATH entry or the system folder it sits in. The document is `loaded-libraries.json`.

Replayed: that file, or `loaded-libraries.txt`: lines a person pasted (/proc/PID/maps, lsof, pmap,
ldd's `=>` lines, LD_DEBUG's `calling init:` / `file=` lines, a plain list of paths); each absolute
path of a shared object is taken, its owner inferred from the path's shape.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..model.doctor import LibraryLoad, LoadedLibrary
from ..model.jsontypes import JsonObject, JsonValue
from ..model.knowledge import rows

CAPTURE_JSON = "loaded-libraries.json"
CAPTURE_TEXT = "loaded-libraries.txt"
# Imported together in one process besides each alone, first one first (as a script would).
PAIRS = (("tensorflow", "jax"), ("torch", "jax"))
_SO_PATH = re.compile(r"(/[^\s'\"()\[\],:;]*?/((?:lib)?[A-Za-z0-9_.+-]+\.(?:so(?:\.[0-9]+)*|dylib)))(?=$|[\s'\"()\[\],:;])")
_VERSION = re.compile(r"\.so\.([0-9]+(?:\.[0-9]+)*)$|_([0-9]+)\.dll$")


def families() -> List[Tuple[str, str, "re.Pattern[str]", Tuple[str, ...]]]:
    out = []
    for r in rows("libraries", "families"):
        try:
            out.append((str(r["family"]), str(r.get("name") or r["family"]), re.compile(str(r["pattern"])),
                        tuple(str(w) for w in r.get("wheels") or ())))
        except (KeyError, re.error):
            continue
    return out


def family_of(path: str) -> Optional[str]:
    name = os.path.basename(path)
    for fam, _label, pat, _wheels in families():
        if pat.search(name):
            return fam
    return None


def family_name(family: str) -> str:
    return next((label for fam, label, _p, _w in families() if fam == family), family)


def version_of(path: str) -> Optional[str]:
    m = _VERSION.search(os.path.basename(path))
    return (m.group(1) or m.group(2)) if m else None


# -- live --------------------------------------------------------------------------------------------

def record_owners(site_dirs: Iterable[str]) -> Dict[str, str]:
    """Real path of each file a distribution's RECORD lists -> the distribution's name."""
    owners: Dict[str, str] = {}
    for site in site_dirs:
        try:
            infos = [p for p in Path(site).iterdir() if p.name.endswith(".dist-info")]
        except OSError:
            continue
        for info in infos:
            name = info.name[:-len(".dist-info")].rsplit("-", 1)[0]
            try:
                meta = (info / "METADATA").read_text(encoding="utf-8", errors="replace")
                m = re.search(r"^Name:\s*(\S+)", meta, re.M)
                if m:
                    name = m.group(1)
                text = (info / "RECORD").read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for row in csv.reader(io.StringIO(text)):
                if not row or not row[0]:
                    continue
                rel = row[0]
                if not (".so" in rel or rel.endswith((".dylib", ".dll", ".pyd"))):
                    continue
                owners[os.path.realpath(os.path.join(site, rel))] = name
    return owners


def capture(python: str, frameworks: Sequence[str], timeout: float = 120.0,
            env: Optional[Mapping[str, str]] = None) -> JsonObject:
    """The `loaded-libraries.json` document for `python`: one load per framework alone, and one per
    installed pair of PAIRS, each in its own child."""
    from concurrent.futures import ThreadPoolExecutor

    from ..verify.child import child_env, run_child

    orders: List[Tuple[str, ...]] = [(f,) for f in frameworks]
    orders += [p for p in PAIRS if all(f in frameworks for f in p)]

    def one(order: Tuple[str, ...]) -> JsonObject:
        res = run_child(python, ["libraries", json.dumps({"frameworks": list(order)})], env=child_env(dict(env or {})),
                        timeout=timeout, stall=timeout)
        ev = next((e for e in res.events if e.get("event") == "libraries"), None)
        if ev is None:
            last = res.last_error_line()
            return {"frameworks": list(order), "paths": [], "error": f"the process {res.how()}" + (f": {last}" if last else "")}
        return dict(ev)

    with ThreadPoolExecutor(max_workers=max(1, min(4, len(orders)))) as pool:
        loads = list(pool.map(one, orders))
    sites: List[str] = []
    for ld in loads:
        found = ld.get("site_packages")
        for s in found if isinstance(found, list) else []:
            if isinstance(s, str) and s not in sites:
                sites.append(s)
    owners = record_owners(sites)
    out_loads: List[JsonValue] = []
    for ld in loads:
        listed = ld.get("paths")
        paths = [p for p in listed if isinstance(p, str)] if isinstance(listed, list) else []
        out_loads.append({"frameworks": ld.get("frameworks"), "method": ld.get("method"), "error": ld.get("error"),
                          "devices": ld.get("devices") or {}, "env": ld.get("env") or {},
                          "libraries": [{"path": p, "owner": owners.get(os.path.realpath(p))} for p in paths]})
    return {"python": python, "site_packages": list(sites), "loads": out_loads}


# -- reading -----------------------------------------------------------------------------------------

def _origin(path: str, owner: Optional[str], sites: Sequence[str], env: Mapping[str, str]) -> str:
    if owner:
        return f"wheel {owner}"
    # `torch/lib/../../nvidia/cusparse/lib` (a wheel's RPATH as the loader prints it) is the nvidia wheel's
    real = os.path.normpath(path) if path.startswith("/") else path
    ld = [e for e in (env.get("LD_LIBRARY_PATH") or "").split(os.pathsep) if e]
    folder = os.path.dirname(real)
    for entry in ld:
        if os.path.normpath(folder) == os.path.normpath(entry):
            return f"LD_LIBRARY_PATH entry {entry}"
    if any(real.startswith(s.rstrip("/") + "/") for s in sites) or "/site-packages/" in real or "/dist-packages/" in real:
        m = re.search(r"/(?:site|dist)-packages/([^/]+)/", real)
        return f"site-packages ({m.group(1)})" if m else "site-packages"
    conda = env.get("CONDA_PREFIX")
    if (conda and real.startswith(conda.rstrip("/") + "/")) or re.search(r"/(?:mini|ana)conda[0-9]*/|/envs/[^/]+/lib/|/micromamba/", real):
        return "conda prefix"
    return "system"


def _library(path: str, owner: Optional[str], sites: Sequence[str], env: Mapping[str, str]) -> LoadedLibrary:
    return LoadedLibrary(path=path, origin=_origin(path, owner, sites, env), family=family_of(path), owner=owner,
                         version=version_of(path))


def parse_json(text: str) -> Tuple[LibraryLoad, ...]:
    """`loaded-libraries.json` as typed loads; () when it is not that document."""
    try:
        doc = json.loads(text)
    except ValueError:
        return ()
    if not isinstance(doc, dict) or not isinstance(doc.get("loads"), list):
        return ()
    sites = [s for s in doc.get("site_packages") or [] if isinstance(s, str)]
    out = []
    for ld in doc["loads"]:
        if not isinstance(ld, dict):
            continue
        env = {str(k): str(v) for k, v in (ld.get("env") or {}).items()} if isinstance(ld.get("env"), dict) else {}
        libs = []
        for lib in ld.get("libraries") or []:
            if isinstance(lib, dict) and isinstance(lib.get("path"), str):
                owner = lib.get("owner")
                libs.append(_library(lib["path"], owner if isinstance(owner, str) else None, sites, env))
        fws = tuple(str(f) for f in ld.get("frameworks") or [] if isinstance(f, str))
        err = ld.get("error")
        out.append(LibraryLoad(frameworks=fws, libraries=tuple(libs), error=err if isinstance(err, str) else None))
    return tuple(out)


# LD_DEBUG=libs lines ("  12345:\tcalling init: /path"): the process id, then what the loader did
_LD_DEBUG = re.compile(r"^\s*\d+:\s(.*)$")
_LD_TRYING = re.compile(r"^\s*trying file=(\S+)")
_LD_LINK_MAP = re.compile(r"^\s*file=(\S+) \[\d+\];\s+generating link map")
_LD_LOADED = re.compile(r"^\s*calling (?:init|fini): (\S+)|needed by (/\S+) \[\d+\]")


def _ld_debug_paths(rest: str, tried: Dict[str, str]) -> List[str]:
    """The libraries one LD_DEBUG line shows loaded. `trying file=` is only a look (the file may not
    be there): the path counts when the loader then generates that name's link map, so the last
    path tried for a name is the one loaded. `search path=` and `find library=` load nothing."""
    m = _LD_TRYING.match(rest)
    if m:
        tried[os.path.basename(m.group(1))] = m.group(1)
        return []
    m = _LD_LINK_MAP.match(rest)
    if m:
        name = m.group(1)
        path = name if name.startswith("/") else tried.get(name)
        return [path] if path else []
    m = _LD_LOADED.search(rest)
    if m:
        return [m.group(1) or m.group(2)]
    return []


_LD_SEARCH = re.compile(r"search path=(\S+)\s+\(LD_LIBRARY_PATH\)")
_LD_ASSIGN = re.compile(r"^\s*(?:export\s+|declare -x\s+)?LD_LIBRARY_PATH=[\"']?([^\s\"']*)")
_ECHO_LD = re.compile(r"echo\s+[\"']?\$\{?LD_LIBRARY_PATH\}?[\"']?\s*$")


def parse_text(text: str) -> Tuple[LibraryLoad, ...]:
    """Pasted lines (maps, lsof, pmap, ldd, LD_DEBUG, a list): one load of every shared object named
    as loaded (an LD_DEBUG `trying file=` that the loader did not take is not a load). LD_LIBRARY_PATH,
    where the paste shows it (LD_DEBUG's `search path=… (LD_LIBRARY_PATH)`, `echo $LD_LIBRARY_PATH`
    and the line after it, an `LD_LIBRARY_PATH=` line of `env`), tells a library from one of its folders."""
    seen: List[str] = []
    tried: Dict[str, str] = {}
    ld_path: List[str] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        shown = _LD_SEARCH.search(line) or _LD_ASSIGN.match(line)
        value = shown.group(1) if shown else None
        if value is None and _ECHO_LD.search(line) and i + 1 < len(lines):
            value = lines[i + 1].strip()
        for entry in (value or "").split(":"):
            if entry.startswith("/") and entry not in ld_path:
                ld_path.append(entry)
        debug = _LD_DEBUG.match(line)
        if debug:
            found = [p for p in _ld_debug_paths(debug.group(1), tried) if _SO_PATH.fullmatch(p)]
        else:
            found = [m.group(1) for m in _SO_PATH.finditer(line)]
        for path in found:
            if path not in seen:
                seen.append(path)
    if not seen:
        return ()
    env = {"LD_LIBRARY_PATH": os.pathsep.join(ld_path)} if ld_path else {}
    return (LibraryLoad(frameworks=(), libraries=tuple(_library(p, None, (), env) for p in seen)),)


def devices_of(text: str) -> Dict[Tuple[str, ...], Dict[str, List[str]]]:
    """{frameworks of a load: {framework: device ids}} of a `loaded-libraries.json`."""
    try:
        doc = json.loads(text)
    except ValueError:
        return {}
    out: Dict[Tuple[str, ...], Dict[str, List[str]]] = {}
    for ld in doc.get("loads") or [] if isinstance(doc, dict) else []:
        if isinstance(ld, dict) and isinstance(ld.get("devices"), dict):
            key = tuple(str(f) for f in ld.get("frameworks") or [])
            out[key] = {str(k): [str(d) for d in v] for k, v in ld["devices"].items() if isinstance(v, list)}
    return out


__all__ = ["CAPTURE_JSON", "CAPTURE_TEXT", "PAIRS", "capture", "parse_json", "parse_text", "record_owners",
           "family_of", "family_name", "version_of", "devices_of"]
