from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest
from hypothesis import HealthCheck, given, settings

from mlprobe.scan.capture import decode
from mlprobe.errors import ParseError
from mlprobe.scan.host import ReplayHost
from mlprobe.probes import pci, rocm

from .conftest import FIXTURES
from .fuzz import examples, mutated
from .hosts import DictHost

LSPCI = sorted(FIXTURES.glob("*/lspci.txt"))
KNOWLEDGE = Path(pci.__file__).resolve().parent.parent / "knowledge"


# lspci -nn lines of the kinds a scan meets: an Intel iGPU beside an NVIDIA card (with its HDMI
# audio function), an AMD card, an Arc card, a server BMC, a Gaudi accelerator, WSL's paravirtual
# adapter, a QEMU VGA, and a device pci.ids does not name yet.
MIXED = """\
00:00.0 Host bridge [0600]: Intel Corporation 8th Gen Core Processor Host Bridge/DRAM Registers [8086:3ec2] (rev 07)
00:02.0 VGA compatible controller [0300]: Intel Corporation CoffeeLake-S GT2 [UHD Graphics 630] [8086:3e92] (rev 02)
01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GA102 [GeForce RTX 3090] [10de:2204] (rev a1)
01:00.1 Audio device [0403]: NVIDIA Corporation GA102 High Definition Audio Controller [10de:1aef] (rev a1)
03:00.0 VGA compatible controller [0300]: Advanced Micro Devices, Inc. [AMD/ATI] Navi 22 [Radeon RX 6700/6700 XT/6750 XT / 6800M/6850M XT] [1002:73df] (rev c1)
03:00.1 Audio device [0403]: Advanced Micro Devices, Inc. [AMD/ATI] Navi 21/23 HDMI/DP Audio Controller [1002:ab28]
04:00.0 VGA compatible controller [0300]: Intel Corporation DG2 [Arc A770] [8086:56a0] (rev 08)
05:00.0 VGA compatible controller [0300]: ASPEED Technology, Inc. ASPEED Graphics Family [1a03:2000] (rev 41)
06:00.0 Processing accelerators [1200]: Habana Labs Ltd. HL-2000 AI Training Accelerator [Gaudi] [1da3:1000] (rev 01)
07:00.0 VGA compatible controller [0300]: Advanced Micro Devices, Inc. [AMD/ATI] Device 7550 [1002:7550] (rev c0)
08:00.0 VGA compatible controller [0300]: Device [1234:1111] (rev 02)
4a8f:00:00.0 3D controller [0302]: Microsoft Corporation Basic Render Driver [1414:008e]
"""


def _by_bus(gpus: list) -> Dict[str, Any]:
    return {g.pci_bus_id: g for g in gpus}


def test_strix_halo_lspci_line_is_the_apu() -> None:
    (dev,) = pci.parse_lspci(decode((FIXTURES / "linux-amd-strix-halo-gfx1151-apu-npu-rocminfo/lspci.txt").read_bytes()))
    assert (dev.bus_id, dev.class_code, dev.vendor_id, dev.device_id, dev.revision) == (
        "0000:c5:00.0", "0380", "0x1002", "0x1586", "0xc1")
    assert dev.name == "Radeon Graphics / Radeon 8050S Graphics / Radeon 8060S Graphics"
    (g,) = pci.probe(ReplayHost(FIXTURES / "linux-amd-strix-halo-gfx1151-apu-npu-rocminfo")).gpus
    assert (g.vendor, g.gfx_target, g.integrated, g.architecture, g.apis) == ("amd", "gfx1151", True, "RDNA3.5", ())


def test_a_vm_with_no_display_device_has_no_gpu() -> None:
    folder = FIXTURES / "linux-nogpu-amd-epyc-pocl-opencl-cpu"
    devices = pci.parse_lspci(decode((folder / "lspci.txt").read_bytes()))
    assert len(devices) == 6 and not any(d.is_accelerator_class for d in devices)
    c = pci.probe(ReplayHost(folder))
    assert c.status == "ok" and c.gpus == []


