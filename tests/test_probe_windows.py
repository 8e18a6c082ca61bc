"""Windows probe: dxdiag and Win32_VideoController parsers on real captures, the GPU/not-GPU and
DirectML rules, NVIDIA driver numbering, WSL2 GPU paravirtualisation, and mutation fuzzing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, List, Tuple

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mlprobe.errors import ParseError
from mlprobe.scan.host import ReplayHost
from mlprobe.probes import windows as win

from .fuzz import examples, mutated

FIX = Path(__file__).resolve().parent.parent / "fixtures"
DXDIAG = sorted(p.parent.name for p in FIX.glob("windows-*/dxdiag.txt"))


def read(folder: str, name: str = "dxdiag.txt") -> str:
    # dxdiag writes the ANSI code page (cp1252 here), not UTF-8: decode as the Host does.
    return (FIX / folder / name).read_bytes().decode("utf-8", errors="replace")


def gpus_of(adapters: List[win.Adapter]) -> int:
    return sum(a.count for a in adapters if win.is_gpu(a))


# Public samples of `wmic path win32_VideoController get ... /format:list` output.
# (1) a Go test of a GPU inventory collector (RTX 4070 Ti SUPER + Ryzen 7000 iGPU, CRLF).
WMIC_TWO = (
    "\r\nAdapterCompatibility=NVIDIA\r\nDriverVersion=32.0.15.6636\r\n"
    "Name=NVIDIA GeForce RTX 4070 Ti SUPER\r\n"
    "PNPDeviceID=PCI\\VEN_10DE&DEV_2705&SUBSYS_89571043&REV_A1\\4&2E5A2E5B&0&0008\r\n\r\n"
    "AdapterCompatibility=Advanced Micro Devices, Inc.\r\nDriverVersion=31.0.24033.1003\r\n"
    "Name=AMD Radeon(TM) Graphics\r\n"
    "PNPDeviceID=PCI\\VEN_1002&DEV_164E&SUBSYS_88771043&REV_C1\\4&1B2A7A18&0&0041\r\n\r\n"
)
# (2) Android emulator's gpuinfo test (android/opengl/gpuinfo_unittest.cpp): a laptop with an AMD
# dGPU whose AdapterRAM reads 4293918720 (the 32-bit cap) and an Intel iGPU; ampersands are stored
# HTML-escaped in that file, as here.
WMIC_DUAL = "\r\n".join(
    [
        "AdapterCompatibility=Advanced Micro Devices, Inc.",
        "AdapterDACType=Internal DAC(400MHz)",
        "AdapterRAM=4293918720",
        "Caption=AMD Radeon (TM) R5 M335",
        "DeviceID=VideoController1",
        "DriverVersion=15.300.1025.1001",
        "Name=AMD Radeon (TM) R5 M335",
        "PNPDeviceID=PCI\\VEN_1002&amp;DEV_6660&amp;SUBSYS_06B21028&amp;REV_81\\4&amp;2370267D&amp;0&amp;00E0",
        "VideoProcessor=AMD Radeon Graphics Processor (0x6660)",
        "",
        "",
        "AdapterCompatibility=Intel Corporation",
        "AdapterDACType=Internal",
        "AdapterRAM=1073741824",
        "Caption=Intel(R) HD Graphics 520",
        "DeviceID=VideoController2",
        "DriverVersion=10.18.15.4281",
        "Name=Intel(R) HD Graphics 520",
        "PNPDeviceID=PCI\\VEN_8086&amp;DEV_1916&amp;SUBSYS_06B21028&amp;REV_07\\3&amp;11583659&amp;0&amp;10",
        "VideoProcessor=Intel(R) HD Graphics Family",
        "",
    ]
)
# (3) same source: a VNC mirror driver (ROOT\DISPLAY) next to a GTX 660M.
WMIC_VNC = "\r\n".join(
    [
        "AdapterCompatibility=RealVNC",
        "AdapterRAM=",
        "Caption=VNC Mirror Driver",
        "DriverVersion=1.8.0.0",
        "Name=VNC Mirror Driver",
        "PNPDeviceID=ROOT\\DISPLAY\\0000",
        "",
        "",
        "AdapterCompatibility=NVIDIA",
        "AdapterRAM=2147483648",
        "Caption=NVIDIA GeForce GTX 660M ",
        "DriverVersion=10.18.13.6472",
        "Name=NVIDIA GeForce GTX 660M ",
        "PNPDeviceID=PCI\\VEN_10DE&amp;DEV_0FD4&amp;SUBSYS_21151043&amp;REV_A1\\4&amp;169534F2&amp;0&amp;0008",
        "",
    ]
)
# (4) PowerShell ConvertTo-Json of a Select-Object without PNPDeviceID, prompt line included
# (a PowerShell cheat sheet in a public repository).
PS_JSON = (
    "PS H:\\> Get-WmiObject Win32_VideoController | Select-Object Name, AdapterCompatibility, "
    'VideoProcessor | ConvertTo-Json\n{\n    "Name":  "Intel(R) Iris(R) Xe Graphics",\n'
    '    "AdapterCompatibility":  "Intel Corporation",\n'
    '    "VideoProcessor":  "Intel(R) Iris(R) Xe Graphics Family"\n}\n'
)


# -- dxdiag -----------------------------------------------------------------------------------------------


def test_dxdiag_two_monitors_are_one_gpu() -> None:
    dx = win.parse_dxdiag(read("windows-nvidia-rtx3090-dxdiag"))
    gpus = [a for a in dx.adapters if win.is_gpu(a)]
    assert len(gpus) == 1 and gpus[0].count == 1
    a = gpus[0]
    assert (a.name, a.pci_vendor_id, a.pci_device_id, a.driver_version_raw) == (
        "NVIDIA GeForce RTX 3090",
        "0x10de",
        "0x2204",
        "31.0.15.3118",
    )
    assert a.dedicated_mib == 24340 and a.ddi_version == 12 and "12_1" in a.feature_levels
    assert a.cuda_driver  # System Devices lists nvcuda.dll for 10DE:2204


def test_dxdiag_virtual_adapter_is_not_a_gpu() -> None:
    dx = win.parse_dxdiag(read("windows-nvidia-rtx4060-laptop-intel-uhd-dxdiag"))
    names = {a.name: win.is_gpu(a) for a in dx.adapters}
    assert names == {
        "NVIDIA GeForce RTX 4060 Laptop GPU": True,
        "Intel(R) UHD Graphics": True,
        "SuperDisplay Virtual Adapter": False,
    }


@pytest.mark.parametrize(
    "folder,build,cpu_model,threads",
    [
        ("windows-nvidia-rtx3090-dxdiag", 19045, "AMD Ryzen 7 5800X 8-Core Processor", 16),
        (
            "windows-nvidia-rtx4060-laptop-intel-uhd-dxdiag",
            22631,
            "13th Gen Intel(R) Core(TM) i7-13700HX",
            24,
        ),
        ("windows-amd-rx5700xt-gfx1010-dxdiag", 18363, "AMD Ryzen 7 2700 Eight-Core Processor", 16),
        ("windows-amd-ryzen-z1-extreme-igpu-gfx1103-dxdiag", 26220, "AMD Ryzen Z1 Extreme", 16),
    ],
)
def test_dxdiag_system_information(folder: str, build: int, cpu_model: str, threads: int) -> None:
    dx = win.parse_dxdiag(read(folder))
    os_facts = win.os_from_dxdiag(dx)
    assert os_facts is not None and os_facts.windows_build == build and os_facts.system == "Windows"
    assert os_facts.release == ("11" if build >= 22000 else "10")
    cpu = win.cpu_from_dxdiag(dx)
    assert cpu is not None and (cpu.model, cpu.threads, cpu.arch) == (cpu_model, threads, "x86_64")


def test_dxdiag_facts() -> None:
    dx = win.parse_dxdiag(read("windows-nvidia-rtx4060-laptop-intel-uhd-dxdiag"))
    facts = {
        g.name: g for g in (win.to_gpu_facts(a, 22631, True, True) for a in dx.adapters if win.is_gpu(a))
    }
    nv = facts["NVIDIA GeForce RTX 4060 Laptop GPU"]
    assert (nv.driver_version, nv.driver_version_raw, nv.integrated, nv.apis) == (
        "552.44",
        "31.0.15.5244",
        False,
        ("cuda", "directml"),
    )
    assert nv.memory_bytes == 7957 * 1024 * 1024 and nv.compute_capability == "8.9"
    intel = facts["Intel(R) UHD Graphics"]
    # an integrated GPU's "dedicated" carve-out is not its memory
    assert (intel.integrated, intel.memory_bytes, intel.apis) == (True, None, ("directml",))


def test_dxdiag_amd_gfx_targets_from_pci_ids() -> None:
    rx = win.parse_dxdiag(read("windows-amd-rx5700xt-gfx1010-dxdiag")).adapters[0]
    g = win.to_gpu_facts(rx, 18363, True, True)
    assert (g.gfx_target, g.integrated, g.memory_bytes) == ("gfx1010", False, 8151 * 1024 * 1024)
    z1 = win.parse_dxdiag(read("windows-amd-ryzen-z1-extreme-igpu-gfx1103-dxdiag")).adapters[0]
    g = win.to_gpu_facts(z1, 26220, True, True)
    assert (g.gfx_target, g.integrated) == ("gfx1103", True)


def test_directml_rule() -> None:
    a = win.parse_dxdiag(read("windows-nvidia-rtx3090-dxdiag")).adapters[0]
    assert "directml" in win.to_gpu_facts(a, 19045, True, True).apis
    assert "directml" not in win.to_gpu_facts(a, 15063, True, True).apis  # Windows 10 1703: too old
    assert "directml" in win.to_gpu_facts(a, None, True, True).apis  # build unknown, DirectX 12
    old = win.Adapter(
        name="Old GPU",
        pci_vendor_id="0x10de",
        pci_device_id="0x0fd4",
        pci=True,
        driver_version_raw="10.18.13.6472",
        ddi_version=11,
        feature_levels=("11_0", "10_1"),
    )
    assert "directml" not in win.to_gpu_facts(old, 19045, True, True).apis


def test_dxdiag_rejects_other_text() -> None:
    with pytest.raises(ParseError):
        win.parse_dxdiag("Microsoft Windows [Version 10.0.19045.2604]\n")


# -- Win32_VideoController ------------------------------------------------------------------------------


def test_wmic_list_two_adapters() -> None:
    ads = win.parse_win32_list(WMIC_TWO)
    facts = [win.to_gpu_facts(a, 22631, False, False) for a in ads if win.is_gpu(a)]
    assert [(g.vendor, g.name, g.driver_version, g.pci_device_id) for g in facts] == [
        ("nvidia", "NVIDIA GeForce RTX 4070 Ti SUPER", "566.36", "0x2705"),
        ("amd", "AMD Radeon(TM) Graphics", "31.0.24033.1003", "0x164e"),
    ]
    assert facts[1].integrated is True and facts[1].gfx_target == "gfx1036"
    assert all("directml" in g.apis and "cuda" not in g.apis for g in facts)


def test_wmic_adapter_ram_cap_is_not_memory() -> None:
    ads = win.parse_win32_list(WMIC_DUAL)
    facts = {g.vendor: g for g in (win.to_gpu_facts(a, None, False, False) for a in ads if win.is_gpu(a))}
    assert facts["amd"].memory_bytes is None and any("32-bit" in n for n in facts["amd"].notes)
    assert facts["intel"].integrated is True and facts["intel"].memory_bytes is None


def test_wmic_mirror_driver_is_not_a_gpu() -> None:
    ads = win.parse_win32_list(WMIC_VNC)
    facts = [win.to_gpu_facts(a, None, False, False) for a in ads if win.is_gpu(a)]
    assert [(g.name, g.driver_version, g.memory_bytes) for g in facts] == [
        ("NVIDIA GeForce GTX 660M", "364.72", 2147483648)
    ]


def test_powershell_json_single_object_and_list() -> None:
    ads = win.parse_win32_json(PS_JSON)
    assert [(a.name, win.is_gpu(a)) for a in ads] == [("Intel(R) Iris(R) Xe Graphics", True)]
    listed = json.dumps(
        [
            {"Name": "Microsoft Basic Render Driver", "PNPDeviceID": "ROOT\\BasicRender\\0000"},
            {
                "Name": "NVIDIA GeForce RTX 3090",
                "AdapterRAM": 4293918720,
                "DriverVersion": "31.0.15.3118",
                "PNPDeviceID": "PCI\\VEN_10DE&DEV_2204&SUBSYS_147D10DE&REV_A1\\4&306FCEE7&0&001A",
            },
        ]
    )
    ads = win.parse_win32_json(listed)
    assert [a.name for a in ads if win.is_gpu(a)] == ["NVIDIA GeForce RTX 3090"]
    with pytest.raises(ParseError):
        win.parse_win32_json("Get-CimInstance : Invalid class\n")


@pytest.mark.parametrize(
    "raw,nvidia",
    [
        ("31.0.15.5222", "552.22"),
        ("25.21.14.1701", "417.01"),
        ("31.0.15.3118", "531.18"),
        ("10.18.13.6472", "364.72"),
        ("32.0.15.6636", "566.36"),
        ("9.18.13.2086", "320.86"),
        ("31.0.15.5244", "552.44"),
        ("not a version", None),
    ],
)
def test_nvidia_windows_driver_numbering(raw: str, nvidia: str) -> None:
    assert win.nvidia_driver_from_windows(raw) == nvidia


# -- WSL and the probe -------------------------------------------------------------------------------------


def test_wsl_dxg(tmp_path: Path) -> None:
    (tmp_path / "wsl-dxg.json").write_text(
        json.dumps(
            {
                "dev_dxg": True,
                "wsl_lib": [
                    "libcuda.so",
                    "libcuda.so.1",
                    "libd3d12.so",
                    "libd3d12core.so",
                    "libdxcore.so",
                    "nvidia-smi",
                ],
            }
        )
    )
    (tmp_path / "rocminfo.txt").write_text("")
    out = win.probe(ReplayHost(tmp_path))
    dml = out.runtimes.directml
    assert dml.wsl is True and dml.d3d12 and dml.dxcore and dml.cuda
    assert out.gpus == [] and out.os is None


@pytest.mark.parametrize("folder", DXDIAG)
def test_probe_on_dxdiag_bundles(folder: str) -> None:
    out = win.probe(ReplayHost(FIX / folder))
    assert out.status == "ok" and out.gpus and out.os is not None and out.cpu is not None
    if any("directml" in g.apis for g in out.gpus):
        assert out.runtimes.directml.windows_build == out.os.windows_build
    else:  # an old Windows or an old-DirectX GPU: no DirectML runtime claimed
        assert out.runtimes.directml is None
    assert all(g.sources == ("windows",) for g in out.gpus)


def test_probe_absent(tmp_path: Path) -> None:
    (tmp_path / "proc-cpuinfo.txt").write_text("processor : 0\n")
    assert win.probe(ReplayHost(tmp_path)).status == "absent"


# -- mutation fuzzing -------------------------------------------------------------------------------------


CASES: List[Tuple[str, Callable[[str], List[win.Adapter]], str]] = [
    (f"{f}/dxdiag.txt", lambda t: win.parse_dxdiag(t).adapters, read(f)) for f in DXDIAG
] + [
    ("wmic-two", win.parse_win32_list, WMIC_TWO),
    ("wmic-dual", win.parse_win32_list, WMIC_DUAL),
    ("wmic-vnc", win.parse_win32_list, WMIC_VNC),
    ("ps-json", win.parse_win32_json, PS_JSON),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@settings(
    max_examples=examples(50), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data())
def test_parsers_survive_mutation(
    case: Tuple[str, Callable[[str], List[win.Adapter]], str], data: st.DataObject
) -> None:
    _label, parser, text = case
    original = gpus_of(parser(text))
    try:
        adapters = parser(data.draw(mutated(text)))
    except ParseError:
        return
    assert gpus_of(adapters) <= original
    for a in adapters:
        if win.is_gpu(a):
            win.to_gpu_facts(a, None, True, True)  # never raises


@settings(max_examples=examples(80), deadline=None)
@given(blob=st.binary(max_size=2000))
def test_parsers_survive_random_bytes(blob: bytes) -> None:
    text = blob.decode("utf-8", errors="replace")
    for parser in (win.parse_dxdiag, win.parse_win32_json, win.parse_win32_list, win.parse_wsl_dxg):
        try:
            parser(text)
        except ParseError:
            pass


def test_wmic_list_records_split_at_blank_lines_when_properties_differ() -> None:
    """A record ends at the blank lines between records even when the next record begins with a
    property the previous one lacked (a list view that hides empty properties, a trimmed paste); the
    property repeat alone gave the Intel adapter's AdapterCompatibility to the AMD one."""
    lines = WMIC_DUAL.split("\r\n")
    first = [x for x in lines[:9] if not x.startswith("AdapterCompatibility=")]
    text = "\r\n".join(first + lines[9:])
    ads = win.parse_win32_list(text)
    assert [(a.name, a.manufacturer) for a in ads] == [
        ("AMD Radeon (TM) R5 M335", None),
        ("Intel(R) HD Graphics 520", "Intel Corporation"),
    ]


