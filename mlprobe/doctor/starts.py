"""The venv's settings as each way of starting its Python really gets them: the `interpreter-starts`
capture kind.

Two starts of the target interpreter, each printing the values of every setting mlprobe wrote for
the venv (install/settings.py reads where: start-up hook, activate scripts, kernel specs):
- `plain`: the environment without the venv's activation (what an IDE, Jupyter, cron, systemd or
  `uv run` give): this process's own, less what the venv's `activate` added if it is active here;
- `activated`: that environment as `activate` changes it.
The document keeps what each start was given and what it saw, so doctor (live or replayed) says where
each value came from: the person ("user"), the activate script, the start-up hook, or nowhere.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from ..model.doctor import SettingSeen
from ..model.jsontypes import JsonObject, JsonValue

CAPTURE = "interpreter-starts.json"
_PROBE = ("import json, os, sys\n"
          "names = json.loads(sys.argv[1])\n"
          "print(json.dumps({'seen': dict((k, os.environ.get(k)) for k in names),"
          " 'hook_loaded': '_mlprobe_startup' in sys.modules}))\n")


def venv_of(python: str) -> Optional[Path]:
    """The venv `python` belongs to, from the path as given (a venv's python may link elsewhere)."""
    venv = Path(os.path.abspath(python)).parent.parent
    return venv if (venv / "pyvenv.cfg").is_file() else None


def plain_base(environ: Mapping[str, str], venv: Path) -> Dict[str, str]:
    """`environ` without what activating `venv` added (when it is the active venv here): VIRTUAL_ENV,
    its scripts folder on PATH, and each variable whose _MLPROBE_SET_ marker says activate set it; and
    without what a start-up hook set in this process (the names in _MLPROBE_HOOK_SET)."""
    from ..venvconf.layout import scripts_dir

    from ..venvconf.hook import SET_MARK

    out = dict(environ)
    # what a start-up hook set in this process (mlprobe started from a venv with one) is not the person's
    for k in out.pop(SET_MARK, "").split(","):
        if k:
            out.pop(k, None)
    if os.path.normcase(out.get("VIRTUAL_ENV", "")) != os.path.normcase(str(venv)):
        return out
    out.pop("VIRTUAL_ENV", None)
    out.pop("VIRTUAL_ENV_PROMPT", None)
    scripts = os.path.normcase(str(scripts_dir(venv)))
    out["PATH"] = os.pathsep.join(p for p in out.get("PATH", "").split(os.pathsep) if os.path.normcase(p) != scripts)
    for k in list(out):
        if k.startswith("_MLPROBE_SET_"):
            out.pop(k[len("_MLPROBE_SET_"):], None)
            out.pop(k)
        elif k.startswith("_MLPROBE_OLD_"):
            out[k[len("_MLPROBE_OLD_"):]] = out.pop(k)
    out.pop("_MLPROBE_ENV_ACTIVE", None)
    return out


def capture(python: str, environ: Optional[Mapping[str, str]] = None, timeout: float = 30.0) -> Optional[JsonObject]:
    """The `interpreter-starts.json` document, or None when `python` is not in a venv."""
    from ..venvconf import activate
    from ..venvconf.hook import OFF_VAR
    from ..venvconf.layout import read_settings, scripts_dir

    environ = os.environ if environ is None else environ
    venv = venv_of(python)
    if venv is None:
        return None
    settings = read_settings(venv, environ)
    wanted = settings.wanted()
    names = sorted(set(wanted) | set(settings.prepend) | {OFF_VAR})
    base = plain_base(environ, venv)
    activated = activate.activated_env(base, venv, scripts_dir(venv), settings.activate, settings.prepend)
    starts: List[JsonValue] = []
    for name, env in (("plain", base), ("activated", activated)):
        rec: JsonObject = {"name": name, "given": {k: env.get(k) for k in names}, "seen": None,
                           "hook_loaded": None, "error": None}
        try:
            r = subprocess.run([python, "-c", _PROBE, json.dumps(names)], capture_output=True, text=True, env=env,
                               timeout=timeout)
            answer = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 and r.stdout.strip() else None
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
            rec["error"] = f"{type(exc).__name__}: {exc}"[:300]
            answer = None
        if isinstance(answer, dict):
            rec["seen"] = answer.get("seen")
            rec["hook_loaded"] = answer.get("hook_loaded")
        elif rec["error"] is None:
            rec["error"] = f"the interpreter exited with {r.returncode}: {(r.stderr or '').strip()[-200:]}"
        starts.append(rec)
    hook_doc: JsonValue = settings.hook.to_dict() if settings.hook is not None else None  # type: ignore[assignment]
    return {"python": python, "venv": str(venv), "wanted": dict(wanted),
            "settings": {"hook": hook_doc, "activate": dict(settings.activate), "prepend": dict(settings.prepend),
                         "kernels": {k: dict(v) for k, v in settings.kernels.items()}},
            "starts": starts}


def _str_map(v: JsonValue) -> Dict[str, Optional[str]]:
    return {str(k): (x if isinstance(x, str) else None) for k, x in v.items()} if isinstance(v, dict) else {}


def parse(text: str) -> Optional[JsonObject]:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("starts"), list) else None


def settings_seen(doc: JsonObject) -> Tuple[SettingSeen, ...]:
    """Each wanted setting at each start, with where its value came from."""
    from ..venvconf.hook import SHELL_ONLY_VARS

    # a capture made before the shell-only variables were left out of `wanted` still lists them
    wanted = {k: v for k, v in _str_map(doc.get("wanted")).items() if k not in SHELL_ONLY_VARS}
    settings = doc.get("settings") if isinstance(doc.get("settings"), dict) else {}
    assert isinstance(settings, dict)
    hook = settings.get("hook") if isinstance(settings.get("hook"), dict) else None
    hook_settings = _str_map(hook.get("settings")) if isinstance(hook, dict) else {}
    act = _str_map(settings.get("activate"))
    found_kernels = settings.get("kernels")
    kernels: Dict[str, JsonValue] = found_kernels if isinstance(found_kernels, dict) else {}
    starts = {str(s.get("name")): s for s in doc.get("starts") or [] if isinstance(s, dict)}  # type: ignore[union-attr]
    plain_given = _str_map(starts.get("plain", {}).get("given"))
    out = []
    for name in sorted(wanted):
        places = tuple(p for p, has in (("start-up hook", name in hook_settings), ("activate scripts", name in act),
                                        ("kernel spec", any(isinstance(e, dict) and name in e for e in kernels.values())))
                       if has)
        values: Dict[str, Tuple[Optional[str], str]] = {}
        for start in ("plain", "activated"):
            rec = starts.get(start, {})
            seen = _str_map(rec.get("seen")).get(name)
            given = _str_map(rec.get("given")).get(name)
            if given is not None and plain_given.get(name) is not None:
                where = "user"
            elif given is not None:
                where = "activate script"
            elif seen is not None:
                where = "start-up hook" if rec.get("hook_loaded") else "the interpreter"
            else:
                where = "unset"
            values[start] = (seen, where)
        out.append(SettingSeen(name=name, wanted=wanted[name], places=places, plain=values["plain"][0],
                               plain_from=values["plain"][1], activated=values["activated"][0],
                               activated_from=values["activated"][1]))
    return tuple(out)


__all__ = ["CAPTURE", "capture", "parse", "settings_seen", "plain_base", "venv_of"]
