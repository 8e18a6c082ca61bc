"""clinfo parsers (full text and --json) on the real captures: PoCL, libmali, Intel's SDK, Apple,
the AMD APP SDK's old layout; NEO device names; mutations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mlprobe.scan.capture import decode
from mlprobe.errors import ParseError
from mlprobe.model.facts import OpenClDevice, OpenClPlatform
from mlprobe.scan.host import ReplayHost
from mlprobe.probes import opencl
from mlprobe.probes.opencl import gpu_from_device, is_gpu_device, parse_clinfo, parse_clinfo_json

from .conftest import FIXTURES
from .fuzz import examples, mutated

POCL = "linux-nogpu-amd-epyc-pocl-opencl-cpu"
MALI = "linux-arm-mali-g610-pocl-clinfo"
INTEL_SDK = "linux-intel-hd-graphics-haswell-intel-sdk-clinfo"
M4 = "darwin-apple-m4-pro-opencl-clinfo"
KAVERI = "linux-amd-a10-7850k-kaveri-apu-amd-app-sdk-clinfo"
CLINFO_TEXT = sorted(FIXTURES.glob("*/clinfo.txt"))
CLINFO_JSON = sorted(FIXTURES.glob("*/clinfo.json"))


def _text(folder: str, name: str = "clinfo.txt") -> str:
    return decode((FIXTURES / folder / name).read_bytes())


def _gpus(platforms: List[OpenClPlatform]) -> List[Any]:
    return [gpu_from_device(d, p) for p in platforms for d in p.devices if is_gpu_device(d)]


def _devices(platforms: List[OpenClPlatform]) -> List[OpenClDevice]:
    return [d for p in platforms for d in p.devices]


# -- PoCL (CPU only) -----------------------------------------------------------------------------


def test_pocl_text_one_cpu_device_no_gpu() -> None:
    (plat,) = parse_clinfo(_text(POCL))
    assert (plat.name, plat.vendor) == ("Portable Computing Language", "The pocl project")
    assert plat.version and plat.version.startswith("OpenCL 3.0 PoCL 3.1+debian")
    (dev,) = plat.devices
    assert (dev.name, dev.type, dev.vendor) == ("pthread-skylake-avx512-AMD EPYC", "CPU", "AuthenticAMD")
    assert (dev.compute_units, dev.global_memory_bytes, dev.fp64, dev.fp16) == (2, 4499761152, True, False)
    assert dev.driver_version == "3.1+debian" and dev.opencl_c_version == "OpenCL C 1.2 PoCL"
    assert not is_gpu_device(dev)


def test_pocl_json_has_duplicate_keys_and_still_parses_like_the_text() -> None:
    raw = _text(POCL, "clinfo.json")
    dupes: List[str] = []

    def hook(pairs: List[Any]) -> dict:
        keys = [k for k, _ in pairs]
        dupes.extend(k for k in set(keys) if keys.count(k) > 1)
        return dict(pairs)

    json.loads(raw, object_pairs_hook=hook)
    assert "OpenCL C" in dupes  # clinfo 3.0.23 repeats this key in CL_DEVICE_OPENCL_C_ALL_VERSIONS
    from_json, from_text = parse_clinfo_json(raw), parse_clinfo(_text(POCL))
    assert [p.name for p in from_json] == [p.name for p in from_text]
    (jd,), (td,) = from_json[0].devices, from_text[0].devices
    for field in ("name", "type", "vendor", "driver_version", "version", "opencl_c_version", "compute_units",
                  "global_memory_bytes", "fp16", "fp64", "host_unified_memory"):
        assert getattr(jd, field) == getattr(td, field), field


def test_pocl_probe_finds_the_runtime_but_no_gpu() -> None:
    c = opencl.probe(ReplayHost(FIXTURES / POCL))
    assert c.status == "ok" and c.gpus == []
    assert [p.name for p in c.runtimes.opencl.platforms] == ["Portable Computing Language"]


# -- libmali + PoCL (aarch64) --------------------------------------------------------------------


def test_mali_gpu_and_pocl_cpu() -> None:
    arm, pocl = parse_clinfo(_text(MALI))
    assert (arm.name, arm.vendor, pocl.name) == ("ARM Platform", "ARM", "Portable Computing Language")
    (gpu_dev,), (cpu_dev,) = arm.devices, pocl.devices
    assert (gpu_dev.name, gpu_dev.type, gpu_dev.compute_units) == ("Mali-LODX r0p0", "GPU", 4)
    assert (gpu_dev.fp16, gpu_dev.fp64, gpu_dev.host_unified_memory) == (True, False, True)
    assert (cpu_dev.name, cpu_dev.type) == ("pthread-cortex-a55", "CPU") and not is_gpu_device(cpu_dev)
    (gpu,) = _gpus([arm, pocl])
    # Unified memory: an integrated GPU whose "global memory" is system RAM.
    assert (gpu.vendor, gpu.integrated, gpu.memory_bytes, gpu.apis) == ("arm", True, None, ("opencl",))


def test_stray_driver_line_is_not_a_device() -> None:
    text = _text(MALI)
    assert "arm_release_ver of this libmali" in text
    assert len(_devices(parse_clinfo(text))) == 2


# -- Intel's 2016 SDK runtime, Apple, AMD APP SDK --------------------------------------------------


def test_intel_sdk_igpu() -> None:
    (plat,) = parse_clinfo(_text(INTEL_SDK))
    assert (plat.name, plat.vendor, plat.version) == ("Intel(R) OpenCL", "Intel(R) Corporation", "OpenCL 1.2")
    gpu_dev, cpu_dev = plat.devices
    assert (gpu_dev.name, gpu_dev.type, gpu_dev.driver_version) == ("Intel(R) HD Graphics", "GPU", "16.4.4.47109")
    assert cpu_dev.type == "CPU" and cpu_dev.name == "Intel(R) Core(TM) i5-4590 CPU @ 3.30GHz"
    (gpu,) = _gpus([plat])
    assert (gpu.vendor, gpu.integrated, gpu.memory_bytes, gpu.compute_units) == ("intel", True, None, 20)
    assert gpu.pci_device_id is None  # no "[0x....]" in this runtime's device names


def test_apple_gpu_through_opencl() -> None:
    (plat,) = parse_clinfo(_text(M4))
    (dev,) = plat.devices
    assert (plat.name, dev.name, dev.type, dev.host_unified_memory) == ("Apple", "Apple M4 Pro", "GPU", True)
    (gpu,) = _gpus([plat])
    assert (gpu.vendor, gpu.integrated, gpu.memory_bytes) == ("apple", True, None)


def test_amd_app_sdk_old_layout() -> None:
    (plat,) = parse_clinfo(_text(KAVERI))
    # "Platform Version:" comes before "Platform Name:" in this layout.
    assert (plat.name, plat.version) == ("AMD Accelerated Parallel Processing", "OpenCL 2.0 AMD-APP (1598.5)")
    gpu_dev, cpu_dev = plat.devices
    assert (gpu_dev.type, gpu_dev.name, gpu_dev.board_name) == ("GPU", "Spectre", "AMD Radeon(TM) R7 Graphics")
    assert (gpu_dev.pci_bus_id, gpu_dev.host_unified_memory, gpu_dev.fp64, gpu_dev.fp16) == (
        "0000:00:01.0", True, True, False)
    assert cpu_dev.type == "CPU" and "Radeon" in (cpu_dev.name or "") and not is_gpu_device(cpu_dev)
    (gpu,) = _gpus([plat])
    assert (gpu.vendor, gpu.name, gpu.integrated, gpu.pci_bus_id) == (
        "amd", "AMD Radeon(TM) R7 Graphics", True, "0000:00:01.0")


# -- NEO / Beignet naming, helpers ----------------------------------------------------------------


@pytest.mark.parametrize("name, pci, product", [
    ("Intel(R) UHD Graphics 630 [0x3e92]", "0x3e92", "Intel(R) UHD Graphics 630"),  # sycl-ls / clinfo on NEO
    ("Intel(R) Graphics [0x46d1]", "0x46d1", "Intel(R) Graphics"),  # Mesa and pci.ids name no product
    ("Intel(R) Graphics [0x7D55]", "0x7d55", "Intel(R) Arc(TM) Graphics"),
    ("Intel(R) Graphics [0xe223]", "0xe223", "Intel(R) Arc(TM) Pro B70 Graphics"),  # pci.ids' product
    ("Intel(R) Arc(TM) A770 Graphics", None, "Intel(R) Arc(TM) A770 Graphics"),
    ("Intel(R) HD Graphics Haswell GT2 Desktop", None, "Intel(R) HD Graphics Haswell GT2 Desktop"),  # Beignet
])
def test_neo_device_names_give_the_pci_device_id(name: str, pci: Any, product: str) -> None:
    dev = OpenClDevice(name=name, type="GPU", vendor="Intel(R) Corporation", host_unified_memory=True)
    plat = OpenClPlatform(name="Intel(R) OpenCL Graphics", vendor="Intel(R) Corporation")
    gpu = gpu_from_device(dev, plat)
    assert (gpu.vendor, gpu.pci_device_id, gpu.name) == ("intel", pci, product)
    assert (gpu.architecture is not None) == (pci is not None)


def test_beignet_platform_vendor_is_intel() -> None:
    dev = OpenClDevice(name="Intel(R) HD Graphics Haswell GT2 Desktop", type="GPU", vendor="Intel")
    assert gpu_from_device(dev, OpenClPlatform(name="Intel Gen OCL Driver", vendor="Intel")).vendor == "intel"


def test_discrete_gpu_keeps_its_memory() -> None:
    dev = OpenClDevice(name="NVIDIA GeForce GTX 1650", type="GPU", vendor="NVIDIA Corporation",
                       global_memory_bytes=4093509632, host_unified_memory=False)
    gpu = gpu_from_device(dev, OpenClPlatform(name="NVIDIA CUDA"))
    assert (gpu.integrated, gpu.memory_bytes) == (False, 4093509632)


@pytest.mark.parametrize("value, bus", [
    ("PCI-E, 0000:03:00.0", "0000:03:00.0"), ("PCI-E, 01:00.0", "0000:01:00.0"),
    ("PCI[ B#0, D#7, F#0 ]", "0000:00:07.0"), ("PCI[ B#10, D#0, F#1 ]", "0000:0a:00.1"),
    ("PCI[ B#999, D#0, F#0 ]", None), ("n/a", None),
])
def test_topology_forms(value: str, bus: Any) -> None:
    assert opencl._topology_bus_id(value) == bus


@pytest.mark.parametrize("value, kind", [
    ("GPU", "GPU"), ("CL_DEVICE_TYPE_GPU", "GPU"), (["CL_DEVICE_TYPE_CPU"], "CPU"), ("Accelerator", "ACCELERATOR"),
    ("CPU, DEFAULT", "CPU"), ("CPGPU", None), ("", None), (None, None), (3, None),
])
def test_device_type_words(value: Any, kind: Any) -> None:
    assert opencl._norm_type(value) == kind


def test_unknown_device_type_is_not_a_gpu() -> None:
    assert not is_gpu_device(OpenClDevice(name="NVIDIA GeForce RTX 3090", vendor="NVIDIA Corporation"))


def test_unrecognisable_input() -> None:
    with pytest.raises(ParseError):
        parse_clinfo("bash: clinfo: command not found\n")
    with pytest.raises(ParseError):
        parse_clinfo_json("Number of platforms 0")
    with pytest.raises(ParseError):
        parse_clinfo_json('{"devices": []}')
    assert parse_clinfo_json('{"platforms": []}') == []


def test_json_after_a_prompt_and_colours() -> None:
    text = "user@host:~$ clinfo --json\n\x1b[0m" + _text(POCL, "clinfo.json")
    assert [p.name for p in parse_clinfo_json(text)] == ["Portable Computing Language"]


# -- mutations -----------------------------------------------------------------------------------


def _gpu_count(parser: Any, text: str) -> int:
    try:
        return len(_gpus(parser(text)))
    except ParseError:
        return 0


@pytest.mark.parametrize("path", CLINFO_TEXT, ids=[p.parent.name for p in CLINFO_TEXT])
def test_clinfo_text_survives_mutations(path: Path) -> None:
    original = decode(path.read_bytes())
    limit = _gpu_count(parse_clinfo, original)

    @settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutated(original))
    def check(text: str) -> None:
        assert _gpu_count(parse_clinfo, text) <= limit

    check()


@pytest.mark.parametrize("path", CLINFO_JSON, ids=[p.parent.name for p in CLINFO_JSON])
def test_clinfo_json_survives_mutations(path: Path) -> None:
    original = decode(path.read_bytes())
    limit = _gpu_count(parse_clinfo_json, original)

    @settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutated(original))
    def check(text: str) -> None:
        assert _gpu_count(parse_clinfo_json, text) <= limit

    check()


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated(decode((FIXTURES / POCL / "clinfo.txt").read_bytes())))
def test_a_pocl_cpu_device_is_never_a_gpu(text: str) -> None:
    try:
        platforms = parse_clinfo(text)
    except ParseError:
        return
    assert not any(is_gpu_device(d) for d in _devices(platforms))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["CL_PLATFORM_NAME", "CL_DEVICE_NAME", "CL_DEVICE_TYPE", "type", "online", "CL_DEVICE_EXTENSIONS",
                         "CL_DEVICE_TOPOLOGY_AMD", "CL_DEVICE_PCI_BUS_INFO_KHR", "CL_DEVICE_GLOBAL_MEM_SIZE",
                         "CL_DEVICE_HOST_UNIFIED_MEMORY", "bus", "device", "function", "x"]), inner, max_size=6),
    max_leaves=25)


@settings(max_examples=examples(100), deadline=None)
@given(st.text(max_size=400))
def test_any_text_gives_platforms_or_a_parse_error(text: str) -> None:
    for parser in (parse_clinfo, parse_clinfo_json):
        try:
            _gpus(parser(text))
        except ParseError:
            pass


@settings(max_examples=examples(100), deadline=None)
@given(JSON_VALUES, JSON_VALUES)
def test_any_json_shape_gives_platforms_or_a_parse_error(platforms: Any, devices: Any) -> None:
    try:
        _gpus(parse_clinfo_json(json.dumps({"platforms": platforms, "devices": devices})))
    except ParseError:
        pass


@pytest.mark.parametrize("folder, gfx, arch", [
    ("linux-amd-radeon-vii-gfx906-pal-clinfo", "gfx906", "GCN5.1"),
    ("windows-amd-gfx90c-nvidia-rtx3050-laptop-app-clinfo", "gfx90c", "GCN5"),
])
def test_amds_opencl_device_name_is_the_hardware_target(folder: str, gfx: str, arch: str) -> None:
    """AMD's OpenCL names the device by its gfx target (`Name: gfx906`): that is the hardware's own
    target (gfx_target), which the plan's ROCm rules read, not only the runtime's."""
    from mlprobe.probes import opencl

    amd = [g for g in opencl.probe(ReplayHost(Path(__file__).parent.parent / "fixtures" / folder)).gpus
           if g.vendor == "amd"]
    assert [(g.gfx_target, g.runtime_gfx_target, g.architecture) for g in amd] == [(gfx, gfx, arch)]
