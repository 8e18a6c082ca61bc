"""apple probe: `system_profiler SPDisplaysDataType` text and -json, on the real darwin captures."""

from __future__ import annotations

import json
from typing import Any, List, Optional

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mlprobe.scan.capture import decode
from mlprobe.errors import ParseError
from mlprobe.scan.host import ReplayHost
from mlprobe.probes import apple
from mlprobe.probes.apple import parse_system_profiler_json, parse_system_profiler_text

from . import hosts
from .conftest import FIXTURES
from .fuzz import examples, mutated

TEXT_CAPTURES = sorted(FIXTURES.glob("*/system_profiler-SPDisplaysDataType.txt"))
JSON_CAPTURES = sorted(FIXTURES.glob("*/system_profiler-SPDisplaysDataType.json"))
DUAL = "darwin-amd-radeon-pro-450-intel-hd-530-dual-gpu"
DYNAMIC = "darwin-amd-radeon-pro-450-intel-hd-530-dynamic-vram"
M1 = "darwin-apple-m1-pro-system-profiler"
M3_JSON = "synthetic-darwin-apple-m3-pro-system-profiler-json"


class DictHost(hosts.DictHost):
    system = "Darwin"
    failure = ("error", "system_profiler exited with status 1")


def _text(folder: str, name: str = "system_profiler-SPDisplaysDataType.txt") -> str:
    return decode((FIXTURES / folder / name).read_bytes())


def test_there_are_darwin_captures() -> None:
    assert len(TEXT_CAPTURES) >= 3 and len(JSON_CAPTURES) >= 1


# -- text, real captures -----------------------------------------------------------------------


def test_intel_mac_with_two_gpus_keeps_them_apart_by_vendor() -> None:
    gpus = {g.vendor: g.to_facts() for g in parse_system_profiler_text(_text(DUAL))}
    assert set(gpus) == {"intel", "amd"}
    igpu, dgpu = gpus["intel"], gpus["amd"]
    assert (igpu.name, igpu.integrated, igpu.pci_device_id) == ("Intel HD Graphics 530", True, "0x191b")
    # "VRAM (Dynamic, Max): 1536 MB" of a Built-In GPU is shared memory: no memory claimed.
    assert igpu.memory_bytes is None
    assert (dgpu.name, dgpu.integrated, dgpu.pci_vendor_id, dgpu.pci_device_id) == (
        "AMD Radeon Pro 450", False, "0x1002", "0x67ef")
    assert dgpu.memory_bytes == 2 * 1024**3  # "VRAM (Total): 2 GB"
    assert igpu.apis == dgpu.apis == ("metal",)
    assert igpu.metal_support == "macOS GPUFamily2 v1"
    assert igpu.cores is None and dgpu.cores is None


def test_discrete_gpu_with_dynamic_max_label_still_reports_its_vram() -> None:
    gpus = {g.vendor: g for g in parse_system_profiler_text(_text(DYNAMIC))}
    assert gpus["amd"].vram_label == "VRAM (Dynamic, Max)"
    assert gpus["amd"].to_facts().memory_bytes == 2048 * 1024**2
    assert gpus["intel"].to_facts().memory_bytes is None
    assert gpus["amd"].metal == "macOS GPUFamily1 v3"


def test_monitors_under_displays_are_not_gpus() -> None:
    # The dynamic-vram capture hangs "Color LCD" under the AMD GPU, the M1 Pro one three monitors.
    assert len(parse_system_profiler_text(_text(DYNAMIC))) == 2
    m1 = parse_system_profiler_text(_text(M1))
    assert [g.name for g in m1] == ["Apple M1 Pro"]


def test_apple_silicon_gpu() -> None:
    (gpu,) = parse_system_profiler_text(_text(M1))
    facts = gpu.to_facts()
    assert (facts.vendor, facts.integrated, facts.cores, facts.pci_vendor_id) == ("apple", True, 16, "0x106b")
    assert facts.memory_bytes is None  # unified memory, no VRAM line
    assert facts.metal_support == "Metal GPUFamily Apple 7" and facts.apis == ("metal",)
    assert apple.metal_runtime([gpu]).to_dict() == {"support": "Metal GPUFamily Apple 7", "apple_gpu": True,
                                          "gpu": "Apple M1 Pro"}


def test_metal_runtime_of_an_intel_mac_has_no_apple_gpu() -> None:
    runtime = apple.metal_runtime(parse_system_profiler_text(_text(DUAL)))
    assert runtime is not None and runtime.apple_gpu is False


