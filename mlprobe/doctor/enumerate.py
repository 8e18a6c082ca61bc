"""The frameworks' own device enumeration in a target interpreter, as the `framework-devices.json`
capture (so that a bundle or a report replays what the frameworks saw).

`enumerate_devices(python)` is the one function that asks: it runs the verify payload there, once to
learn which frameworks import and once per framework in enumerate-only mode (import, list devices,
stop: seconds, not a training run), each in a child with a time limit. The document it returns:

    {"python": PATH, "python_version": "3.12.3", "method": "...",
     "frameworks": [{"name": "torch", "version": "2.11.0+cu130", "info": {"cuda": "13.0", ...},
                     "devices": [{"id": "cuda:0", "kind": "cuda", "name": "NVIDIA H200",
                                  "compute_capability": "9.0", ...}, ...],
                     "unavailable": [{"id": "cuda", "reason": "..."}], "error": null, "seconds": 1.9}]}
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, List, Mapping, Optional

from ..model.jsontypes import JsonObject, JsonValue
from ..model.vocabulary import vocabulary
from ..scan.capture import Capture, CaptureSpec
from ..verify.child import child_env, run_child

FRAMEWORKS = vocabulary().payload_frameworks()  # the registry's: those the verify payload trains itself
METHOD = "the verify payload in enumerate-only mode (import the framework, list its devices, stop)"
DEFAULT_TIMEOUT = 60.0


def _one(python: str, name: str, timeout: float, env: Optional[Mapping[str, str]]) -> JsonObject:
    t0 = time.monotonic()
    cfg = {"framework": name, "quick": True, "enumerate_only": True}
    extra = dict(env or {})
    if name == "plaidml":
        extra.setdefault("PLAIDML_EXPERIMENTAL", "1")
    res = run_child(python, ["run", json.dumps(cfg)], env=child_env(extra), timeout=timeout, stall=timeout)
    rec: JsonObject = {"name": name, "version": None, "info": {}, "devices": [], "unavailable": [], "error": None}
    for ev in res.events:
        kind = ev.get("event")
        if kind == "hello":
            info = ev.get("info")
            rec["version"] = ev.get("version")
            rec["info"] = info if isinstance(info, dict) else {}
        elif kind == "devices":
            rec["devices"] = _objects(ev.get("devices"))
            rec["unavailable"] = _objects(ev.get("unavailable"))
        elif kind == "fatal":
            rec["error"] = f"{ev.get('stage') or 'run'}: {ev.get('error')}"
    if not res.clean and rec["error"] is None:
        last = res.last_error_line()
        rec["error"] = f"the {name} process {res.how()}" + (f" ({last})" if last else "")
    rec["seconds"] = round(time.monotonic() - t0, 3)
    return rec


def _objects(value: JsonValue) -> List[JsonValue]:
    """The JSON objects of a list the payload sent (anything else in it is left out)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def enumerate_devices(python: str, timeout: float = DEFAULT_TIMEOUT,
                      env: Optional[Mapping[str, str]] = None) -> JsonObject:
    """The `framework-devices.json` document: what each framework importable in `python` lists as its
    devices (see the module's docstring)."""
    found = run_child(python, ["discover"], env=child_env(dict(env or {})), timeout=timeout, stall=timeout)
    disc = next((e for e in found.events if e.get("event") == "discover"), None)
    doc: JsonObject = {"python": python, "python_version": None, "method": METHOD, "frameworks": []}
    if disc is None:
        last = found.last_error_line()
        doc["error"] = f"the interpreter {found.how()}" + (f": {last}" if last else "")
        return doc
    doc["python_version"] = disc.get("python")
    listed = disc.get("frameworks")
    fws: JsonObject = listed if isinstance(listed, dict) else {}

    def importable(name: str) -> bool:
        fw = fws.get(name)
        return isinstance(fw, dict) and fw.get("importable") is True

    todo = [n for n in FRAMEWORKS if importable(n)]
    if todo:
        with ThreadPoolExecutor(max_workers=len(todo)) as pool:
            doc["frameworks"] = list(pool.map(lambda n: _one(python, n, timeout, env), todo))
    return doc


def _produce(host: Any, s: CaptureSpec) -> Capture:
    import sys

    doc = enumerate_devices(sys.executable, timeout=min(s.timeout, DEFAULT_TIMEOUT))
    return Capture(s.name, "ok", data=json.dumps(doc, indent=2, sort_keys=True).encode())


def importable(doc: JsonObject) -> List[str]:
    """The frameworks an enumeration document found importing."""
    return [str(f.get("name")) for f in doc.get("frameworks") or [] if isinstance(f, dict)  # type: ignore[union-attr]
            and f.get("name") and not f.get("error")]


def _produce_libraries(host: Any, s: CaptureSpec) -> Capture:
    import sys

    from . import libraries

    found = host.get("framework-devices.json")
    doc = json.loads(found.text()) if found.ok else {}
    names = importable(doc) if isinstance(doc, dict) else []
    out = libraries.capture(sys.executable, names, timeout=min(s.timeout, 120.0))
    return Capture(s.name, "ok", data=json.dumps(out, indent=1, sort_keys=True).encode())


def _produce_starts(host: Any, s: CaptureSpec) -> Capture:
    import sys

    from . import starts

    doc = starts.capture(sys.executable)
    if doc is None:
        return Capture(s.name, "absent", error="the scanning Python is not in a venv")
    return Capture(s.name, "ok", data=json.dumps(doc, indent=1, sort_keys=True).encode())


def install_producer() -> None:
    """Let a live host take `framework-devices.json`, `loaded-libraries.json` and `interpreter-starts.json`
    (for `mlprobe capture`, `report`, `doctor`)."""
    from ..scan.host import register_producer

    register_producer("framework-devices", _produce)
    register_producer("loaded-libraries", _produce_libraries)
    register_producer("interpreter-starts", _produce_starts)


__all__ = ["FRAMEWORKS", "enumerate_devices", "install_producer"]


