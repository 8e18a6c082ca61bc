from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from hypothesis import HealthCheck, given, settings

from mlprobe.scan.capture import decode
from mlprobe.errors import ParseError
from mlprobe.scan.host import ReplayHost
from mlprobe.probes import rocm
from mlprobe.scan.run import facts_to_report, scan

from .conftest import FIXTURES
from .fuzz import examples, mutated
from .hosts import DictHost

ROCMINFO = sorted(FIXTURES.glob("*/rocminfo.txt"))
KNOWLEDGE = Path(rocm.__file__).resolve().parent.parent / "knowledge"


def _text(folder: str, name: str = "rocminfo.txt") -> str:
    return decode((FIXTURES / folder / name).read_bytes())


def _gpus(folder: str, env: Optional[Dict[str, str]] = None) -> list:
    if env:
        files = {p.name: decode(p.read_bytes()) for p in (FIXTURES / folder).iterdir() if p.name != "SOURCE.md"}
        return rocm.probe(DictHost(files, env)).gpus
    return rocm.probe(ReplayHost(FIXTURES / folder)).gpus


# -- gfx targets and bus ids ------------------------------------------------------------------


@pytest.mark.parametrize("value, gfx", [
    ("10.3.0", "gfx1030"), ("11.0.0", "gfx1100"), ("9.4.2", "gfx942"), ("9.0.10", "gfx90a"),
    ("100301", "gfx1031"), ("90010", "gfx90a"), ("90402", "gfx942"), ("110501", "gfx1151"),
    ("120001", "gfx1201"), (" 10.3.0\n", "gfx1030"), ("gfx1036", "gfx1036"),
    ("", None), ("0", None), ("10.3", None), ("abc", None), ("64.0.0", None), (None, None),
])
def test_gfx_from_version_reads_override_and_kfd_forms(value: Optional[str], gfx: Optional[str]) -> None:
    assert rocm.gfx_from_version(value) == gfx


@pytest.mark.parametrize("bdfid, domain, bus", [
    (768, 0, "0000:03:00.0"), (50432, 0, "0000:c5:00.0"), (9728, 0, "0000:26:00.0"),
    (0x050B, 0, "0000:05:01.3"), (0x7500, 1, "0001:75:00.0"), (0, 0, None), (None, 0, None), (1 << 16, 0, None),
])
def test_bdfid_becomes_a_pci_bus_id(bdfid: Optional[int], domain: int, bus: Optional[str]) -> None:
    assert rocm.bus_id_from_bdfid(bdfid, domain) == bus


# -- rocminfo on the real captures -----------------------------------------------------------

EXPECTED = {
    # folder: [(name, gfx_target, runtime_gfx_target, pci_device_id, bus, memory_bytes, integrated, cus)]
    "linux-amd-instinct-mi25-x7-rocminfo": [("Radeon Instinct MI25", "gfx900", "gfx900", "0x6860", None,
                                             17163091968, False, 64)] * 7,
    "linux-amd-mi300x-x4-rocminfo-rocm-smi": [
        ("AMD Instinct MI300X", "gfx942", "gfx942", "0x74a1", b, 206141652992, False, 304)
        for b in ("0000:26:00.0", "0000:46:00.0", "0000:65:00.0", "0000:85:00.0")],
    "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo": [
        ("AMD Radeon RX 6700 XT", "gfx1031", "gfx1030", "0x73df", "0000:0c:00.0", 12868124672, False, 40)],
    "linux-amd-rx6750xt-gfx1031-with-igpu-gfx1036-rocminfo": [
        ("AMD Radeon RX 6750 XT", "gfx1031", "gfx1031", "0x73df", "0000:03:00.0", 12868124672, False, 40),
        ("AMD Radeon Graphics", "gfx1036", "gfx1036", "0x164e", "0000:10:00.0", None, True, 2)],
    "linux-amd-rx7800xt-gfx1101-with-igpu-rocm7-rocminfo": [
        ("AMD Radeon RX 7800 XT", "gfx1101", "gfx1101", "0x747e", "0000:03:00.0", 17163091968, False, 60),
        ("AMD Ryzen 7 9800X3D 8-Core Processor", "gfx1036", "gfx1036", "0x13c0", "0000:10:00.0", None, True, 2)],
    "linux-amd-strix-halo-gfx1151-apu-npu-rocminfo": [
        ("Radeon 8060S Graphics", "gfx1151", "gfx1151", "0x1586", "0000:c5:00.0", None, True, 40)],
    "linux-wsl2-amd-rx7900xtx-gfx1100-rocminfo": [
        ("AMD Radeon RX 7900 XTX", "gfx1100", "gfx1100", "0x744c", None, 25681895424, False, 96)],
    "linux-amd-rx6800xt-wsl2-rocm-torch-collect-env": [
        ("AMD Radeon RX 6800 XT", "gfx1030", "gfx1030", "0x73bf", None, 17131868160, False, 72)],
}


