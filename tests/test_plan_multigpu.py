"""How many GPUs the plan's framework will use: CUDA_VISIBLE_DEVICES (and ROCm's variables) read as
the runtimes read them, on real multi-GPU bundles, with the environment from the bundle's host.json."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any, Dict, Optional

import pytest

from mlprobe.cli import main
from mlprobe.plan.multigpu import parse_visible

FIX = Path(__file__).resolve().parent.parent / "fixtures"
UUIDS = ["GPU-aaaa1111-0000", "GPU-bbbb2222-0000", "GPU-bbbb3333-0000", "GPU-cccc4444-0000"]


@pytest.mark.parametrize("value,visible,note", [
    (None, (0, 1, 2, 3), None),
    ("", (), "set but empty"),
    ("-1", (), "-1 hides every GPU"),
    ("2,3", (2, 3), "hides 2 of the 4"),
    ("3,0", (3, 0), "hides 2 of the 4"),  # the order given is the order the framework numbers them
    (" 1 , 2 ", (1, 2), None),
    ("0,7,1", (0,), "entry '7' ends the list (there is no GPU 7 (the machine has 4)); '1' after it is ignored"),
    ("1,1,2", (1,), "GPU 1 is listed twice"),
    ("0,gpu0", (0,), "not a GPU index or UUID"),
    ("0,-1,2", (0,), "-1 hides every GPU from there on"),
    ("GPU-cccc", (3,), "hides 3 of the 4"),  # a unique UUID prefix is enough
    ("GPU-bbbb", (), "names several GPUs"),
    ("GPU-aaaa1111-0000,1", (0, 1), None),
    ("MIG-5a0e4f0c-1f6a-5f6d-9a8e-1c2b3d4e5f60", (), "a MIG instance"),
])
def test_parse_visible(value: Optional[str], visible: tuple, note: Optional[str]) -> None:
    vis = parse_visible(value, 4, UUIDS)
    assert vis.visible == visible
    if note is None:
        assert not [n for n in vis.notes if "ends the list" in n]
    else:
        assert any(note in n for n in vis.notes), vis.notes


def _plan(folder: Path, env: Optional[Dict[str, str]], tmp_path: Path) -> Dict[str, Any]:
    """`mlprobe plan --replay` of a copy of the bundle whose host.json carries `env`."""
    bundle = tmp_path / folder.name
    shutil.copytree(folder, bundle)
    if env is not None:
        host_path = bundle / "host.json"
        host = json.loads(host_path.read_text()) if host_path.is_file() else {"system": "Linux"}
        host["env"] = {**host.get("env", {}), **env}
        host_path.write_text(json.dumps(host))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["-q", "plan", "--replay", str(bundle), "--json"]) == 0
    doc = json.loads(out.getvalue())
    assert isinstance(doc, dict)
    return doc


def _use(plan: Dict[str, Any], framework: str = "torch") -> Dict[str, Any]:
    return next(u for u in plan["gpu_use"] if u["framework"] == framework)


def test_gh200_x4_uses_all_four_with_torchrun(tmp_path: Path) -> None:
    u = _use(_plan(FIX / "linux-nvidia-gh200-x4-smi", None, tmp_path))
    assert (u["recipe"], u["gpus"], u["visible"]) == ("torch-cuda", 4, [0, 1, 2, 3])
    assert u["devices"] == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    assert "torchrun --nproc_per_node=4" in u["how"] and u["variable"] is None and u["notes"] == []


def test_gh200_x4_with_cuda_visible_devices_hiding_two(tmp_path: Path) -> None:
    u = _use(_plan(FIX / "linux-nvidia-gh200-x4-smi", {"CUDA_VISIBLE_DEVICES": "2,3"}, tmp_path))
    assert (u["gpus"], u["visible"], u["devices"]) == (4, [2, 3], ["cuda:0", "cuda:1"])
    assert (u["variable"], u["value"]) == ("CUDA_VISIBLE_DEVICES", "2,3")
    assert "torchrun --nproc_per_node=2" in u["how"]
    assert any("hides 2 of the 4 GPUs" in n for n in u["notes"])


def test_gh200_x4_with_every_gpu_hidden(tmp_path: Path) -> None:
    u = _use(_plan(FIX / "linux-nvidia-gh200-x4-smi", {"CUDA_VISIBLE_DEVICES": "-1"}, tmp_path))
    assert u["visible"] == [] and u["devices"] == []
    assert "no GPU is visible" in u["how"]


@pytest.mark.parametrize("folder,gpus", [
    ("linux-nvidia-h100-x8-nv18-six-nics-topo", 8), ("linux-nvidia-v100-x8-dgx1-hybrid-cube-mesh-topo", 8),
    ("linux-nvidia-x4-pcie-phb-soc-mlx4-old-driver-topo", 4), ("linux-nvidia-x2-pcie-phb-pasted-spaces-topo", 2),
    ("linux-nvidia-a100-x8-nv12-pasted-spaces-topo", 8),
])
def test_topology_bundles_with_and_without_the_variable(folder: str, gpus: int, tmp_path: Path) -> None:
    plain = _plan(FIX / folder, None, tmp_path / "a")
    assert len(_use(plain)["visible"]) == gpus
    tf = _use(plain, "tensorflow")
    assert tf["devices"][-1] == f"/GPU:{gpus - 1}" and "MirroredStrategy" in tf["how"]
    hidden = _plan(FIX / folder, {"CUDA_VISIBLE_DEVICES": "1,0,9"}, tmp_path / "b")
    u = _use(hidden)
    assert u["visible"] == [1, 0]
    assert any("'9' ends the list" in n for n in u["notes"])


def test_uuid_from_the_capture(tmp_path: Path) -> None:
    u = _use(_plan(FIX / "linux-nvidia-h200-live-khronos-icd", {"CUDA_VISIBLE_DEVICES": "GPU-b7c38af6"}, tmp_path))
    assert u["visible"] == [0] and u["how"] == "torch uses cuda:0"


def test_rocm_variables_apply_in_order(tmp_path: Path) -> None:
    env = {"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "1"}
    u = _use(_plan(FIX / "linux-amd-mi300x-x4-rocminfo-rocm-smi", env, tmp_path))
    assert (u["backend"], u["gpus"], u["visible"]) == ("rocm", 4, [3])
    assert u["variable"] == "HIP_VISIBLE_DEVICES"


def test_mig_is_named(tmp_path: Path) -> None:
    u = _use(_plan(FIX / "linux-nvidia-a100-sxm4-mig-smi-xml", None, tmp_path))
    assert any("MIG is on" in n for n in u["notes"])