def test_wmic_list_with_cr_cr_lf_line_ends_reads_like_crlf() -> None:
    """wmic redirected to a file writes CR CR LF; read as two line ends that is a blank line after
    every line, which must neither split a record nor merge two."""
    for sample in (WMIC_TWO, WMIC_DUAL, WMIC_VNC):
        crcrlf = sample.replace("\r\n", "\r\r\n")
        crlf_lf = sample.replace("\r\n", "\n\n")
        want = [(a.name, a.pnp, a.driver_version_raw) for a in win.parse_win32_list(sample)]
        assert len(want) == 2
        assert [(a.name, a.pnp, a.driver_version_raw) for a in win.parse_win32_list(crcrlf)] == want
        assert [(a.name, a.pnp, a.driver_version_raw) for a in win.parse_win32_list(crlf_lf)] == want


def test_wmic_list_a_repeated_last_line_is_no_new_adapter_but_twin_gpus_are_two() -> None:
    cut = WMIC_TWO.rstrip("\r\n") + "\r\nPNPDeviceID=PCI\\VEN_1002&DEV_164E"
    assert gpus_of(win.parse_win32_list(cut)) == 2
    # two identical cards, pasted without the blank lines between records
    one = "Name=NVIDIA GeForce RTX 3090\nPNPDeviceID=PCI\\VEN_10DE&DEV_2204&SUBSYS_38801462&REV_A1\\4&1\n"
    two = one.replace("\\4&1", "\\4&2")
    ads = win.parse_win32_list(one + two)
    assert [a.pnp for a in ads] == ["PCI\\VEN_10DE&DEV_2204&SUBSYS_38801462&REV_A1\\4&1",
                                    "PCI\\VEN_10DE&DEV_2204&SUBSYS_38801462&REV_A1\\4&2"]


