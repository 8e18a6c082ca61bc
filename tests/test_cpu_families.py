"""CPUs known by name only (dxdiag's Processor line, WMI's Win32_Processor): the family table settles
AVX where it can and the plan says which family and source, or says AVX is unknown; Win32_Processor's
parsers; dxdiag text in a localised code page; old Windows versions read as themselves."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any, Dict, Optional

import pytest

from mlprobe.errors import ParseError
from mlprobe.plan.planner import make_plan
from mlprobe.plan.predicates_hw import cpu_family, flags_from_family
from mlprobe.probes import cpu as cpu_probe, windows
from mlprobe.recipes import knowledge
from mlprobe.scan.host import ReplayHost
from mlprobe.scan.run import facts_to_report, scan

from .conftest import FIXTURES
from .hosts import DictHost

KB = knowledge()


def _report(folder: str) -> Dict[str, Any]:
    return facts_to_report(scan(ReplayHost(FIXTURES / folder)))


# -- the family table --------------------------------------------------------------------------------------


def _captured_cpus() -> list:
    """Every real capture with an x86-64 model name and its flags."""
    out = []
    readers = (("proc-cpuinfo.txt", cpu_probe.parse_proc_cpuinfo),
               ("lscpu.txt", lambda t: cpu_probe.cpu_from_lscpu(cpu_probe.parse_lscpu(t))),
               ("sysctl.txt", lambda t: cpu_probe.cpu_from_sysctl(cpu_probe.parse_sysctl(t))))
    for folder in sorted(FIXTURES.iterdir()):
        for name, parse in readers:
            path = folder / name
            if not path.is_file() or folder.name.startswith("synthetic-"):
                continue
            try:
                got = parse(path.read_text(encoding="utf-8", errors="replace"))
            except ParseError:
                continue
            if got.arch == "x86_64" and got.flags and got.model:
                out.append((f"{folder.name}/{name}", got.model, set(got.flags)))
    return out


CAPTURED = _captured_cpus()


def test_the_table_agrees_with_every_real_capture_that_lists_flags() -> None:
    matched = 0
    for where, model, flags in CAPTURED:
        row = cpu_family(model, KB)
        if row is None:
            continue
        matched += 1
        assert row["avx"] == ("avx" in flags), (where, model, row["id"])
        assert row["avx2"] == ("avx2" in flags), (where, model, row["id"])
    assert matched >= 8  # Sandy/Ivy Bridge Macs, Westmere, K10 Opteron, Zen EPYC, Xeon Scalable


@pytest.mark.parametrize("model, family, avx, avx2", [
    # Model names as CPUs print them; the answers are Intel ARK's / AMD's (cpu_families.json source_key)
    ("Intel(R) Pentium(R) CPU  N3710  @ 1.60GHz", "intel-pentium-celeron", False, False),  # tensorflow #30114
    ("Intel(R) Core(TM) i7 CPU         960  @ 3.20GHz", "intel-core-first-gen", False, False),  # #33038
    ("Intel(R) Core(TM)2 Duo CPU E7500 @ 2.93GHz", "intel-core2", False, False),  # #33040
    ("Intel(R) Celeron(R) N4020 CPU @ 1.10GHz", "intel-pentium-celeron", False, False),
    ("Intel(R) Pentium(R) Gold 7505 @ 2.00GHz", "intel-pentium-celeron-tigerlake-plus", True, True),
    ("Intel(R) N100", "intel-n-series", True, True),
    ("Intel(R) Atom(TM) x5-Z8350  CPU @ 1.44GHz", "intel-atom", False, False),
    ("Intel(R) Atom(TM) x7425E", "intel-gracemont-atom", True, True),
    ("Intel(R) Core(TM) i7-4930K CPU @ 3.40GHz", "intel-ivy-bridge-e", True, False),
    ("Intel(R) Core(TM) i7-4790K CPU @ 4.00GHz", "intel-core-haswell-plus", True, True),
    ("Intel(R) Core(TM) i7-1065G7 CPU @ 1.30GHz", "intel-core-haswell-plus", True, True),
    ("Intel(R) Core(TM) Ultra 7 165U", "intel-core-haswell-plus", True, True),
    ("Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz", "intel-xeon-e3-e5-v1-v2", True, False),
    ("Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz", "intel-xeon-v3-plus", True, True),
    ("Intel(R) Xeon(R) CPU           X5650  @ 2.67GHz", "intel-xeon-pre-sandy", False, False),
    ("AMD FX(tm)-8350 Eight-Core Processor", "amd-bulldozer-jaguar", True, False),
    ("AMD A10-7850K Radeon R7, 12 Compute Cores 4C+8G", "amd-bulldozer-jaguar", True, False),
    ("AMD A8-3850 APU with Radeon(tm) HD Graphics", "amd-llano-bobcat", False, False),
    ("AMD A9-9420 RADEON R5, 5 COMPUTE CORES 2C+3G", "amd-excavator", True, True),
    ("AMD E-350 Processor", "amd-llano-bobcat", False, False),
    ("AMD Athlon(tm) II X4 640 Processor", "amd-k8-k10", False, False),
    ("AMD Athlon Silver 3050U with Radeon Graphics", "amd-zen", True, True),
    ("Hygon C86 3350  8-core Processor", "hygon-dhyana", True, True),
])
def test_families_by_name(model: str, family: str, avx: bool, avx2: bool) -> None:
    row = cpu_family(model, KB)
    assert row is not None and (row["id"], row["avx"], row["avx2"]) == (family, avx, avx2)


@pytest.mark.parametrize("model", ["VIA Nano X2 U4025 @ 1.2+ GHz", "ZHAOXIN KaiXian KX-6640MA@2.2+GHz",
                                   "Intel(R) Xeon(R) Processor", "Genuine Intel(R) CPU 0000 @ 2.00GHz"])
def test_a_model_the_table_does_not_know_stays_unknown(model: str) -> None:
    assert cpu_family(model, KB) is None
    flags, said = flags_from_family(model, "dxdiag.txt", KB)
    assert flags is None and "unknown" in said and model in said and "dxdiag.txt" in said


def test_every_row_is_settled_and_sourced() -> None:
    doc = KB.table("cpu_families").doc
    for r in doc["families"]:
        assert isinstance(r["avx"], bool) and isinstance(r["avx2"], bool) and not (r["avx2"] and not r["avx"])
        assert r["source"] in doc["source_key"]


# -- the plan ---------------------------------------------------------------------------------------------


def test_a_family_without_avx_rejects_tensorflow_and_says_where_that_came_from() -> None:
    plan = make_plan(_report("windows-amd-hd5800-win7-i5-m540-no-avx-dxdiag"), framework="tensorflow")
    assert plan["top"]["tensorflow"] is None
    tf = next(r for r in plan["rejected"] if r["recipe"] == "tensorflow-cpu")
    assert any("no AVX" in x for x in tf["reasons"])
    note = next(w for w in plan["warnings"] if "cpu_families.json" in w)
    assert "i5 CPU M 540" in note and "first-generation Core" in note and "no AVX" in note and "Intel ARK" in note


def test_a_family_with_avx_lets_tensorflow_fit_without_a_not_checked_line() -> None:
    plan = make_plan(_report("windows-nvidia-rtx3090-dxdiag"), framework="tensorflow")
    tf = next(r for r in plan["recommended"] if r["recipe"] == "tensorflow-cpu")
    assert not any("AVX" in u for u in tf["unknown"])
    assert any("Ryzen 7 5800X" in w and "AVX and AVX2" in w for w in plan["warnings"])


def test_an_unknown_model_is_never_a_silent_yes() -> None:
    report = copy.deepcopy(_report("windows-nvidia-rtx3090-dxdiag"))
    report["cpu"]["model"] = "VIA Nano X2 U4025 @ 1.2+ GHz"
    report["cpu"]["vendor"] = "centaur"
    plan = make_plan(report, framework="tensorflow")
    assert any("whether it has AVX is unknown" in w and "VIA Nano" in w for w in plan["warnings"])
    for e in plan["recommended"]:
        if e["recipe"] in ("tensorflow-cpu", "tensorflow-directml-plugin"):
            assert any("AVX" in u for u in e["unknown"]), e["recipe"]


def test_flags_in_the_capture_win_over_the_family() -> None:
    """A capture that lists flags is the truth; the table is never asked (an i5-2557M with AVX)."""
    plan = make_plan(_report("darwin-intel-core-i5-2557m-sysctl-reversed"), framework="tensorflow")
    assert not any("cpu_families.json" in w for w in plan["warnings"])


# -- Win32_Processor --------------------------------------------------------------------------------------

WMI_JSON = (
    '[\n  {\n    "Name":  "Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz",\n    "Manufacturer":  "GenuineIntel",\n'
    '    "Caption":  "Intel64 Family 6 Model 45 Stepping 7",\n    "Architecture":  9,\n    "AddressWidth":  64,\n'
    '    "NumberOfCores":  8,\n    "NumberOfLogicalProcessors":  16\n  },\n'
    '  {\n    "Name":  "Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz",\n    "Manufacturer":  "GenuineIntel",\n'
    '    "Caption":  "Intel64 Family 6 Model 45 Stepping 7",\n    "Architecture":  9,\n    "AddressWidth":  64,\n'
    '    "NumberOfCores":  8,\n    "NumberOfLogicalProcessors":  16\n  }\n]\n'
)
WMIC_LIST = ("\r\r\n\r\r\nArchitecture=9\r\r\nManufacturer=AuthenticAMD\r\r\nName=AMD Phenom(tm) II X4 955 Processor\r\r\n"
             "NumberOfCores=4\r\r\nNumberOfLogicalProcessors=4\r\r\n\r\r\n\r\r\n")


def test_win32_processor_json_sums_the_sockets() -> None:
    got = windows.parse_win32_processor_json(WMI_JSON)
    assert (got.vendor, got.arch, got.cores, got.threads) == ("intel", "x86_64", 16, 32)
    assert got.model == "Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz" and got.flags == ()


def test_win32_processor_wmic_list() -> None:
    got = windows.parse_win32_processor_list(WMIC_LIST)
    assert (got.vendor, got.model, got.arch, got.cores, got.threads) == (
        "amd", "AMD Phenom(tm) II X4 955 Processor", "x86_64", 4, 4)


@pytest.mark.parametrize("text", ["", "not json at all", "{\"Caption\": \"x\"}", "Name=\r\n", "[1, 2]"])
def test_win32_processor_garbage_is_a_parse_error(text: str) -> None:
    for parse in (windows.parse_win32_processor_json, windows.parse_win32_processor_list):
        with pytest.raises(ParseError):
            parse(text)


class _WinHost(DictHost):
    system = "Windows"


def test_the_windows_probe_names_the_cpu_from_wmi_before_dxdiag_and_never_over_a_cpu_capture() -> None:
    dx = (FIXTURES / "windows-nvidia-rtx3090-dxdiag" / "dxdiag.txt").read_text(encoding="utf-8", errors="replace")
    assert windows.probe(_WinHost({"dxdiag.txt": dx, "Win32_Processor.txt": WMIC_LIST})).cpu.source == "Win32_Processor"
    assert windows.probe(_WinHost({"dxdiag.txt": dx})).cpu.source == "dxdiag.txt"
    assert windows.probe(_WinHost({"dxdiag.txt": dx, "py-cpuinfo.json": "{}"})).cpu is None
    only_wmi = windows.probe(_WinHost({"Win32_Processor.json": WMI_JSON}))
    assert only_wmi.cpu is not None and only_wmi.cpu.threads == 32


def test_a_bundle_with_host_json_but_no_cpu_source_keeps_dxdiags_cpu(tmp_path: Path) -> None:
    src = FIXTURES / "windows-nvidia-gtx750-phenom2-chinese-cp936-dxdiag" / "dxdiag.txt"
    shutil.copy(src, tmp_path / "dxdiag.txt")
    (tmp_path / "host.json").write_text('{"system": "Windows", "release": "10", "version": "10.0.17763", '
                                        '"machine": "AMD64"}', encoding="utf-8")
    report = facts_to_report(scan(ReplayHost(tmp_path)))
    assert report["cpu"]["model"] == "AMD Phenom(tm) II X4 955 Processor"
    assert make_plan(report, framework="tensorflow")["top"]["tensorflow"] is None


# -- dxdiag text ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("folder, needle, page", [
    ("windows-nvidia-gtx750-phenom2-chinese-cp936-dxdiag", "Windows 10 专业版 64-bit", "cp936"),
    ("windows-intel-iris-xe-korean-cp949-dxdiag", "스피커(Realtek(R) Audio)", "cp949"),
    ("windows-nvidia-gt620-win10-1703-no-directml-dxdiag", "Concentrador raíz USB", "cp1252"),
])
def test_a_localised_dxdiag_reads_in_the_code_page_of_its_language(folder: str, needle: str, page: str) -> None:
    data = (FIXTURES / folder / "dxdiag.txt").read_bytes()
    assert needle in windows.decode_windows_text(data)
    assert needle in data.decode(page)


def test_without_a_language_line_the_detector_still_answers() -> None:
    data = (FIXTURES / "windows-nvidia-gtx750-phenom2-chinese-cp936-dxdiag" / "dxdiag.txt").read_bytes()
    cut = data.replace(b"Language:", b"Lingo:")
    text = windows.decode_windows_text(cut)
    assert "System Information" in text and "NVIDIA GeForce GTX 750" in text


@pytest.mark.parametrize("line, release, version, build", [
    ("Windows 7 Home Premium 64-bit (6.1, Build 7601) Service Pack 1 (7601.win7sp1_gdr.140303-2144)", "7", "6.1.7601", 7601),
    ("Windows Vista? Home Premium (6.0, Build 6002) Service Pack 2 (6002.lh_sp2rtm.090410-1830)", "Vista", "6.0.6002", 6002),
    ("Windows 10 Home Single Language 64-bit (10.0, Build 15063) (15063.rs2_release.170317-1834)", "10", "10.0.15063", 15063),
    ("Windows 11 Pro 64-bit (10.0, Build 22000) (22000.co_release.210604-1628)", "11", "10.0.22000", 22000),
])
def test_old_windows_is_read_as_itself(line: str, release: Optional[str], version: str, build: int) -> None:
    dx = windows.DxDiag(system={"Operating System": line})
    got = windows.os_from_dxdiag(dx)
    assert got is not None and (got.release, got.version, got.windows_build) == (release, version, build)
