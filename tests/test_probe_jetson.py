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


# -- a Jetson without its device tree (inside a container; nvidia-smi's reduced JetPack 6 table) --

SMI_ONLY = ["linux-arm64-jetson-agx-orin-64gb-jp621-nvidia-smi-jetson-containers-1403",
            "linux-arm64-jetson-orin-jp6-nvidia-smi-ultralytics-20680",
            "linux-arm64-jetson-agx-orin-jp6-nvidia-smi-l-cuda-na-jetpack-nixos-371",
            "linux-arm64-jetson-orin-jp60-nvidia-smi-540.3-driver-na-oe4t-17"]


@pytest.mark.parametrize("folder", SMI_ONLY)
def test_nvidia_smi_alone_names_the_orin_family_and_the_jetson_road(folder: str) -> None:
    report = _report(folder)
    (gpu,) = report["gpus"]  # nvidia-smi's row and the Jetson probe's entry are one device
    assert (gpu["name"], gpu["compute_capability"], gpu["integrated"]) == ("NVIDIA Jetson Orin", "8.7", True)
    assert gpu["sources"] == ["jetson", "nvidia"] and gpu["pci_bus_id"] is None
    assert report["runtimes"]["cuda"]["jetson"]["soc"] == "tegra234"
    assert report["runtimes"]["cuda"]["jetson"]["jetpack"] == "6.x"
    assert report["cpu"]["arch"] == "aarch64" and "Jetson" in report["cpu"]["arch_evidence"]
    plan = make_plan(report, framework="torch", python="3.10")
    assert plan["top"]["torch"] == "torch-jetson"
    rec = next(r for r in plan["recommended"] if r["recipe"] == "torch-jetson")
    assert rec["index_url"] == "https://pypi.jetson-ai-lab.io/jp6/cu126"


def test_the_table_keeps_a_row_without_bus_id_only_for_a_tegra_gpu() -> None:
    from mlprobe.probes.nvidia import parse_smi_table

    text = (FIXTURES / SMI_ONLY[0] / "nvidia-smi.txt").read_text()
    (gpu,) = parse_smi_table(text).gpus
    assert (gpu.index, gpu.name, gpu.pci_bus_id, gpu.memory_mib) == (0, "Orin (nvgpu)", None, None)
    # the same row with another name is not a GPU row: an N/A bus cell alone proves nothing
    assert parse_smi_table(text.replace("Orin (nvgpu)", "Orin        ")).gpus == []


def test_a_jetson_cuda_version_is_not_guessed_from_the_desktop_driver_table() -> None:
    report = _report(SMI_ONLY[2])  # CUDA Version: N/A
    assert report["runtimes"]["cuda"]["version"] is None
    assert report["runtimes"]["cuda"]["driver_version"] == "540.4.0"


# /proc/cpuinfo lines as Jetsons print them: Xavier NX (hrw/arm-socs-table issue #26, NVIDIA Carmel) and
# an Orin's Cortex-A78AE (0x41/0xd42, Dr-Noob/cpufetch issue #275: IM=0x41 P=0xD42).
CARMEL = "processor\t: 0\nCPU implementer\t: 0x4e\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0x004\n"
A78AE = "processor\t: 0\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: 0xd42\n"
R35 = (FIXTURES / ORIN / "nv_tegra_release.txt").read_text()  # R35.3.1: Xavier and Orin both run it


@pytest.mark.parametrize("files, soc, cc", [
    ({"nv_tegra_release.txt": R35, "proc-cpuinfo.txt": CARMEL}, "tegra194", "7.2"),
    ({"nv_tegra_release.txt": R35, "proc-cpuinfo.txt": A78AE}, "tegra234", "8.7"),
    ({"nv_tegra_release.txt": R35, "lscpu.txt": "Architecture: aarch64\nModel name: Cortex-A78AE\n"}, "tegra234", "8.7"),
    ({"nv_tegra_release.txt": "# R36 (release), REVISION: 4.4, GCID: 41062509, BOARD: generic, EABI: aarch64\n"},
     "tegra234", "8.7"),
    ({"nv_tegra_release.txt": R35}, None, None),  # Xavier or Orin: the release alone does not say
])
def test_the_release_file_and_the_cpu_cores_narrow_the_soc(files: Dict[str, str], soc: Any, cc: Any) -> None:
    out = jetson.probe(DictHost(files))
    (gpu,) = out.gpus
    assert out.runtimes.cuda is not None and out.runtimes.cuda.jetson is not None
    assert (out.runtimes.cuda.jetson.soc, gpu.compute_capability) == (soc, cc)
    if soc is None:
        assert gpu.name == "NVIDIA Jetson" and any("tegra194, tegra234" in n for n in gpu.notes)


def test_facts_that_disagree_leave_no_soc() -> None:
    # an Orin GPU name with Xavier's cores: no SoC has both, so none is claimed
    socs, why = jetson.narrow_socs("Orin (nvgpu)", 35, [("0x4e", "0x004")])
    assert socs == [] and len(why) == 3


def test_a_desktop_gpu_is_not_a_tegra_gpu() -> None:
    table = (FIXTURES / "linux-nvidia-h100-smi" / "nvidia-smi.txt").read_text()
    assert jetson.smi_tegra_gpu([table]) is None
    assert jetson.probe(DictHost({"nvidia-smi.txt": table})).gpus == []
