"""intel probe: the Intel GPU table (mlprobe/knowledge/intel_gpus.json) and DRM card lines."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mlprobe.errors import ParseError
from mlprobe.model.facts import OpenClDevice, OpenClPlatform
from mlprobe.scan.host import ReplayHost
from mlprobe.probes import intel
from mlprobe.probes.intel import (DrmCard, combine, gpu_from_sycl, intel_gpu_info, parse_drm_drivers, parse_sycl_ls,
                                  sycl_intel_gpus)
from mlprobe.probes.opencl import gpu_from_device
from mlprobe.scan.run import merge_gpus

from .conftest import FIXTURES
from .fuzz import examples, mutated
from .hosts import DictHost

TABLE = Path(intel.__file__).resolve().parent.parent / "knowledge" / "intel_gpus.json"
# The format mlprobe's own sysfs reader writes (host.py, _produce_drm): card, bus id, vendor, device, driver.
LAPTOP = ("card0 0000:00:02.0 0x8086 0x3e92 i915\n"
          "card1 0000:01:00.0 0x10de 0x1f95 nvidia\n")
ARC_DESKTOP = ("card0 0000:00:02.0 0x8086 0x4680 i915\n"
               "card1 0000:03:00.0 0x8086 0x56a0 i915\n")


# -- the table -------------------------------------------------------------------------------------


def test_table_rows_are_sourced_and_well_formed() -> None:
    doc = json.loads(TABLE.read_text(encoding="utf-8"))
    assert doc["description"] and doc["source_key"]
    ids = [r["pci_device_id"] for r in doc["rows"]]
    assert len(ids) == len(set(ids)) and len(ids) > 300
    for row in doc["rows"]:
        assert re.fullmatch(r"0x[0-9a-f]{4}", row["pci_device_id"]), row
        assert row["source"] in doc["source_key"], row
        assert isinstance(row["discrete"], bool) and isinstance(row["xpu_supported"], bool)
        assert row["name"] or row["source"] == "linux_pciids", row
    for key, src in doc["source_key"].items():
        assert src.get("commit") or src.get("reference"), key


@pytest.mark.parametrize("dev, name, generation, discrete, xpu", [
    ("0x3e92", "Intel(R) UHD Graphics 630", "Gen9", False, False),
    ("0x191b", "Intel(R) HD Graphics 530", "Gen9", False, False),
    ("0x0412", "Intel(R) HD Graphics 4600", "Gen7.5", False, False),
    ("0x9a49", "Intel(R) Iris(R) Xe Graphics", "Gen12/Xe-LP", False, False),
    ("0x46d1", "Intel(R) Graphics", "Gen12/Xe-LP", False, False),
    ("0x4905", "Intel(R) Iris(R) Xe MAX Graphics", "Gen12/Xe-LP", True, False),
    ("0x56a0", "Intel(R) Arc(TM) A770 Graphics", "Xe-HPG/Alchemist (Arc A)", True, True),
    ("0x56c0", "Intel(R) Data Center GPU Flex 170", "Xe-HPG (Data Center GPU Flex)", True, False),
    ("0x7d55", "Intel(R) Arc(TM) Graphics", "Xe-LPG (Meteor Lake)", False, True),
    ("0x7d51", "Intel(R) Arc(TM) Pro 130T/140T Graphics", "Xe-LPG (Arrow Lake)", False, True),
    ("0x64a0", "Intel(R) Graphics", "Xe2-LPG (Lunar Lake)", False, True),
    ("0xe20b", "Intel(R) Arc(TM) B580 Graphics", "Xe2/Battlemage (Arc B)", True, True),
    ("0xb080", "Intel(R) Arc(TM) B390 Graphics", "Xe3-LPG (Panther Lake)", False, True),
    ("0x0bd5", "Intel(R) Data Center GPU Max 1550", "Xe-HPC (Data Center GPU Max)", True, True),
])
def test_known_ids(dev: str, name: str, generation: str, discrete: bool, xpu: bool) -> None:
    info = intel_gpu_info(dev)
    assert info is not None
    assert (info["name"], info["generation"], info["discrete"], info["xpu_supported"]) == (
        name, generation, discrete, xpu)


def test_product_names_follow_pciids_and_agree_with_mesa() -> None:
    """pci.ids names the product in brackets (`Battlemage G21 [Arc B580]`); the table spells it as
    Intel's runtime does. Where Mesa names the part too (every Alchemist id), both spellings agree:
    the rule is checked against Mesa's own names, not assumed."""
    doc = json.loads(TABLE.read_text(encoding="utf-8"))
    mesa = {r["pci_device_id"]: r for r in doc["rows"]}
    checked = 0
    for p in doc["product_names"]:
        assert p["source"] == "pciids" and p["pci_device_id"] in mesa, p
        bracket = re.search(r"\[([^\]]+)\]$", p["pciids_name"])
        assert bracket, p
        product = bracket.group(1)
        expected = (f"Intel(R) Arc(TM) {product[4:]} Graphics" if product.startswith("Arc ")
                    else f"Intel(R) {product}")
        assert p["name"] == expected, p
        row = mesa[p["pci_device_id"]]
        if row["source"].startswith("mesa") and row["name"] not in ("Intel(R) Graphics",):
            assert row["name"] == p["name"], (row, p)
            checked += 1
    assert checked >= 20  # the Alchemist and Flex ids
    assert {"0xe20b", "0xe20c", "0xe211", "0xe212"} <= {p["pci_device_id"] for p in doc["product_names"]}


