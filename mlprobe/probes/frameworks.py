"""Installed frameworks, found without importing them: dist-info folders on sys.path (live),
mlprobe-frameworks.json or pip-list.txt (replay). Build flavour from the version's local label
(torch 2.13.0+cpu, +cu130, +rocm6.3) or torch/version.py (cuda / hip)."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ..errors import ParseError
from ..model.facts import Contribution, FrameworkFacts
from ..scan.capture import Host
from ._util import first_parsed, load_json, nothing_read

FRAMEWORKS = (
    "torch", "torchvision", "torchaudio", "tensorflow", "tensorflow-cpu", "tensorflow-gpu",
    "tensorflow-intel", "tensorflow-macos", "tensorflow-metal", "tensorflow-directml",
    "tensorflow-directml-plugin", "tensorflow-rocm", "torch-directml", "intel-extension-for-pytorch",
    "intel-extension-for-tensorflow", "plaidml", "plaidml-keras", "keras", "jax", "jaxlib",
    "jax-cuda12-plugin", "jax-cuda13-plugin", "jax-rocm60-plugin", "jax-rocm7-plugin", "onnxruntime",
    "onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-rocm", "onnxruntime-openvino", "mlx",
    "openvino", "pyopencl",
)
_WANTED = set(FRAMEWORKS)
_DIST_RE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._]*?)-(?P<version>[0-9][^-]*?)\.(dist-info|egg-info)$")

_FIXED_FLAVOUR = {
    "tensorflow-cpu": "cpu", "tensorflow-metal": "metal", "tensorflow-directml": "directml",
    "tensorflow-directml-plugin": "directml", "tensorflow-rocm": "rocm", "torch-directml": "directml",
    "onnxruntime-gpu": "cuda", "onnxruntime-directml": "directml", "onnxruntime-rocm": "rocm",
    "onnxruntime-openvino": "openvino", "onnxruntime": "cpu", "jax-cuda12-plugin": "cuda12",
    "jax-cuda13-plugin": "cuda13", "tensorflow-gpu": "cuda", "mlx": "metal",
}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_torch_version_py(text: str) -> Dict[str, Optional[str]]:
    out: Dict[str, Optional[str]] = {}
    for key in ("__version__", "cuda", "hip", "xpu", "git_version"):
        m = re.search(rf"^{key}\s*(?::[^=]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", text, re.M)
        if m:
            out[key] = m.group(1) or m.group(2)
    return out


def flavour(name: str, version: Optional[str], cuda: Optional[str] = None, hip: Optional[str] = None,
            system: Optional[str] = None) -> Optional[str]:
    if name in _FIXED_FLAVOUR:
        return _FIXED_FLAVOUR[name]
    local = version.split("+", 1)[1].lower() if version and "+" in version else None
    if name in ("torch", "torchvision", "torchaudio", "intel-extension-for-pytorch"):
        if local and re.match(r"^(cpu|cu\d+|rocm[\d.]+|xpu)", local):
            return re.match(r"^(cpu|cu\d+|rocm[\d.]+|xpu)", local).group(1)  # type: ignore[union-attr]
        if cuda:
            return "cu" + cuda.replace(".", "")
        if hip:
            return "rocm" + ".".join(hip.split(".")[:2])
        if name == "torch" and (cuda is not None or hip is not None or system == "Darwin"):
            return "cpu"
        return None
    if name == "jaxlib" and local:
        return local
    return None


def parse_frameworks_json(text: str) -> List[Dict[str, Any]]:
    doc = load_json(text, "mlprobe-frameworks.json")
    if not isinstance(doc, list):
        raise ParseError("mlprobe-frameworks.json is not a list")
    return [d for d in doc if isinstance(d, dict) and isinstance(d.get("name"), str)]


def parse_pip_list(text: str) -> List[Dict[str, Any]]:
    """`pip list` (columns) or `pip freeze` (name==version) output."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==|\s)\s*([0-9][^\s]*)", line)
        if m and not line.startswith(("Package", "---")):
            name = normalise(m.group(1))
            if name in _WANTED:
                out.append({"name": name, "version": m.group(2)})
    if not out and not re.search(r"^Package\s+Version", text, re.M) and "==" not in text:
        raise ParseError("not `pip list` or `pip freeze` output")
    return out


def probe(host: Host) -> Contribution:
    out = Contribution()
    system = host.info().get("system")
    errors: List[str] = []
    records = first_parsed(
        host, (("mlprobe-frameworks.json", parse_frameworks_json), ("pip-list.txt", parse_pip_list)), errors
    )
    if records is None:
        return nothing_read(out, errors, "no list of installed packages in this capture")
    for r in records:
        name = normalise(r["name"])
        version = r.get("version")
        out.frameworks.append(FrameworkFacts(
            name=name, version=version,
            flavour=flavour(name, version, r.get("cuda"), r.get("hip"), system),
            cuda=r.get("cuda"), hip=r.get("hip"), location=r.get("location"), source="python",
        ))
    return out
