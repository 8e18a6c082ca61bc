"""Doctor checks: the venv's settings at a plain start (no activate), and the shared libraries the
frameworks' processes really loaded (one family from two places; a system copy shadowing the wheel's;
JAX on the CPU when TensorFlow or torch is imported first)."""

from __future__ import annotations

import os
from typing import Dict, List, Optional

from ...model import shell
from ...model.doctor import Evidence, LoadedLibrary
from ...model.knowledge import Row
from ..context import DoctorContext
from ._base import Hit, Result, Unknown, check


def _venv_and_recipe(dc: DoctorContext) -> "tuple[str, Optional[str], bool]":
    doc = dc.starts_doc or {}
    settings = doc.get("settings")
    hook = settings.get("hook") if isinstance(settings, dict) else None
    recipe = hook.get("recipe") if isinstance(hook, dict) else None
    starts = doc.get("starts")
    off = False
    for s in starts if isinstance(starts, list) else []:
        given = s.get("given") if isinstance(s, dict) and s.get("name") == "plain" else None
        if isinstance(given, dict) and str(given.get("MLPROBE_HOOK") or "").strip().lower() in ("0", "off", "no", "false"):
            off = True
    return str(doc.get("venv") or "VENV"), recipe if isinstance(recipe, str) else None, off


@check("setting_missing_plain_start")
def setting_missing_plain_start(dc: DoctorContext, row: Row) -> Result:
    if dc.starts_doc is None:
        return []  # no venv was asked about (`doctor --python VENV/bin/python` takes its starts)
    venv, recipe, off = _venv_and_recipe(dc)
    hits = []
    for s in dc.settings_seen:
        if s.plain is not None:
            continue
        if off:
            why = "the start-up hook is turned off (MLPROBE_HOOK is set to turn it off)"
            fix = "unset MLPROBE_HOOK"
        elif "start-up hook" not in s.places:
            why = "only the activate scripts set it: nothing sets it when Python starts without them"
            fix = shell.command(["mlprobe", "install", "--recipe", recipe or "RECIPE", "--venv", venv, "--settings-only"],
                                os.name == "nt")
        else:
            why = "the start-up hook has it but did not run (its .pth is missing, or site-packages is not read)"
            fix = shell.command(["mlprobe", "install", "--recipe", recipe or "RECIPE", "--venv", venv, "--settings-only"],
                                os.name == "nt")
        hits.append(Hit({"name": s.name, "value": s.wanted, "why": why, "fix": fix, "venv": venv},
                        [Evidence(capture="interpreter-starts.json",
                                  line=f"plain start: {s.name} unset; activated: {s.name}={s.activated!r} "
                                       f"({s.activated_from}); written into: {', '.join(s.places) or 'nowhere'}")]))
    return hits


@check("setting_user_differs")
def setting_user_differs(dc: DoctorContext, row: Row) -> Result:
    if dc.starts_doc is None:
        return []
    return [Hit({"name": s.name, "value": s.plain, "wanted": s.wanted},
                [Evidence(capture="interpreter-starts.json", line=f"{s.name}={s.plain!r} set before Python started; "
                                                                   f"the recipe's value: {s.wanted!r}")])
            for s in dc.settings_seen if s.plain_from == "user" and s.plain != s.wanted]


def _folder(path: str) -> str:
    """The folder a library was loaded from, as the process named it (never resolved on this machine:
    a replayed path is another machine's); /lib/… and /usr/lib/… are one folder (merged /usr)."""
    if not path.startswith("/"):
        return os.path.dirname(path)
    folder = os.path.dirname(os.path.normpath(path))
    return "/usr" + folder if folder == "/lib" or folder.startswith(("/lib/", "/lib64")) else folder


def _folders(libs: List[LoadedLibrary]) -> Dict[str, List[LoadedLibrary]]:
    out: Dict[str, List[LoadedLibrary]] = {}
    for lib in libs:
        out.setdefault(_folder(lib.path), []).append(lib)
    return out