@pytest.mark.parametrize("dev, name", [("0xe20c", "Intel(R) Arc(TM) B570 Graphics"),
                                       ("0xe211", "Intel(R) Arc(TM) Pro B60 Graphics"),
                                       ("0xe212", "Intel(R) Arc(TM) Pro B50 Graphics"),
                                       ("0xe223", "Intel(R) Arc(TM) Pro B70 Graphics")])
def test_battlemage_ids_get_their_product(dev: str, name: str) -> None:
    info = intel_gpu_info(dev)
    assert info is not None and info["name"] == name and info["name_source"] == "pciids"
    assert info["source"] in ("mesa_iris", "mesa_main") and info["xpu_supported"] and info["discrete"]


def test_identical_cards_stay_apart() -> None:
    """Two A770s differ only in the number sycl-ls gives them; a line pasted twice is one device."""
    text = ("[opencl:gpu:2] Intel(R) OpenCL Graphics, Intel(R) Arc(TM) A770 Graphics 3.0 [23.17.26241.33]\n"
            "[opencl:gpu:3] Intel(R) OpenCL Graphics, Intel(R) Arc(TM) A770 Graphics 3.0 [23.17.26241.33]\n"
            "[ext_oneapi_level_zero:gpu:0] Intel(R) Level-Zero, Intel(R) Arc(TM) A770 Graphics 1.3 [1.3.26241]\n"
            "[ext_oneapi_level_zero:gpu:1] Intel(R) Level-Zero, Intel(R) Arc(TM) A770 Graphics 1.3 [1.3.26241]\n"
            "[ext_oneapi_level_zero:gpu:1] Intel(R) Level-Zero, Intel(R) Arc(TM) A770 Graphics 1.3 [1.3.26241]\n"
            "[level_zero:gpu][level_zero:0] Intel(R) oneAPI Unified Runtime over Level-Zero, X 12.55.8 [1.3]\n")
    devices = parse_sycl_ls(text)
    assert [(d.backend, d.number) for d in devices] == [
        ("opencl", 2), ("opencl", 3), ("level_zero", 0), ("level_zero", 1), ("level_zero", 0)]
    l0, ocl = sycl_intel_gpus(devices)
    gpus = combine([[gpu_from_sycl(d) for d in l0], [gpu_from_sycl(d) for d in ocl]])
    assert [g.name for g in gpus] == ["Intel(R) Arc(TM) A770 Graphics"] * 2
    assert all(g.sources == ("sycl-ls",) and g.apis == ("xpu", "opencl") for g in gpus)


@pytest.mark.parametrize("value", ["3e92", "3E92", "0x3E92", 0x3E92, " 0x3e92 "])
def test_id_spellings(value: Any) -> None:
    info = intel_gpu_info(value)
    assert info is not None and info["pci_device_id"] == "0x3e92"


@pytest.mark.parametrize("value", ["0xffff", "zzzz", "", None, -1, 0x10000, True, "0x3e92a", "card0"])
def test_unknown_or_malformed_ids(value: Any) -> None:
    assert intel_gpu_info(value) is None


def test_info_is_a_copy() -> None:
    info = intel_gpu_info("0x3e92")
    assert info is not None
    info["name"] = "changed"
    assert intel_gpu_info("0x3e92")["name"] == "Intel(R) UHD Graphics 630"  # type: ignore[index]


# -- drm-drivers.txt ----------------------------------------------------------------------------------


def test_parse_drm_drivers() -> None:
    cards = parse_drm_drivers(LAPTOP)
    assert cards == [
        DrmCard("card0", "0000:00:02.0", "0x8086", "0x3e92", "i915"),
        DrmCard("card1", "0000:01:00.0", "0x10de", "0x1f95", "nvidia"),
    ]
    assert parse_drm_drivers("card2 0000:00:02.0 0x8086 0x7d55 -\n")[0].driver is None
    assert parse_drm_drivers("") == [] and parse_drm_drivers("\n") == []
    with pytest.raises(ParseError):
        parse_drm_drivers("ls: cannot access '/sys/class/drm': No such file or directory\n")