@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_every_gpu_agent_and_nothing_else(folder: str) -> None:
    gpus = _gpus(folder)
    got = sorted((g.name, g.gfx_target, g.runtime_gfx_target, g.pci_device_id, g.pci_bus_id if EXPECTED[folder][0][4]
                  else None, g.memory_bytes if EXPECTED[folder][0][5] else None, g.integrated, g.compute_units)
                 for g in gpus)
    want = sorted(tuple(x if i != 5 or e[5] else None for i, x in enumerate(e)) for e in EXPECTED[folder])
    assert len(got) == len(want)
    for g_row, w_row in zip(got, want):
        assert g_row[:4] == w_row[:4] and g_row[6:] == w_row[6:]
        if w_row[4]:
            assert g_row[4] == w_row[4]
        if w_row[5]:
            assert g_row[5] == w_row[5]
    assert all(g.vendor == "amd" and g.apis == ("rocm",) and g.pci_vendor_id == "0x1002" for g in gpus)


def test_cpu_and_npu_agents_are_not_gpus() -> None:
    halo = rocm.parse_rocminfo(_text("linux-amd-strix-halo-gfx1151-apu-npu-rocminfo"))
    assert [(a.name, a.device_type) for a in halo.agents] == [
        ("AMD RYZEN AI MAX+ 395 w/ Radeon 8060S", "CPU"), ("gfx1151", "GPU"), ("aie2", "DSP")]
    assert [a.name for a in halo.gpus] == ["gfx1151"]
    # the generic ISA is listed but never taken as the target
    assert halo.gpus[0].isas == ("amdgcn-amd-amdhsa--gfx1151", "amdgcn-amd-amdhsa--gfx11-generic")
    mi300 = rocm.parse_rocminfo(_text("linux-amd-mi300x-x4-rocminfo-rocm-smi"))
    assert [a.device_type for a in mi300.agents] == ["CPU", "CPU", "GPU", "GPU", "GPU", "GPU"]
    # the 9800X3D's iGPU carries the CPU's marketing name and is still a GPU; the CPU agent is not
    r7 = rocm.parse_rocminfo(_text("linux-amd-rx7800xt-gfx1101-with-igpu-rocm7-rocminfo"))
    named = [a for a in r7.agents if a.marketing_name == "AMD Ryzen 7 9800X3D 8-Core Processor"]
    assert [a.is_gpu for a in named] == [False, True]


def test_header_facts_and_uuids() -> None:
    info = rocm.parse_rocminfo(_text("linux-amd-rx6750xt-gfx1031-with-igpu-gfx1036-rocminfo"))
    assert (info.runtime_version, info.rock_module_version, info.wsl) == ("1.14", "6.8.5", False)
    assert all(a.uuid is None for a in info.agents)  # CPU-XX / GPU-XX are placeholders
    wsl = rocm.parse_rocminfo(_text("linux-wsl2-amd-rx7900xtx-gfx1100-rocminfo"))
    assert wsl.wsl and wsl.gpus[0].bdfid is None and wsl.gpus[0].uuid is None
    mi300 = [g.uuid for g in _gpus("linux-amd-mi300x-x4-rocminfo-rocm-smi")]
    assert mi300 == ["GPU-8d1457e2c20f59d2", "GPU-b4fa34630e85d42a", "GPU-e8986800e182538a", "GPU-eff71edc82169115"]


