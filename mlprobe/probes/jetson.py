"""NVIDIA Jetson / Tegra boards, which have no nvidia-smi: the L4T release file (/etc/nv_tegra_release)
and the device tree's `model` and `compatible` (/proc/device-tree/). The SoC named in `compatible`
(`nvidia,tegra234`) gives the integrated GPU and its compute capability, the release line
(`# R35 (release), REVISION: 3.1, ...`) the L4T version and through it the JetPack
(knowledge/jetson.json). `compatible` is a list of NUL-terminated strings; pasted into a ticket the
NULs vanish (`nvidia,p3768-0000+p3767-0003nvidia,tegra234`), so both forms are read."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ..errors import ParseError
from ..model import knowledge as kb
from ..model.facts import Contribution, CudaRuntime, GpuFacts, JetsonInfo, Runtimes
from ..scan.capture import Host
from ._util import nothing_read, parse_capture

SOURCE = "jetson"
_RELEASE = re.compile(r"#\s*R(\d+)\s*\(([^)]*)\)\s*,\s*REVISION:\s*([\d.]+)(.*)$", re.M)


def parse_nv_tegra_release(text: str) -> Dict[str, Any]:
    """`# R35 (release), REVISION: 3.1, GCID: 32827747, BOARD: t186ref, EABI: aarch64, DATE: ...`
    -> {"l4t": "35.3.1", "l4t_major": 35, "kind": "release", "board": "t186ref", "gcid": ...}."""
    m = _RELEASE.search(text.replace("\x00", ""))
    if not m:
        raise ParseError("no '# R<nn> (release), REVISION: x.y' line: not an /etc/nv_tegra_release")
    revision = m.group(3).strip(".")
    parts = revision.split(".")
    l4t = ".".join([m.group(1)] + parts + ["0"] * max(0, 2 - len(parts)))
    fields = dict(re.findall(r"\b(GCID|BOARD|EABI|DATE):\s*([^,]+)", m.group(4)))
    return {"l4t": l4t, "l4t_major": int(m.group(1)), "kind": m.group(2).strip(), "board": fields.get("BOARD", "").strip() or None,
            "gcid": fields.get("GCID", "").strip() or None}


def parse_compatible(text: str) -> List[str]:
    """The device tree's `compatible` strings: NUL-separated as the kernel gives them, or run together
    as a paste prints them (a new entry starts at each `vendor,` prefix after the first)."""
    if "\x00" in text:
        items = [x.strip() for x in text.split("\x00")]
    else:
        items = [x.strip() for x in re.split(r"(?<=[0-9a-z])(?=(?:nvidia|arm|qcom),)", text.strip())]
    items = [x for x in items if re.fullmatch(r"[a-z0-9-]+,[A-Za-z0-9+._-]+", x)]
    if not items:
        raise ParseError("no `vendor,name` entries in the device tree's compatible list")
    return items


# a shell prompt pasted before the output (`user@host:~$ cat /proc/device-tree/model`)
_PROMPT_LINE = re.compile(r"^[^\n]*(?:[$#%>]\s+(?:sudo\s+)?(?:cat|tr|xargs)\b[^\n]*|[$#>])\s*\n")


def parse_model(text: str) -> str:
    text = _PROMPT_LINE.sub("", text.replace("\r\n", "\n"), count=1)
    model = " ".join(text.replace("\x00", " ").split())
    if not model:
        raise ParseError("the device tree's model is empty")
    return model


def soc_row(compatible: List[str]) -> Optional[Dict[str, Any]]:
    names = {c.split(",", 1)[1] for c in compatible if c.startswith("nvidia,")}
    return next((r for r in kb.rows("jetson", "socs") if r.get("soc") in names), None)


def jetpack_for(l4t: Optional[str]) -> Optional[str]:
    """The JetPack release of an L4T release: exact where the table lists it, else its major series."""
    if not l4t:
        return None
    exact = next((str(r["jetpack"]) for r in kb.rows("jetson", "releases") if r.get("l4t") == l4t), None)
    if exact:
        return exact
    major = int(l4t.split(".")[0])
    row = next((r for r in kb.rows("jetson", "l4t_majors") if r.get("l4t_major") == major), None)
    return f"{row['jetpack_major']}.x" if row else None


def probe(host: Host) -> Contribution:
    out = Contribution()
    errors: List[str] = []
    release = parse_capture(host, "nv_tegra_release.txt", parse_nv_tegra_release, errors)
    compatible = parse_capture(host, "device-tree-compatible.txt", parse_compatible, errors)
    model = parse_capture(host, "device-tree-model.txt", parse_model, errors)
    row = soc_row(compatible) if compatible else None
    is_tegra = row is not None or release is not None or bool(model and re.search(r"\bJetson\b", model, re.I))
    if not is_tegra:
        if compatible is not None or model is not None:
            out.status = "absent"
            out.error = "the device tree names no NVIDIA Tegra SoC (not a Jetson board)"
            return out
        return nothing_read(out, errors, "no /etc/nv_tegra_release or device tree capture (not a Jetson board)")
    notes: List[str] = []
    if row is None:
        notes.append("the device tree's compatible list names no Tegra SoC mlprobe knows: the GPU's compute "
                     "capability is unknown")
    l4t = release["l4t"] if release else None
    jetpack = jetpack_for(l4t)
    family = row["family"] if row else None
    name = model or (f"NVIDIA Jetson {family}" if family else "NVIDIA Jetson")
    out.gpus = [GpuFacts(
        vendor="nvidia",
        name=f"{name} ({family} GPU)" if family and family.split()[0].lower() not in name.lower() else name,
        compute_capability=row["compute_capability"] if row else None,
        architecture=row["architecture"] if row else None,
        integrated=True,
        apis=("cuda",),
        sources=(SOURCE,),
        notes=tuple(notes),
    )]
    out.runtimes = Runtimes(cuda=CudaRuntime.of(jetson=JetsonInfo(
        l4t=l4t, jetpack=jetpack, soc=row["soc"] if row else None, module=model,
        compatible=tuple(compatible or ()), board=release["board"] if release else None,
    )))
    if errors:
        out.warnings.extend(errors)
    return out


__all__ = ["jetpack_for", "parse_compatible", "parse_model", "parse_nv_tegra_release", "probe", "soc_row"]