def test_display_classes_vendors_and_names() -> None:
    gpus = _by_bus(pci.gpus_from(pci.parse_lspci(MIXED), []))
    assert sorted(gpus) == ["0000:00:02.0", "0000:01:00.0", "0000:03:00.0", "0000:04:00.0", "0000:06:00.0",
                            "0000:07:00.0"]
    igpu, rtx, rx, arc, gaudi, navi48 = (gpus[b] for b in sorted(gpus))
    # the Intel table names the product as the runtimes do (lspci: "UHD Graphics 630", "Arc A770")
    assert (igpu.vendor, igpu.name, igpu.integrated) == ("intel", "Intel(R) UHD Graphics 630", True)
    assert (arc.vendor, arc.name, arc.integrated) == ("intel", "Intel(R) Arc(TM) A770 Graphics", False)
    assert (rtx.vendor, rtx.name, rtx.integrated, rtx.pci_device_id) == ("nvidia", "GeForce RTX 3090", None, "0x2204")
    assert (rx.vendor, rx.gfx_target, rx.integrated, rx.architecture) == ("amd", "gfx1031", False, "RDNA2")
    assert rx.name == "Radeon RX 6700/6700 XT/6750 XT / 6800M/6850M XT"
    assert (gaudi.vendor, gaudi.name) == ("habana", "Gaudi")
    assert (navi48.name, navi48.gfx_target) == (None, "gfx1201")  # "Device 7550" is no name
    assert all(g.apis == () and g.sources == ("pci",) for g in gpus.values())


def test_virtual_adapters_are_not_accelerators() -> None:
    assert pci.virtual_display("0x1a03", "0x2000") == "bmc"
    assert pci.virtual_display("0x1414", "0x008e") == "hyper-v"
    assert pci.virtual_display("0x1234", "0x1111") == "qemu-std-vga"
    assert pci.virtual_display("0x1af4", "0x1050") == "virtio-gpu"
    assert pci.virtual_display("0x1af4", "0x1042") is None  # a virtio disk is not in the display table
    assert pci.virtual_display("0x1002", "0x73df") is None
    assert pci.intel_discrete("0x56a0") == "DG2" and pci.intel_discrete("0xe20b") == "BMG"
    assert pci.intel_discrete("0x3e92") is None


def test_intel_integrated_by_id_table_else_by_slot() -> None:
    # an iGPU passed through into a VM sits elsewhere; its id still says integrated (intel_gpus.json)
    passthrough = "06:10.0 VGA compatible controller [0300]: Intel Corporation Alder Lake-P GT2 [Iris Xe Graphics] [8086:46a6] (rev 0c)\n"
    (g,) = pci.gpus_from(pci.parse_lspci(passthrough), [])
    assert g.integrated is True
    # an id no table knows: 00:02.0 is the integrated GPU's slot; anywhere else stays unknown
    unknown = ("00:02.0 VGA compatible controller [0300]: Intel Corporation Device [8086:fff0]\n"
               "06:10.0 VGA compatible controller [0300]: Intel Corporation Device [8086:fff1]\n")
    assert [g.integrated for g in pci.gpus_from(pci.parse_lspci(unknown), [])] == [True, None]


def test_plain_lspci_without_ids() -> None:
    text = "01:00.0 VGA compatible controller: NVIDIA Corporation GA102 [GeForce RTX 3090] (rev a1)\n" \
           "00:1f.3 Audio device: Intel Corporation Cannon Lake PCH cAVS (rev 10)\n"
    (g,) = pci.gpus_from(pci.parse_lspci(text), [])
    assert (g.vendor, g.name, g.pci_vendor_id) == ("nvidia", "GeForce RTX 3090", None)