@pytest.mark.parametrize("key, value, expected", [
    ("Metal Support", "Metal 3", (True, "Metal 3")),
    ("Metal Family", "Supported, Metal GPUFamily Apple 7", (True, "Metal GPUFamily Apple 7")),
    ("Metal", "Supported, feature set macOS GPUFamily2 v1", (True, "macOS GPUFamily2 v1")),
    ("Metal", "Supported", (True, "Supported")),
    ("Metal", "Not Supported", (False, None)),
    ("x", "spdisplays_metal3", (True, "Metal 3")),
    ("x", "spdisplays_metal4", (True, "Metal 4")),
    ("x", "spdisplays_mtlgpufamilyapple7", (True, "Metal GPUFamily Apple 7")),
    ("x", "spdisplays_supported", (True, "Supported")),
    ("x", "", (None, None)),
])
def test_metal_wordings(key: str, value: str, expected: tuple) -> None:
    assert apple._metal(key, value) == expected


@pytest.mark.parametrize("value, vendor, pci", [
    ("AMD (0x1002)", "amd", "0x1002"), ("Intel", "intel", None), ("Apple (0x106b)", "apple", "0x106b"),
    ("NVIDIA (0x10de)", "nvidia", "0x10de"), ("sppci_vendor_Apple", "apple", None),
    ("sppci_vendor_amd", "amd", None), ("sppci_vendor_intel", "intel", None), ("ATI (0x1002)", "amd", "0x1002"),
])
def test_vendor_line_forms(value: str, vendor: str, pci: Optional[str]) -> None:
    assert apple._vendor(value) == (vendor, pci)


def test_empty_output_is_no_gpu_and_other_text_is_a_parse_error() -> None:
    assert parse_system_profiler_text("") == []
    assert parse_system_profiler_text("\n\n") == []
    with pytest.raises(ParseError):
        parse_system_profiler_text("zsh: command not found: system_profiler\n")


# -- JSON --------------------------------------------------------------------------------------


def test_json_apple_silicon() -> None:
    (gpu,) = parse_system_profiler_json(_text(M3_JSON, "system_profiler-SPDisplaysDataType.json"))
    facts = gpu.to_facts()
    assert (facts.vendor, facts.name, facts.integrated, facts.cores) == ("apple", "Apple M3 Pro", True, 14)
    assert facts.memory_bytes is None and facts.metal_support == "Metal 3" and facts.apis == ("metal",)


def test_json_intel_mac_keys_and_kHW_names() -> None:
    # Key spellings of Intel Macs (10.13: "_spdisplays_vram"; later "spdisplays_vram"/"_vram_shared").
    doc = {"SPDisplaysDataType": [
        {"_name": "kHW_IntelUHDGraphics630Item", "sppci_model": "Intel UHD Graphics 630",
         "spdisplays_vendor": "sppci_vendor_intel", "sppci_bus": "spdisplays_builtin",
         "spdisplays_vram_shared": "1536 MB", "spdisplays_device-id": "0x3e9b",
         "spdisplays_mtlgpufamilysupport": "spdisplays_metal3", "sppci_device_type": "spdisplays_gpu"},
        {"_name": "kHW_AMDRadeonPro5300MItem", "sppci_model": "AMD Radeon Pro 5300M",
         "spdisplays_vendor": "sppci_vendor_amd", "sppci_bus": "spdisplays_pcie", "spdisplays_vram": "4 GB",
         "spdisplays_device-id": "0x7340", "spdisplays_mtlgpufamilysupport": "spdisplays_metal3",
         "spdisplays_ndrvs": [{"_name": "Color LCD"}]},
        {"_name": "kHW_AppleM1Item", "spdisplays_metalfamily": "spdisplays_mtlgpufamilyapple7",
         "sppci_device_type": "spdisplays_gpu", "spdisplays_vendor": "sppci_vendor_Apple"},
    ]}
    intel, amd, m1 = (g.to_facts() for g in parse_system_profiler_json(json.dumps(doc)))
    assert (intel.vendor, intel.integrated, intel.memory_bytes, intel.pci_device_id) == ("intel", True, None, "0x3e9b")
    assert (amd.vendor, amd.integrated, amd.memory_bytes) == ("amd", False, 4 * 1024**3)
    assert (m1.vendor, m1.name, m1.integrated, m1.metal_support) == ("apple", None, True, "Metal GPUFamily Apple 7")