def test_probe_laptop_igpu_is_not_an_xpu_device() -> None:
    c = intel.probe(DictHost({"drm-drivers.txt": LAPTOP}))
    (gpu,) = c.gpus  # the NVIDIA card is the nvidia/pci probes' business
    assert (gpu.vendor, gpu.name, gpu.integrated, gpu.architecture) == (
        "intel", "Intel(R) UHD Graphics 630", True, "Gen9")
    assert (gpu.pci_bus_id, gpu.pci_vendor_id, gpu.pci_device_id) == ("0000:00:02.0", "0x8086", "0x3e92")
    assert gpu.apis == () and gpu.sources == ("intel",)


def test_probe_arc_desktop() -> None:
    igpu, arc = intel.probe(DictHost({"drm-drivers.txt": ARC_DESKTOP})).gpus
    assert (igpu.name, igpu.integrated, igpu.apis) == ("Intel(R) UHD Graphics 770", True, ())
    assert (arc.name, arc.integrated, arc.apis) == ("Intel(R) Arc(TM) A770 Graphics", False, ("xpu",))


@pytest.mark.parametrize("driver, apis, note", [
    ("xe", ("xpu",), None), ("i915", ("xpu",), None),
    ("-", (), "no kernel driver"), ("vfio-pci", (), "vfio-pci"),
])
def test_xpu_needs_i915_or_xe(driver: str, apis: tuple, note: Optional[str]) -> None:
    (gpu,) = intel.probe(DictHost({"drm-drivers.txt": f"card0 0000:03:00.0 0x8086 0xe20b {driver}\n"})).gpus
    assert gpu.apis == apis
    assert (note is None and not gpu.notes) or any(note in n for n in gpu.notes if note)


def test_unknown_intel_id_is_kept_with_a_note() -> None:
    (gpu,) = intel.probe(DictHost({"drm-drivers.txt": "card0 0000:00:02.0 0x8086 0xfffe i915\n"})).gpus
    assert (gpu.name, gpu.integrated, gpu.apis) == (None, None, ())
    assert any("not in" in n for n in gpu.notes)


def test_probe_statuses() -> None:
    assert intel.probe(DictHost({})).status == "absent"
    assert intel.probe(DictHost({"drm-drivers.txt": None})).status == "error"
    assert intel.probe(DictHost({"drm-drivers.txt": "garbage\n"})).status == "error"
    amd_only = intel.probe(DictHost({"drm-drivers.txt": "card0 0000:03:00.0 0x1002 0x73df amdgpu\n"}))
    assert amd_only.status == "ok" and amd_only.gpus == []
    # No bundle carries drm-drivers.txt from a real machine yet: replay finds none, costs nothing.
    assert intel.probe(ReplayHost(FIXTURES / "linux-intel-hd-graphics-haswell-intel-sdk-clinfo")).status == "absent"


def test_merges_with_the_opencl_view_of_the_same_igpu() -> None:
    (card_gpu,) = intel.probe(DictHost({"drm-drivers.txt": "card0 0000:00:02.0 0x8086 0x46d1 i915\n"})).gpus
    neo = OpenClDevice(name="Intel(R) Graphics [0x46d1]", type="GPU", vendor="Intel(R) Corporation",
                       driver_version="23.17.26241.33", host_unified_memory=True)
    cl_gpu = gpu_from_device(neo, OpenClPlatform(name="Intel(R) OpenCL Graphics", vendor="Intel(R) Corporation"))
    (merged,) = merge_gpus([("intel", [card_gpu]), ("opencl", [cl_gpu])])
    assert merged.sources == ("intel", "opencl") and merged.apis == ("opencl",)
    assert (merged.name, merged.pci_device_id, merged.driver_version) == (
        "Intel(R) Graphics", "0x46d1", "23.17.26241.33")


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated(ARC_DESKTOP + LAPTOP.replace("card0", "card2").replace("card1", "card3")))
def test_drm_parser_survives_mutations(text: str) -> None:
    try:
        cards = parse_drm_drivers(text)
    except ParseError:
        return
    assert len([c for c in cards if c.vendor_id == "0x8086"]) <= 3
    for c in cards:
        intel.gpu_from_card(c)


@settings(max_examples=examples(100), deadline=None)
@given(st.text(max_size=300))
def test_any_text_gives_cards_or_a_parse_error(text: str) -> None:
    try:
        for c in parse_drm_drivers(text):
            intel.gpu_from_card(c)
    except ParseError:
        pass