def test_revision_picks_the_target_where_the_table_says_so() -> None:
    rows = json.loads((KNOWLEDGE / "amd_gfx.json").read_text(encoding="utf-8"))["rows"]
    row = next((r for r in rows if r.get("revision_exceptions")), None)
    if row is None:
        pytest.skip("amd_gfx.json has no revision exceptions")
    rev, target = next(iter(row["revision_exceptions"].items()))
    assert rocm.amd_device(row["pci_device_id"], rev)[0] == target
    assert rocm.amd_device(row["pci_device_id"])[0] == row["gfx_target"]
    line = (f"0a:00.0 VGA compatible controller [0300]: Advanced Micro Devices, Inc. [AMD/ATI] Device "
            f"[1002:{row['pci_device_id'][2:]}] (rev {rev[2:]})\n")
    (g,) = pci.gpus_from(pci.parse_lspci(line), [])
    assert g.gfx_target == target


DRM = """\
card0 0000:03:00.0 0x1002 0x73df amdgpu
card1 0000:00:02.0 0x8086 0x3e92 i915
card2 0000:01:00.0 0x10de 0x2204 nouveau
card3 0000:05:00.0 0x1a03 0x2000 ast
card4 0000:0b:00.0 0x10de 0x2684 vfio-pci
card5 - 0x1af4 0x1050 virtio-pci
"""


def test_drm_cards_alone_and_beside_lspci() -> None:
    cards = pci.parse_drm_drivers(DRM)
    assert [(c.card, c.bus_id, c.driver) for c in cards][:3] == [
        ("card0", "0000:03:00.0", "amdgpu"), ("card1", "0000:00:02.0", "i915"), ("card2", "0000:01:00.0", "nouveau")]
    alone = _by_bus(pci.probe(DictHost({"drm-drivers.txt": DRM})).gpus)
    assert sorted(alone) == ["0000:00:02.0", "0000:01:00.0", "0000:03:00.0", "0000:0b:00.0"]
    assert alone["0000:03:00.0"].gfx_target == "gfx1031" and alone["0000:03:00.0"].notes == ()
    assert "nouveau" in alone["0000:01:00.0"].notes[0]
    assert "vfio-pci" in alone["0000:0b:00.0"].notes[0]
    beside = _by_bus(pci.probe(DictHost({"drm-drivers.txt": DRM, "lspci.txt": MIXED})).gpus)
    assert len(beside) == 6 and "nouveau" in beside["0000:01:00.0"].notes[0]
    assert beside["0000:01:00.0"].name == "GeForce RTX 3090"


def test_garbage_and_absence() -> None:
    with pytest.raises(ParseError):
        pci.parse_lspci("bash: lspci: command not found\n")
    with pytest.raises(ParseError):
        pci.parse_drm_drivers("no cards here\n")
    assert pci.parse_lspci("") == [] and pci.parse_drm_drivers("\n") == []
    assert pci.probe(DictHost({})).status == "absent"
    broken = pci.probe(DictHost({"lspci.txt": "pcilib: Cannot open /proc/bus/pci\n"}))
    assert broken.status == "error" and "lspci" in (broken.error or "")


def test_pci_display_table_is_sourced() -> None:
    doc = json.loads((KNOWLEDGE / "pci_display.json").read_text(encoding="utf-8"))
    keys = set(doc["source_key"])
    for row in doc["virtual_display"] + doc["intel_discrete"]:
        assert row["source"] in keys, row


# -- mutation ---------------------------------------------------------------------------------

CASES = [(p.parent.name, decode(p.read_bytes()), "lspci") for p in LSPCI] + [
    ("mixed", MIXED, "lspci"), ("drm", DRM, "drm")]


@pytest.mark.parametrize("name, text, kind", CASES, ids=[c[0] for c in CASES])
def test_pci_parsers_survive_mutation(name: str, text: str, kind: str) -> None:
    def gpus(t: str) -> int:
        if kind == "lspci":
            return len(pci.gpus_from(pci.parse_lspci(t), []))
        return len(pci.gpus_from([], pci.parse_drm_drivers(t)))

    base = gpus(text)

    @settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutated(text))
    def check(mut: str) -> None:
        try:
            assert gpus(mut) <= base
        except ParseError:
            pass

    check()