def test_a_property_read_twice_inside_a_delimited_record_is_not_a_record() -> None:
    """Hypothesis found it: where blank lines delimit the records, a PNPDeviceID line pasted twice
    (once garbled) inside the second record split it into a third, phantom GPU."""
    garbled = WMIC_TWO.replace(
        "PNPDeviceID=PCI\\VEN_1002&DEV_164E",
        "PNPDeviceID=PCI\\VEN_1002&DEV_0164E&SUBSYS_88771043&REV_C1\\4&1B2A7A18&0&0041\r\n"
        "PNPDeviceID=PCI\\VEN_1002&DEV_164E")
    assert garbled != WMIC_TWO
    names = [a.name for a in win.parse_win32_list(garbled)]
    assert names == [a.name for a in win.parse_win32_list(WMIC_TWO)] and len(names) == 2


def test_adapters_that_are_not_gpus_come_from_sourced_knowledge_rows() -> None:
    from mlprobe.model.hw.display import is_not_gpu_name, not_gpu_kind, virtual_display_name_rows

    doc = json.loads((Path(win.__file__).parent.parent / "knowledge" / "pci_display.json").read_text("utf-8"))
    keys = set(doc["source_key"])
    rows = virtual_display_name_rows()
    assert rows and all(r["source"] in keys for r in rows)
    for r in rows:
        for example in r["examples"]:
            if not example.startswith("("):  # a described family, not a name Windows prints
                assert is_not_gpu_name(example), (r["pattern"], example)
    assert not_gpu_kind("Parsec Virtual Display Adapter") in ("virtual-monitor", "streaming")
    # The Basic Display Adapter on a real card is that card without its driver: it stays a GPU.
    assert not is_not_gpu_name("Microsoft Basic Display Adapter") and not is_not_gpu_name("NVIDIA GeForce RTX 4090")
    # The real capture whose virtual adapter copies the RTX 4090's PCI ids (10DE:2684).
    out = win.probe(ReplayHost(FIX / "windows-nvidia-rtx4090-parsec-virtual-display-dxdiag"))
    assert [g.name for g in out.gpus] == ["NVIDIA GeForce RTX 4090"]


