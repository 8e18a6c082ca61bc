"""Helpers shared by commands: choosing a host (live or replay) and printing JSON."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, Optional

from ..errors import EXIT_USAGE, MlprobeError
from ..model.vocabulary import vocabulary
from ..scan.capture import BundleError, Host
from ..scan.host import open_replay, shared_live_host


def add_replay(p: argparse.ArgumentParser) -> None:
    p.add_argument("--replay", metavar="DIR",
                   help="read a capture bundle (folder, or a report made with --include-raw) "
                        "instead of this machine")


# A capture bundle to read instead of this machine, for every command that scans (a fleet node
# started with it, planning on another machine's behalf); --replay on the command line wins.
REPLAY_ENV = "MLPROBE_REPLAY"


def replay_request(args: argparse.Namespace) -> "tuple[Optional[str], Optional[str]]":
    """(bundle, how it was asked for: "--replay" or "MLPROBE_REPLAY"), or (None, None) for live."""
    replay = getattr(args, "replay", None)
    if replay:
        return replay, "--replay"
    env = os.environ.get(REPLAY_ENV)
    if env:
        return env, REPLAY_ENV
    return None, None


def replay_said(args: argparse.Namespace) -> "tuple[str, str]":
    """How the replay was asked for, in words for an error: ("--replay", "leave out --replay") or
    ("MLPROBE_REPLAY (set in the environment)", "unset MLPROBE_REPLAY"): an error never names a flag
    the person did not pass."""
    _replay, via = replay_request(args)
    if via == REPLAY_ENV:
        return f"{REPLAY_ENV} (set in the environment)", f"unset {REPLAY_ENV}"
    return "--replay", "leave out --replay"


def make_host(args: argparse.Namespace) -> Host:
    replay, via = replay_request(args)
    if replay:
        if via == REPLAY_ENV:
            from .. import ui

            ui.note(f"{REPLAY_ENV} is set: reading the capture bundle {ui.display_path(replay)}, "
                    "not this machine")
        from ..ui import display_path

        try:
            host = open_replay(replay)
        except BundleError as exc:
            raise MlprobeError(
                f"cannot replay {display_path(replay)}"
                + (f" (from {REPLAY_ENV})" if via == REPLAY_ENV else ""),
                why=str(exc),
                next_step="pass a folder written by `mlprobe capture DIR`, a fixture folder, or a "
                          "report made with `mlprobe report --include-raw`"
                          + (f"; or unset {REPLAY_ENV} to scan this machine" if via == REPLAY_ENV else ""),
                ref="E101", exit_code=EXIT_USAGE,
            ) from None
        _environment_overrides(host)
        return host
    return shared_live_host()


def _environment_overrides(host: Any) -> None:
    """MLPROBE_OVERRIDE_* set where mlprobe runs apply to a replayed bundle as to a live scan (over the
    bundle's own value of the same fact), and stderr says so: a replay never ignores one silently."""
    from .. import ui
    from ..scan.host import OVERRIDE_PREFIX

    env = {k: v for k, v in os.environ.items() if k.startswith(OVERRIDE_PREFIX)}
    if not env:
        return
    own = host.bundle_overrides()
    host.extra_overrides = env
    for k, v in sorted(env.items()):
        over = f" (over the bundle's own {ui.safe_line(own[k])})" if k in own and own[k] != v else ""
        ui.note(f"{ui.safe_line(k)}={ui.safe_line(v)} from the environment applies to the replayed "
                f"bundle{over}")


def scan_host(host: Host) -> Any:
    """scan(host), with a progress line on a terminal that names the captures still running (a tool
    waiting on its timeout), and the probes' timings on stderr with --verbose."""
    from .. import ui
    from ..scan.run import scan

    def waiting() -> str:
        pending = getattr(host, "pending", None)
        items = sorted(pending().items(), key=lambda kv: -kv[1]) if callable(pending) else []
        return ", ".join(f"waiting for {n} ({s:.0f} s)" for n, s in items[:3])

    with ui.progress("scanning", detail=waiting):
        facts = scan(host)
    if ui.verbose():
        for p in facts.probes:
            ui.debug(f"probe {p.name}: {p.status} in {p.seconds:.3f} s" + (f" ({p.error})" if p.error else ""))
    return facts


def host_source(host: Host, args: argparse.Namespace) -> Dict[str, Any]:
    if host.kind == "replay":
        from ..ui import display_path

        replay, via = replay_request(args)
        source: Dict[str, Any] = {"kind": "replay", "bundle": display_path(replay or "")}
        if via == REPLAY_ENV:
            source["via"] = REPLAY_ENV
        return source
    return {"kind": "live"}


def print_json(doc: Any, stream: Optional[Any] = None) -> None:
    out = stream or sys.stdout
    from ..model import jsondoc

    out.write(jsondoc.dumps(doc, indent=2, sort_keys=False))
    out.write("\n")


def seconds(text: str) -> float:
    """argparse type for a time limit: a finite number of seconds above zero."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a time limit must be a number of seconds above 0")
    return value


def keep_seconds(text: str) -> float:
    """argparse type for how long something may stay: 0 (not at all) to one day."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 <= value <= 86400:
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 to 86400 seconds (a day at most)")
    return value


# What `verify --device` accepts: a backend of the registry (cuda, rocm, mps, npu, ...) or one of the
# names the frameworks give the same devices (hip, dml, level-zero, gpu for any), with an optional
# index (cuda:1), or a PlaidML device id (llvm_cpu.0, opencl_amd_gfx1031.0, metal_amd_radeon_pro_5600m.0).
# The backends are read from the registry (a new device kind is a row of data); plaidml and vpu name
# stacks, not device kinds.
DEVICE_KINDS = tuple(dict.fromkeys(
    ("cpu", "gpu") + tuple(b for b in vocabulary().backend_ids() if b not in ("plaidml", "vpu"))
    + ("hip", "dml", "level-zero")))


def device(text: str) -> str:
    import re

    v = text.strip()
    kinds = "|".join(re.escape(k) for k in DEVICE_KINDS)
    if re.fullmatch(rf"(?i)(?:{kinds})(?::\d{{1,3}})?", v) or re.fullmatch(r"(?i)[a-z][a-z0-9_]{1,80}\.\d{1,3}", v):
        return v
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a device: use one of {', '.join(DEVICE_KINDS)} (optionally with an index, "
        "e.g. cuda:1) or a PlaidML id such as llvm_cpu.0")


def replay_inputs(args: argparse.Namespace) -> "list[str]":
    """What a command that scans reads: the replayed report file, or every file of the bundle folder."""
    replay, _via = replay_request(args)
    if not replay:
        return []
    if os.path.isdir(replay):
        try:
            return [os.path.join(replay, n) for n in os.listdir(replay)]
        except OSError:
            return []
    return [replay]


def refuse_overwriting_an_input(output: Optional[str], inputs: "list[str]", option: str = "-o") -> None:
    """Refuse an output file that is one of the command's inputs (the same file by any path: a link,
    `./x`, a hard link), before anything is read: writing it would replace what is being read."""
    if not output:
        return
    from ..ui import display_path

    try:
        out = os.stat(output)
    except OSError:
        return  # a file still to be made is no input
    import stat

    if not stat.S_ISREG(out.st_mode):
        return  # /dev/null, /dev/stdout, a FIFO: written through, nothing is replaced
    for path in inputs:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
            same = "" if os.path.abspath(path) == os.path.abspath(output) else f" (as {display_path(path)})"
            raise MlprobeError(
                f"{option} {display_path(output)} is also an input of this command{same}",
                why="writing the output there would replace the file being read",
                next_step=f"pass {option} a new file (or another existing one that is no input)",
                ref="E005", exit_code=EXIT_USAGE)