def _fix_for(libs: List[LoadedLibrary]) -> str:
    ld = [lib.origin.split(" ", 3)[-1] for lib in libs if lib.origin.startswith("LD_LIBRARY_PATH entry")]
    if ld:
        return (f"take {ld[0]} out of LD_LIBRARY_PATH (it puts that copy before the wheel's), e.g. "
                "`unset LD_LIBRARY_PATH` in the shell or service that starts Python")
    conda = [lib for lib in libs if lib.origin == "conda prefix"]
    if conda:
        return (f"make the process load one copy: remove the conda package that installed {conda[0].path} "
                "(`conda list` names it), or install the framework with conda only, not with pip beside it")
    system = [lib for lib in libs if lib.origin == "system"]
    if system:
        from ..libraries import families

        wheels = next((w for fam, _n, _p, w in families() if fam == system[0].family), ())
        folder = _folder(system[0].path)
        return (f"a copy in {folder} (the loader's own folders, from the system's packages: `dpkg -S "
                f"{system[0].path}` or `rpm -qf` names the package) is loaded beside the wheel's: remove that "
                "package, or give both the same version"
                + (f" (`pip install` the matching {' / '.join(wheels[:3])})" if wheels else "")
                + f"; and check that LD_LIBRARY_PATH and LD_PRELOAD do not name {folder}")
    return "keep one copy: uninstall the wheel that should not be there (pip uninstall), then reinstall the framework"


@check("library_two_places")
def library_two_places(dc: DoctorContext, row: Row) -> Result:
    if not dc.library_loads:
        return Unknown("no loaded-libraries capture (doctor --python VENV/bin/python takes it)")
    from ..libraries import family_name

    hits = []
    done = set()
    for load in dc.library_loads:
        by_family: Dict[str, List[LoadedLibrary]] = {}
        for lib in load.libraries:
            if lib.family:
                by_family.setdefault(lib.family, []).append(lib)
        for fam, libs in by_family.items():
            folders = _folders(libs)
            owners = {lib.owner for lib in libs if lib.owner}
            if len(folders) < 2 and len(owners) < 2:
                continue
            key = (fam, tuple(sorted(folders)))
            if key in done:
                continue
            done.add(key)
            places = [f"{folder} ({ls[0].origin})" for folder, ls in folders.items()]
            if len(folders) < 2:
                places = [f"{libs[0].path} (listed by {', '.join(sorted(owners))})"]
            hits.append(Hit({"family": family_name(fam), "places": " and ".join(places),
                             "frameworks": " + ".join(load.frameworks) or "the process", "fix": _fix_for(libs)},
                            [Evidence(capture=dc.libraries_capture or "loaded-libraries", line=lib.path,
                                      note=lib.origin) for lib in libs]))
    return hits


@check("library_shadowed")
def library_shadowed(dc: DoctorContext, row: Row) -> Result:
    """A family loaded only from outside any wheel while a wheel of that family is loaded for another
    member (two-places finds that), or while the target's wheels bring it: the live capture's owners."""
    if not dc.library_loads:
        return Unknown("no loaded-libraries capture")
    from ..libraries import family_name

    hits = []
    for load in dc.library_loads:
        for lib in load.libraries:
            if not lib.family or lib.owner or not lib.origin.startswith("LD_LIBRARY_PATH entry"):
                continue
            hits.append(Hit({"family": family_name(lib.family), "path": lib.path, "origin": lib.origin,
                             "frameworks": " + ".join(load.frameworks) or "the process", "fix": _fix_for([lib])},
                            [Evidence(capture=dc.libraries_capture or "loaded-libraries", line=lib.path, note=lib.origin)]))
    return hits


@check("jax_cpu_after_other_import")
def jax_cpu_after_other_import(dc: DoctorContext, row: Row) -> Result:
    if not dc.library_loads or dc.libraries_capture != "loaded-libraries.json":
        return Unknown("no loaded-libraries.json with the frameworks' devices")
    from ..libraries import devices_of

    devs = devices_of(dc.libraries_text)
    alone = devs.get(("jax",), {}).get("jax", [])
    if not any(not d.startswith("cpu") for d in alone):
        return []
    hits = []
    for key, seen in devs.items():
        if len(key) < 2 or key[-1] != "jax":
            continue
        after = seen.get("jax", [])
        if not any(not d.startswith("cpu") for d in after):
            first = " and ".join(key[:-1])
            hits.append(Hit({"first": first, "alone": ", ".join(alone), "after": ", ".join(after) or "nothing"},
                            [Evidence(capture="loaded-libraries.json", line=f"jax alone: {', '.join(alone)}"),
                             Evidence(capture="loaded-libraries.json",
                                      line=f"{first} imported first, then jax: {', '.join(after) or 'nothing'}")]))
    return hits