def test_hsa_override_shows_hardware_and_runtime_targets() -> None:
    folder = "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo"
    c = rocm.probe(ReplayHost(FIXTURES / folder))
    (g,) = c.gpus
    assert (g.gfx_target, g.runtime_gfx_target, g.architecture) == ("gfx1031", "gfx1030", "RDNA2")
    assert g.notes and "gfx1031" in g.notes[0] and "gfx1030" in g.notes[0]
    assert any("gfx1031" in w and "gfx1030" in w for w in c.warnings)
    assert c.runtimes.rocm.override_in_effect is True
    assert c.runtimes.rocm.hsa_override_gfx_version is None  # no host.json in this bundle
    # with the environment known, the note names the value
    (g2,) = _gpus(folder, env={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"})
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0" in g2.notes[0]
    # the scan's own warning and the probe's are the same sentence: the report says it once
    report = facts_to_report(scan(ReplayHost(FIXTURES / folder)))
    assert sum("gfx1030" in w for w in report["warnings"]) == 1


def test_native_targets_raise_no_override() -> None:
    for folder in EXPECTED:
        if "override" in folder:
            continue
        c = rocm.probe(ReplayHost(FIXTURES / folder))
        assert c.runtimes.rocm.override_in_effect is False
        assert not any("HSA_OVERRIDE" in w for w in c.warnings)
        assert all(g.notes == () for g in c.gpus)


def test_rocminfo_bdfid_merges_with_lspci_into_one_gpu() -> None:
    # a real bundle with both: the Strix Halo's rocminfo (BDFID 50432) and lspci (c5:00.0)
    report = facts_to_report(scan(ReplayHost(FIXTURES / "linux-amd-strix-halo-gfx1151-apu-npu-rocminfo")))
    (gpu,) = report["gpus"]
    assert gpu["pci_bus_id"] == "0000:c5:00.0"
    assert gpu["sources"] == ["rocm", "pci"]
    assert gpu["name"] == "Radeon 8060S Graphics"  # rocm outranks lspci's bracket text
    assert (gpu["gfx_target"], gpu["integrated"], gpu["apis"]) == ("gfx1151", True, ["rocm"])


def test_rocminfo_garbage_and_errors() -> None:
    with pytest.raises(ParseError):
        rocm.parse_rocminfo("Segmentation fault\n")
    info = rocm.parse_rocminfo("ROCk module is loaded\nUnable to open /dev/kfd read-write: Permission denied\n"
                               "user is not member of \"render\" group\n")
    assert info.agents == () and info.errors and "/dev/kfd" in info.errors[0]
    c = rocm.probe(DictHost({"rocminfo.txt": "ROCk module is loaded\nUnable to open /dev/kfd read-write: "
                                             "Permission denied\n", "kfd-topology.txt": KFD}))
    assert len(c.gpus) == 2  # the kernel still lists the GPUs
    assert any("render" in w and "video" in w for w in c.warnings)


# -- KFD topology -----------------------------------------------------------------------------

# Node properties in the KFD's format; node 1 is a Radeon RX 7900 XTX as tinygrad's AMD mock
# reproduces it (tinygrad/tinygrad, test/mockgpu/amd/amdgpu.py), node 2 an RX 6700 XT.
KFD = """# node 0
cpu_cores_count 16
simd_count 0
gfx_target_version 0
vendor_id 0
device_id 0
location_id 0
domain 0
# node 1
cpu_cores_count 0
simd_count 192
wave_front_size 32
simd_per_cu 2
gfx_target_version 110000
vendor_id 4098
device_id 29772
location_id 768
domain 0
unique_id 11673270660693242239
# node 2
cpu_cores_count 0
simd_count 80
simd_per_cu 2
gfx_target_version 100301
vendor_id 4098
device_id 29663
location_id 2816
domain 1
"""


def test_kfd_topology_alone_gives_hardware_targets() -> None:
    nodes = rocm.parse_kfd_topology(KFD)
    assert [n.is_gpu for n in nodes] == [False, True, True]
    c = rocm.probe(DictHost({"kfd-topology.txt": KFD, "rocm-version.txt": "6.2.4-120\n"}))
    got = [(g.gfx_target, g.runtime_gfx_target, g.pci_device_id, g.pci_bus_id, g.compute_units, g.apis) for g in c.gpus]
    assert got == [("gfx1100", "gfx1100", "0x744c", "0000:03:00.0", 96, ("rocm",)),
                   ("gfx1031", "gfx1031", "0x73df", "0001:0b:00.0", 40, ("rocm",))]
    assert c.gpus[0].uuid == "GPU-a1ffc9d1799c317f"
    assert c.runtimes.rocm.version == "6.2.4" and c.runtimes.rocm.override_in_effect is False


def test_override_with_kfd_only_is_in_effect_where_it_differs() -> None:
    c = rocm.probe(DictHost({"kfd-topology.txt": KFD}, env={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}))
    rt = c.runtimes.rocm
    assert rt.hsa_override_gfx_version == "10.3.0" and rt.override_in_effect is True
    assert [(g.gfx_target, g.runtime_gfx_target) for g in c.gpus] == [("gfx1100", "gfx1030"), ("gfx1031", "gfx1030")]
    assert c.gpus[0].apis == ()  # KFD alone: the kernel driver, not proof of ROCm user space
    bad = rocm.probe(DictHost({"kfd-topology.txt": KFD}, env={"HSA_OVERRIDE_GFX_VERSION": "gfx1030x"}))
    assert any("not a version" in w for w in bad.warnings)


def test_kfd_completes_rocminfo_by_node_number() -> None:
    text = _text("linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo")  # agent 2 is KFD node 1
    kfd = "# node 1\nsimd_count 80\nsimd_per_cu 2\ngfx_target_version 100301\ndevice_id 29663\nlocation_id 3072\ndomain 2\n"
    (g,) = rocm.probe(DictHost({"rocminfo.txt": text, "kfd-topology.txt": kfd})).gpus
    assert (g.gfx_target, g.runtime_gfx_target, g.pci_bus_id) == ("gfx1031", "gfx1030", "0002:0c:00.0")


# -- rocm-smi and the version file ------------------------------------------------------------

SHOWPRODUCTNAME = (
    "============================ ROCm System Management Interface ============================\n"
    "====================================== Product Info ======================================\n"
    "GPU[0]\t\t: Card Series: \t\tRadeon RX 7900 XTX\n"
    "GPU[0]\t\t: Card Model: \t\t0x744c\n"
    "GPU[0]\t\t: Card Vendor: \t\tAdvanced Micro Devices, Inc. [AMD/ATI]\n"
    "GPU[0]\t\t: Device Rev: \t\t0xc8\n"
    "GPU[0]\t\t: Node ID: \t\t2\n"
    "GPU[0]\t\t: GFX Version: \t\tgfx1100\n"
    "GPU[1]\t\t: Card Series: \t\tPhoenix1\n"
    "GPU[1]\t\t: Card Model: \t\t0x15bf\n"
    "GPU[1]\t\t: Device Rev: \t\t0xc9\n"
    "GPU[1]\t\t: GFX Version: \t\tgfx11003\n"
    "GPU[2]\t\t: Card Series: \t\t0x7448\n"
    "GPU[2]\t\t: Card Model: \t\t0x7448\n"
    "GPU[2]\t\t: GFX Version: \t\tgfx11000\n"
    "==========================================================================================\n"
)


def test_rocm_smi_product_names_and_old_gfx_spelling() -> None:
    cards = rocm.parse_rocm_smi(SHOWPRODUCTNAME)
    assert [(c.name, c.device_id, c.gfx_target) for c in cards] == [
        ("Radeon RX 7900 XTX", "0x744c", "gfx1100"), ("Phoenix1", "0x15bf", "gfx1103"), (None, "0x7448", "gfx1100")]
    assert cards[0].node == 2 and cards[0].revision == "0xc8"
    gpus = rocm.probe(DictHost({"rocm-smi.txt": SHOWPRODUCTNAME})).gpus
    assert [g.integrated for g in gpus] == [False, True, False]
    assert gpus[0].apis == ()  # rocm-smi alone proves the driver, not a ROCm install


def test_rocm_smi_concise_table_of_the_mi300x_bundle() -> None:
    cards = rocm.parse_rocm_smi(_text("linux-amd-mi300x-x4-rocminfo-rocm-smi", "rocm-smi.txt"))
    assert [(c.index, c.name, c.device_id) for c in cards] == [(i, "AMD Instinct MI300X", "0x74a1") for i in range(4)]
    full = rocm.parse_rocm_smi(_text("linux-amd-mi300x-x4-rocminfo-rocm-smi", "rocm-smi-a.txt"))
    assert [c.pci_bus_id for c in full] == ["0000:26:00.0", "0000:46:00.0", "0000:65:00.0", "0000:85:00.0"]
    assert full[0].unique_id == "0x8d1457e2c20f59d2" and full[0].name == "AMD Instinct MI300X OAM"
    assert rocm.parse_rocm_smi("ERROR:root:Driver not initialized (amdgpu not found in modules)\n") == []
    with pytest.raises(ParseError):
        rocm.parse_rocm_smi("hello world\n")


def test_rocm_version_file() -> None:
    assert rocm.parse_rocm_version("6.2.4-120\n") == "6.2.4"
    assert rocm.parse_rocm_version("7.0.0\n") == "7.0.0"
    with pytest.raises(ParseError):
        rocm.parse_rocm_version("\x00\x01")
    c = rocm.probe(DictHost({"rocm-version.txt": "6.3.1-48\n"}))
    assert c.status == "ok" and c.gpus == [] and c.runtimes.rocm.version == "6.3.1"


def test_nothing_rocm_is_absent_not_an_error() -> None:
    c = rocm.probe(DictHost({}))
    assert c.status == "absent" and c.gpus == [] and c.runtimes.rocm is None
    broken = rocm.probe(DictHost({"rocminfo.txt": "Segmentation fault (core dumped)\n"}))
    assert broken.status == "error" and "rocminfo" in (broken.error or "")


# -- knowledge tables -------------------------------------------------------------------------


@pytest.mark.parametrize("table", ["amd_gfx.json", "amd_arch.json"])
def test_every_row_is_sourced(table: str) -> None:
    doc = json.loads((KNOWLEDGE / table).read_text(encoding="utf-8"))
    keys = set(doc["source_key"])
    assert doc["rows"]
    for row in doc["rows"]:
        assert row["source"] in keys, row
        assert rocm.gfx_from_version(row["gfx_target"]) == row["gfx_target"]


def test_table_lookups() -> None:
    assert rocm.amd_device("0x73DF") == ("gfx1031", False)
    assert rocm.amd_device("0x1586") == ("gfx1151", True)
    assert rocm.amd_device("0xffff") == (None, None) and rocm.amd_device(None) == (None, None)
    assert [rocm.architecture_of(g) for g in ("gfx1031", "gfx1101", "gfx1151", "gfx942", "gfx1201", "gfx803")] == [
        "RDNA2", "RDNA3", "RDNA3.5", "CDNA3", "RDNA4", None]


# -- mutation: no exception but ParseError, no invented GPU ------------------------------------


@pytest.mark.parametrize("path", ROCMINFO, ids=[p.parent.name for p in ROCMINFO])
def test_rocminfo_survives_mutation(path: Path) -> None:
    original = decode(path.read_bytes())
    base = len(rocm.gpus_from_rocminfo(rocm.parse_rocminfo(original), []))

    @settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutated(original))
    def check(text: str) -> None:
        try:
            info = rocm.parse_rocminfo(text)
        except ParseError:
            return
        assert len(rocm.gpus_from_rocminfo(info, [])) <= base

    check()


@pytest.mark.parametrize("name, text, parse, count", [
    ("kfd", KFD, rocm.parse_kfd_topology, lambda r: sum(n.is_gpu for n in r)),
    ("smi", SHOWPRODUCTNAME, rocm.parse_rocm_smi, len),
    ("smi-concise", decode((FIXTURES / "linux-amd-mi300x-x4-rocminfo-rocm-smi/rocm-smi.txt").read_bytes()),
     rocm.parse_rocm_smi, len),
    ("version", "6.2.4-120\n", rocm.parse_rocm_version, lambda r: 1),
    ("amd-smi-list", decode((FIXTURES / "linux-amd-mi300x-amd-smi-list-static-blog/amd-smi-list.txt").read_bytes()),
     rocm.parse_amd_smi, len),
    ("amd-smi-static", decode((FIXTURES / "linux-amd-mi300x-amd-smi-list-static-blog/amd-smi-static.txt")
                              .read_bytes()), rocm.parse_amd_smi, len),
])
def test_other_rocm_parsers_survive_mutation(name: str, text: str, parse: Any, count: Any) -> None:
    base = count(parse(text))

    @settings(max_examples=examples(50), deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutated(text))
    def check(mut: str) -> None:
        try:
            result = parse(mut)
        except ParseError:
            return
        assert count(result) <= base

    check()


# -- amd-smi -----------------------------------------------------------------------------------------

AMDSMI = FIXTURES / "linux-amd-mi300x-amd-smi-list-static-blog"


def test_amd_smi_list_and_static_of_amds_blog() -> None:
    listed = rocm.parse_amd_smi((AMDSMI / "amd-smi-list.txt").read_text())
    static = rocm.parse_amd_smi((AMDSMI / "amd-smi-static.txt").read_text())
    assert [(c.index, c.pci_bus_id) for c in listed] == [(0, "0000:05:00.0"), (1, "0000:26:00.0"), (2, "0000:46:00.0")]
    assert (static[0].name, static[0].device_id, static[0].revision) == ("MI300X-O", "0x74a1", "0x00")
    # ROCm's 64-bit id from the ASIC serial and from the list's UUID agree
    assert static[0].unique_id == listed[0].unique_id == "0xaf54e92b0a5d57c8"
    merged = rocm.merge_cards(listed, static)
    assert len(merged) == 3 and merged[0].name == "MI300X-O" and merged[0].pci_bus_id == "0000:05:00.0"
    c = rocm.probe(ReplayHost(AMDSMI))
    assert [(g.gfx_target, g.uuid) for g in c.gpus] == [
        ("gfx942", "GPU-af54e92b0a5d57c8"), (None, "GPU-0a5bce698de95724"), (None, "GPU-9765fa81273af9ce")]
    assert c.gpus[0].apis == ("rocm",)  # amd-smi is part of a ROCm user-space


def test_amd_smi_target_node_and_json_form() -> None:
    """The newer fields: TARGET_GRAPHICS_VERSION (from the KFD: the hardware's own), NODE_ID, HIP_UUID,
    VRAM SIZE; the --json form (lower-case keys, sizes as value/unit) reads the same."""
    text = ("GPU: 0\n    BDF: 0000:03:00.0\n    UUID: 00ff73df-0000-1000-8000-000000000000\n    KFD_ID: 1\n"
            "    NODE_ID: 1\n    PARTITION_ID: 0\n\nGPU: 0\n    ASIC:\n        MARKET_NAME: AMD Radeon RX 6700 XT\n"
            "        DEVICE_ID: 0x73df\n        REV_ID: 0xc1\n        ASIC_SERIAL: 0x0000000000000000\n"
            "        NUM_COMPUTE_UNITS: 40\n        TARGET_GRAPHICS_VERSION: gfx1031\n    VRAM:\n"
            "        TYPE: GDDR6\n        SIZE: 12272 MB\n")
    (card,) = rocm.parse_amd_smi(text)
    assert (card.gfx_target, card.node, card.unique_id, card.memory_bytes, card.compute_units) == (
        "gfx1031", 1, None, 12272 * 1024 ** 2, 40)
    doc = [{"gpu": 0, "asic": {"market_name": "AMD Radeon RX 6700 XT", "device_id": "0x73df",
                               "target_graphics_version": "gfx1031", "asic_serial": "N/A"},
            "bus": {"bdf": "0000:03:00.0"}, "vram": {"type": "GDDR6", "size": {"value": 12272, "unit": "MB"}}}]
    (j,) = rocm.parse_amd_smi(json.dumps(doc))
    assert (j.gfx_target, j.pci_bus_id, j.memory_bytes, j.name) == ("gfx1031", "0000:03:00.0", 12272 * 1024 ** 2,
                                                                   "AMD Radeon RX 6700 XT")
    c = rocm.probe(DictHost({"amd-smi-static.json": json.dumps(doc), "amd-smi-list.txt": text.split("\n\n")[0]},
                            env={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}))
    (g,) = c.gpus
    assert (g.gfx_target, g.runtime_gfx_target, g.kfd_node, g.memory_bytes) == ("gfx1031", "gfx1030", 1,
                                                                              12272 * 1024 ** 2)


@pytest.mark.parametrize("text", ["", "hello\n", "[1, 2", "{}"])
def test_amd_smi_garbage_is_a_parse_error_or_nothing(text: str) -> None:
    try:
        assert rocm.parse_amd_smi(text) == []
    except ParseError:
        pass


def test_rocminfo_and_kfd_give_the_node_the_per_device_override_needs() -> None:
    c = rocm.probe(ReplayHost(FIXTURES / "linux-amd-rx6750xt-gfx1031-with-igpu-gfx1036-rocminfo"))
    assert [(g.gfx_target, g.kfd_node) for g in c.gpus] == [("gfx1031", 1), ("gfx1036", 2)]
    assert [g.kfd_node for g in rocm.probe(DictHost({"kfd-topology.txt": KFD})).gpus] == [1, 2]