# -- the Adrenalin driver's date against AMD's native Windows wheels ---------------------------------------

@pytest.mark.parametrize("text, want", [
    ("6/30/2025 5:00:00 PM", "2025-06-30"),        # month first (en-US dxdiag)
    ("27/02/2020 21:00:00", "2020-02-27"),         # day first
    ("07/01/2025", "2025"),                        # either way round: the year only
    ("20200227000000.000000-000", "2020-02-27"),   # WMI CIM_DATETIME
    ("2023-02-23T00:00:00Z", "2023-02-23"),        # PowerShell's JSON
    ("Unknown", None), ("", None), ("13/13/2020", None),
])
def test_driver_dates_in_every_order(text: str, want: object) -> None:
    from mlprobe.probes.windows_adapter import driver_date

    assert driver_date(text) == want


def _amd_plan(folder: str, date: object) -> dict:
    from dataclasses import replace

    from mlprobe.plan.planner import build_plan
    from mlprobe.scan.run import scan

    facts = scan(ReplayHost(FIX / folder))
    if date != "as captured":
        facts = replace(facts, gpus=tuple(replace(g, driver_date=date) if g.vendor == "amd" else g for g in facts.gpus))
    doc = build_plan(facts, framework="torch", python="3.12").to_json()
    (rec,) = [r for r in doc["recommended"] if r["recipe"] == "torch-rocm-amd"]
    return rec


def test_a_driver_older_than_amds_windows_wheels_is_the_first_step() -> None:
    rec = _amd_plan("windows-amd-rx5700xt-gfx1010-dxdiag", "as captured")  # Driver Date 27/02/2020
    (step,) = rec["prerequisites"]
    assert "2020-02-27" in step and "Adrenalin" in step and "7.14" in step
    # a driver from after the wheels' release needs no step; one known only by that year is not checked
    assert "prerequisites" not in _amd_plan("windows-amd-rx5700xt-gfx1010-dxdiag", "2026-08-01")
    unsure = _amd_plan("windows-amd-rx5700xt-gfx1010-dxdiag", "2026")
    assert "prerequisites" not in unsure and any("Adrenalin" in u for u in unsure["unknown"])
