"""Jetson / Tegra boards without nvidia-smi: the L4T release file and the device tree name the module,
the SoC's GPU and the JetPack; the plan picks the Jetson road for that JetPack."""

from __future__ import annotations

import copy
from typing import Any, Dict

import pytest

from mlprobe.errors import ParseError
from mlprobe.plan.planner import make_plan
from mlprobe.probes import jetson
from mlprobe.scan.host import ReplayHost
from mlprobe.scan.run import facts_to_report, scan

from .conftest import FIXTURES
from .hosts import DictHost

ORIN = "linux-arm64-jetson-orin-nano-jp511-l4t-device-tree"
THOR = "linux-arm64-jetson-agx-thor-jp7-l4t-device-tree"


def _report(folder: str) -> Dict[str, Any]:
    return facts_to_report(scan(ReplayHost(FIXTURES / folder)))


def test_release_line() -> None:
    text = (FIXTURES / ORIN / "nv_tegra_release.txt").read_text()
    got = jetson.parse_nv_tegra_release(text)
    assert (got["l4t"], got["l4t_major"], got["board"], got["kind"]) == ("35.3.1", 35, "t186ref", "release")
    assert jetson.parse_nv_tegra_release("# R36 (release), REVISION: 4\n")["l4t"] == "36.4.0"


@pytest.mark.parametrize("text", ["", "R35 release 3.1", "# R (release), REVISION: x"])
def test_release_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        jetson.parse_nv_tegra_release(text)


def test_compatible_pasted_and_as_the_kernel_gives_it() -> None:
    pasted = (FIXTURES / ORIN / "device-tree-compatible.txt").read_text()
    want = ["nvidia,p3768-0000+p3767-0003", "nvidia,p3768-0000+p3767-0005", "nvidia,p3767-0003",
            "nvidia,p3767-0005", "nvidia,tegra234", "nvidia,tegra23x"]
    assert jetson.parse_compatible(pasted) == want
    assert jetson.parse_compatible("\x00".join(want) + "\x00") == want
    with pytest.raises(ParseError):
        jetson.parse_compatible("   \n")


@pytest.mark.parametrize("l4t, jetpack", [("35.3.1", "5.1.1"), ("36.4.3", "6.2"), ("38.2.0", "7.0"),
                                           ("32.7.4", "4.x"), ("36.9.9", "6.x"), ("99.0.0", None), (None, None)])
def test_jetpack_for(l4t: Any, jetpack: Any) -> None:
    assert jetson.jetpack_for(l4t) == jetpack


def test_a_raspberry_pi_device_tree_is_not_a_jetson() -> None:
    out = jetson.probe(DictHost({"device-tree-compatible.txt": "raspberrypi,4-model-b\x00brcm,bcm2711\x00",
                                 "device-tree-model.txt": "Raspberry Pi 4 Model B Rev 1.4\x00"}))
    assert out.status == "absent" and out.gpus == []


def test_an_unknown_soc_keeps_the_board_and_says_the_gpu_is_unknown() -> None:
    out = jetson.probe(DictHost({"device-tree-compatible.txt": "nvidia,p9999-0000\x00nvidia,tegra999\x00",
                                 "device-tree-model.txt": "NVIDIA Jetson Future Developer Kit\x00"}))
    assert out.gpus and out.gpus[0].compute_capability is None and "unknown" in out.gpus[0].notes[0]


@pytest.mark.parametrize("folder, cc, soc", [(ORIN, "8.7", "tegra234"), (THOR, "11.0", "tegra264")])
def test_fixture_scan(folder: str, cc: str, soc: str) -> None:
    report = _report(folder)
    (gpu,) = report["gpus"]
    assert gpu["compute_capability"] == cc and gpu["integrated"] is True and gpu["sources"] == ["jetson"]
    assert report["runtimes"]["cuda"]["jetson"]["soc"] == soc and report["os"]["system"] == "Linux"


def test_orin_on_jetpack5_rejects_the_sbsa_wheels_and_names_nvidias_wheel_files() -> None:
    plan = make_plan(_report(ORIN), framework="torch")
    why = {r["recipe"]: " ".join(r["reasons"]) for r in plan["rejected"]}
    assert "SBSA" in why["torch-cuda"] and "Jetson" in why["torch-cuda"]
    assert "jp/v512" in why["torch-jetson"] and "JetPack 5.1.1" in why["torch-jetson"]
    assert plan["top"]["torch"] == "torch-cpu"


def test_orin_on_jetpack6_gets_the_jetson_ai_lab_index() -> None:
    report = copy.deepcopy(_report(ORIN))
    report["runtimes"]["cuda"]["jetson"].update(l4t="36.4.3", jetpack="6.2")
    plan = make_plan(report, framework="torch", python="3.10")
    assert plan["top"]["torch"] == "torch-jetson"
    rec = next(r for r in plan["recommended"] if r["recipe"] == "torch-jetson")
    assert rec["index_url"] == "https://pypi.jetson-ai-lab.io/jp6/cu126"
    # the wheels are cp310: another Python does not fit
    other = make_plan(report, framework="torch", python="3.12")
    assert other["top"]["torch"] != "torch-jetson"


def test_thor_on_jetpack7_uses_pytorchs_aarch64_cuda_wheels() -> None:
    plan = make_plan(_report(THOR), framework="torch")
    assert plan["top"]["torch"] == "torch-cuda"
    assert any("Jetson board" in w for w in plan["warnings"])


def test_a_pasted_prompt_line_is_not_part_of_the_model() -> None:
    from mlprobe.probes.jetson import parse_model

    pasted = "mkowalczyk@zephyr-lab-07:~$ cat /proc/device-tree/model\nNVIDIA Jetson AGX Thor Developer Kit\x00"
    assert parse_model(pasted) == "NVIDIA Jetson AGX Thor Developer Kit"
    assert parse_model("NVIDIA Jetson Orin Nano Developer Kit\x00") == "NVIDIA Jetson Orin Nano Developer Kit"
