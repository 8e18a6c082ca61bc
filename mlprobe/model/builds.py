"""Framework builds, known without importing them: the distributions mlprobe looks for, their dist-info
folder names, and a build's flavour from its version's local label (torch 2.13.0+cpu, +cu130,
+rocm6.3) or torch/version.py (cuda / hip)."""

from __future__ import annotations

import re
from typing import Dict, Optional

FRAMEWORKS = (
    "torch", "torchvision", "torchaudio", "tensorflow", "tensorflow-cpu", "tensorflow-gpu",
    "tensorflow-intel", "tensorflow-macos", "tensorflow-metal", "tensorflow-directml",
    "tensorflow-directml-plugin", "tensorflow-rocm", "torch-directml", "intel-extension-for-pytorch",
    "intel-extension-for-tensorflow", "plaidml", "plaidml-keras", "keras", "jax", "jaxlib",
    "jax-cuda12-plugin", "jax-cuda13-plugin", "jax-rocm60-plugin", "jax-rocm7-plugin", "onnxruntime",
    "onnxruntime-gpu", "onnxruntime-directml", "onnxruntime-rocm", "onnxruntime-openvino", "mlx",
    "openvino", "pyopencl",
)
WANTED = set(FRAMEWORKS)
DIST_RE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._]*?)-(?P<version>[0-9][^-]*?)\.(dist-info|egg-info)$")

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