def test_json_errors() -> None:
    with pytest.raises(ParseError):
        parse_system_profiler_json("not json")
    with pytest.raises(ParseError):
        parse_system_profiler_json('{"SPHardwareDataType": []}')
    assert parse_system_profiler_json('{"SPDisplaysDataType": []}') == []


def test_json_after_a_prompt_line() -> None:
    text = "me@mac ~ % system_profiler -json SPDisplaysDataType\n" + _text(
        M3_JSON, "system_profiler-SPDisplaysDataType.json")
    assert [g.name for g in parse_system_profiler_json(text)] == ["Apple M3 Pro"]


# -- probe -------------------------------------------------------------------------------------


def test_probe_prefers_json_and_falls_back_to_text() -> None:
    text, js = _text(M1), _text(M3_JSON, "system_profiler-SPDisplaysDataType.json")
    both = apple.probe(DictHost({"system_profiler-SPDisplaysDataType.json": js,
                                 "system_profiler-SPDisplaysDataType.txt": text}))
    assert [g.name for g in both.gpus] == ["Apple M3 Pro"]
    broken = apple.probe(DictHost({"system_profiler-SPDisplaysDataType.json": "{oops",
                                   "system_profiler-SPDisplaysDataType.txt": text}))
    assert [g.name for g in broken.gpus] == ["Apple M1 Pro"] and broken.status == "ok"
    assert broken.runtimes.metal.apple_gpu is True


def test_probe_status() -> None:
    assert apple.probe(DictHost({})).status == "absent"
    failed = apple.probe(DictHost({"system_profiler-SPDisplaysDataType.txt": None}))
    assert failed.status == "error" and "status 1" in (failed.error or "")
    garbage = apple.probe(DictHost({"system_profiler-SPDisplaysDataType.txt": "hello"}))
    assert garbage.status == "error" and garbage.gpus == []


def test_probe_on_replayed_bundles() -> None:
    gpus = apple.probe(ReplayHost(FIXTURES / DUAL)).gpus
    assert sorted(g.vendor for g in gpus) == ["amd", "intel"] and all(g.sources == ("apple",) for g in gpus)
    assert apple.probe(ReplayHost(FIXTURES / "linux-nogpu-amd-epyc-pocl-opencl-cpu")).status == "absent"


# -- mutations ---------------------------------------------------------------------------------


def _count(parser: Any, text: str) -> int:
    try:
        return len(parser(text))
    except ParseError:
        return 0


@pytest.mark.parametrize("path", TEXT_CAPTURES, ids=[p.parent.name for p in TEXT_CAPTURES])
def test_text_parser_survives_mutations(path: Any) -> None:
    original = decode(path.read_bytes())
    limit = len(parse_system_profiler_text(original))

    @settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutated(original))
    def check(text: str) -> None:
        try:
            gpus: List[apple.MacGpu] = parse_system_profiler_text(text)
        except ParseError:
            return
        assert len(gpus) <= limit
        for g in gpus:
            g.to_facts()  # builds without error

    check()


@pytest.mark.parametrize("path", JSON_CAPTURES, ids=[p.parent.name for p in JSON_CAPTURES])
def test_json_parser_survives_mutations(path: Any) -> None:
    original = decode(path.read_bytes())
    limit = len(parse_system_profiler_json(original))

    @settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutated(original))
    def check(text: str) -> None:
        assert _count(parse_system_profiler_json, text) <= limit

    check()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["_name", "sppci_model", "spdisplays_vendor", "sppci_bus", "sppci_cores",
                         "spdisplays_vram", "spdisplays_mtlgpufamilysupport", "spdisplays_device-id",
                         "sppci_device_type", "spdisplays_ndrvs", "x"]), inner, max_size=6),
    max_leaves=20)


@settings(max_examples=examples(100), deadline=None)
@given(st.text(max_size=400))
def test_any_text_gives_gpus_or_a_parse_error(text: str) -> None:
    for parser in (parse_system_profiler_text, parse_system_profiler_json):
        try:
            for g in parser(text):
                g.to_facts()
        except ParseError:
            pass


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(JSON_VALUES, max_size=4))
def test_any_json_shape_gives_gpus_or_a_parse_error(items: list) -> None:
    try:
        for g in parse_system_profiler_json(json.dumps({"SPDisplaysDataType": items})):
            g.to_facts()
    except ParseError:
        pass
