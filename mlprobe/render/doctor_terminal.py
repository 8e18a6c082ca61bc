"""`mlprobe doctor` on a terminal: the verdict first, then each finding with its evidence, fix and
source, then what the frameworks saw and which rules could not decide."""

from __future__ import annotations

import sys
from typing import Any, List, Optional, TextIO

from ..model.doctor import DoctorResult

_WHOLE = "\0"  # marks a line that is printed whole (not wrapped)
_MARK = {"blocking": "BLOCKING", "warning": "WARNING ", "info": "info    "}


def render_doctor(result: DoctorResult, verbose: bool = False, out: Optional[TextIO] = None) -> None:
    from ..ui import output_width

    stream: Any = out or sys.stdout
    lines: List[str] = []
    where = result.source.get("bundle") if result.source.get("kind") == "replay" else "this machine"
    lines.append(f"mlprobe doctor: {where}" + (f", Python {result.python}" if result.python else ""))
    lines.append("")
    for f in result.findings:
        lines.append(f"{_MARK.get(f.severity, f.severity)}  {f.title}  [{f.rule}]")
        if f.detail:
            lines.append(f"    why: {f.detail}")
        for e in f.evidence:
            lines.append(f"    evidence ({e.capture}): {e.line}" + (f"  ({e.note})" if e.note else ""))
        for i, fix in enumerate(f.fix):
            # a fix is a command or the exact change to make: copied as it is, never wrapped
            lines.append(_WHOLE + ("    fix: " if i == 0 else "         ") + fix)
        if verbose or f.severity == "blocking":
            lines.append(f"    source: {f.source}")
        lines.append("")
    if result.frameworks:
        lines.append("What the frameworks list (" + (result.enumeration or "") + "):")
        for fw in result.frameworks:
            shown = ", ".join(fw.devices) or "no device"
            lines.append(f"    {fw.name} {fw.version or ''}: {shown}" + (f"; error: {fw.error}" if fw.error else ""))
        lines.append("")
    elif result.enumeration and result.enumeration.startswith(("asked ", "replayed ")):
        # they were asked: none of the frameworks doctor checks is installed there
        lines.append(f"No framework answered: none of torch, TensorFlow, JAX or PlaidML is installed there "
                     f"({result.enumeration})")
    elif result.enumeration:
        lines.append(f"The frameworks were not asked: {result.enumeration}")
        lines.append("")
    if result.settings:
        lines.append("The venv's settings at each start (plain: an IDE, Jupyter, cron, `uv run`; activated: a shell):")
        for st in result.settings:
            lines.append(f"    {st.name}: plain {st.plain!r} ({st.plain_from}), activated {st.activated!r} "
                         f"({st.activated_from}); mlprobe wrote {st.wanted!r} into {', '.join(st.places) or 'nowhere'}")
        lines.append("")
    if result.libraries:
        lines.append("Shared libraries the frameworks' processes loaded (family members" +
                     ("" if verbose else "; -v lists every one") + "):")
        for load in result.libraries:
            listed = [lib for lib in load.libraries if verbose or lib.family]
            lines.append(f"    {' + '.join(load.frameworks) or 'the pasted listing'}: {len(load.libraries)} loaded"
                         + (f"; error: {load.error}" if load.error else ""))
            for lib in listed:
                lines.append(f"        {lib.path}  ({lib.origin}" + (f", {lib.family}" if lib.family else "") + ")")
        lines.append("")
    unknown = [r for r in result.rules if r.outcome == "unknown"]
    if unknown and verbose:
        lines.append("Could not decide:")
        lines.extend(f"    {r.rule}: {r.why}" for r in unknown)
        lines.append("")
    checked = sum(1 for r in result.rules if r.outcome != "unknown")
    lines.append(f"{result.summary}")
    lines.append(f"({checked} of {len(result.rules)} checks decided"
                 + (f"; {len(unknown)} lacked a capture, -v lists them" if unknown and not verbose else "") + ")")
    width = output_width(stream)
    stream.write("\n".join(_shown(line, width) for line in lines) + "\n")


def _shown(line: str, width: int) -> str:
    from ..ui import safe_line
    from ..width import wrap_plain

    if line.startswith(_WHOLE):
        return safe_line(line[len(_WHOLE):])
    return "\n".join(wrap_plain(safe_line(line), width))
