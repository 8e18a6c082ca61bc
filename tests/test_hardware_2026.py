"""NVIDIA driver branches and kernel-module flavours, nvidia-smi's WSL2 and truncated-name cases,
Intel's sycl-ls / xpu-smi, DirectML's rule and successors, Windows text encodings, macOS 26."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest

from mlprobe.errors import ParseError
from mlprobe.model.context import RulesContext
from mlprobe.model.facts import Facts
from mlprobe.model.knowledge import Row
from mlprobe.plan.context import derive
from mlprobe.plan.planner import make_plan
from mlprobe.probes import intel, nvidia as nv, windows
from mlprobe.probes.os_ import real_macos_version
from mlprobe.recipes import knowledge
from mlprobe.scan.host import ReplayHost
from mlprobe.scan.run import facts_to_report, scan

from .conftest import FIXTURES

KB = knowledge()


def _plan(folder: str, framework: str = "torch") -> Dict[str, Any]:
    report = facts_to_report(scan(ReplayHost(FIXTURES / folder)))
    return make_plan(report, framework=framework)


def derive_facts(report: Dict[str, Any], kb: Any) -> RulesContext:
    return derive(Facts.from_report(report), kb)


def _ctx(gpus: List[Dict[str, Any]], driver: str, kernel: Any = None, system: Any = "Linux") -> RulesContext:
    report = {"os": {"system": system}, "cpu": {"arch": "x86_64"},
              "gpus": [dict(g, vendor="nvidia", sources=["nvidia"]) for g in gpus],
              "runtimes": {"cuda": {"driver_version": driver, "version": None, "kernel_module": kernel}}}
    return derive_facts(report, KB)


def _run(test_name: str, ctx: RulesContext) -> Any:
    from mlprobe.plan.conditions import TESTS

    return TESTS[test_name](Row({"test": test_name}), ctx, KB, None)


# -- driver branches ---------------------------------------------------------------------------------


def test_the_p100_plan_names_r580_as_its_last_branch() -> None:
    plan = _plan("linux-nvidia-tesla-p100-smi-xml")
    best = plan["recommended"][0]
    assert best["recipe"] == "torch-cuda"
    text = " ".join(best["warnings"])
    assert "R580 is the last NVIDIA driver branch" in text and "R590 and later ignore it" in text
    assert "torch 2.14 cu126" in text and "2.15 publishes no cu126" in text


def test_a_driver_that_ignores_the_card_rejects_cuda() -> None:
    out = _run("nvidia_driver_branch", _ctx([{"name": "NVIDIA GeForce GTX 1050", "compute_capability": "6.1"}],
                                            "595.71.05"))
    assert out.value is False and "install the R580 branch" in out.reasons[0]


def test_turing_and_later_have_no_branch_note() -> None:
    out = _run("nvidia_driver_branch", _ctx([{"name": "NVIDIA GeForce RTX 2080 SUPER", "compute_capability": "7.5"}],
                                            "610.62"))
    assert out.value is True and not out.warnings


def test_a_jetson_gets_no_desktop_branch_note() -> None:
    out = _run("nvidia_driver_branch", _ctx([{"name": "Orin (nvgpu)", "compute_capability": "8.7",
                                              "integrated": True}], "540.4.0"))
    assert not out.warnings


# -- kernel-module flavours -----------------------------------------------------------------------------


@pytest.mark.parametrize("kernel, value", [("proprietary", False), ("open", True), (None, True)])
def test_blackwell_needs_the_open_modules(kernel: Any, value: bool) -> None:
    out = _run("nvidia_kernel_module_fits", _ctx([{"name": "NVIDIA GeForce RTX 5090", "compute_capability": "12.0"}],
                                                 "575.57.08", kernel))
    assert out.value is value
    if kernel == "proprietary":
        assert "open kernel modules" in out.reasons[0] and "-open" in out.reasons[0]
    if kernel is None:
        assert "open kernel modules" in out.warnings[0]


def test_pascal_on_the_open_modules_is_refused() -> None:
    out = _run("nvidia_kernel_module_fits", _ctx([{"name": "NVIDIA GeForce GT 1030", "compute_capability": "6.1"}],
                                                 "560.31.02", "open"))
    assert out.value is False and "proprietary kernel modules" in out.reasons[0]


def test_windows_has_no_linux_kernel_module() -> None:
    out = _run("nvidia_kernel_module_fits", _ctx([{"name": "NVIDIA GeForce RTX 5090", "compute_capability": "12.0"}],
                                                 "576.02", "proprietary", system="Windows"))
    assert out.value is True and not out.warnings


@pytest.mark.parametrize("line, flavour", [
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build  (dvs-builder@U16)", "open"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023", "proprietary"),
    ("GCC version:  gcc version 12.2.0", None),
])
def test_kernel_module_flavour(line: str, flavour: Any) -> None:
    assert nv.kernel_module_flavour(line) == flavour


def test_an_uncovered_card_is_told_which_series_cover_it() -> None:
    from mlprobe.plan.predicates import series_covering

    assert series_covering("12.0", KB)[0] == "cu128"  # sm_120 needs cu128 or later
    assert "cu126" in series_covering("6.0", KB) and "cu130" not in series_covering("6.0", KB)


# -- nvidia-smi ---------------------------------------------------------------------------------------


def test_wsl2_smi_version_differs_from_the_driver() -> None:
    out = nv.probe(ReplayHost(FIXTURES / "linux-wsl2-nvidia-rtx3060-laptop-smi-version-differs"))
    assert out.runtimes.cuda is not None and out.runtimes.cuda.smi_version == "545.46"
    assert out.os is not None and out.os.wsl is True
    assert any("this is WSL2" in w for w in out.warnings)


def test_native_smi_versions_agree() -> None:
    out = nv.probe(ReplayHost(FIXTURES / "windows-nvidia-rtx2080super-smi-kmd-version-610"))
    assert out.runtimes.cuda is not None and not out.runtimes.cuda.written("smi_version")
    assert not any("WSL2" in w for w in out.warnings)


@pytest.mark.parametrize("prefix, cc", [("NVIDIA GeForce RTX 5070", "12.0"), ("NVIDIA GeForce RTX 3060", "8.6"),
                                        ("NVIDIA GeForce RTX 30", None), ("NVIDIA T40", None)])
def test_a_truncated_name_gives_a_cc_only_with_its_whole_model_number(prefix: str, cc: Any) -> None:
    assert nv.compute_capability_for_truncated(prefix) == cc


def test_a_name_cut_inside_a_word_gets_no_cc() -> None:
    table = (FIXTURES / "linux-nvidia-rtx5070-smi-kmd-version-610" / "nvidia-smi.txt").read_text()
    rep = nv.parse_smi_table(table.replace("RTX 5070 ...   ", "RTX 507...     "))
    assert rep.gpus[0].name_truncated and not rep.gpus[0].cut_at_word
    assert nv.to_gpu_facts(rep.gpus[0], "610.43.02").compute_capability is None


# -- Intel: sycl-ls and xpu-smi --------------------------------------------------------------------------


def test_sycl_ls_lists_each_gpu_once_per_backend() -> None:
    devs = intel.parse_sycl_ls((FIXTURES / "windows-intel-arc-a770-uhd770-sycl-ls" / "sycl-ls.txt").read_text())
    assert len(devs) == 6
    l0, ocl = intel.sycl_intel_gpus(devs)
    assert [d.name for d in l0] == ["Intel(R) UHD Graphics 770", "Intel(R) Arc(TM) A770 Graphics"]
    assert len(ocl) == 2


def test_a_scan_of_sycl_ls_finds_the_intel_gpus() -> None:
    report = facts_to_report(scan(ReplayHost(FIXTURES / "linux-intel-arc-a770-uhd730-sycl-ls-level-zero")))
    names = sorted(g["name"] for g in report["gpus"])
    assert names == ["Intel(R) Arc(TM) A770 Graphics", "Intel(R) UHD Graphics 730"]


def test_rusticl_lines_add_no_gpu() -> None:
    text = ("[level_zero:gpu][level_zero:0] Intel(R) oneAPI Unified Runtime over Level-Zero V2, "
            "Intel(R) Arc(TM) Pro B70 Graphics 20.2.0 [1.15.38646]\n"
            "[opencl:gpu][opencl:1] rusticl, Mesa Intel(R) Graphics (BMG G31) OpenCL 3.0  [26.1.4-arch3.1]\n"
            "[opencl:gpu][opencl:3] Intel(R) OpenCL Graphics, Intel(R) Arc(TM) Pro B70 Graphics OpenCL 3.0 NEO  "
            "[26.22.38646]\n")
    l0, ocl = intel.sycl_intel_gpus(intel.parse_sycl_ls(text))
    assert len(l0) == 1 and len(ocl) == 1 and ocl[0].platform == "Intel(R) OpenCL Graphics"


def test_sycl_ls_with_opencl_only_warns_about_level_zero(tmp_path: Path) -> None:
    (tmp_path / "sycl-ls.txt").write_text(
        "[opencl:cpu][opencl:0] Intel(R) OpenCL, 11th Gen Intel(R) Core(TM) i7-11700K @ 3.60GHz OpenCL 3.0 "
        "(Build 0) [2025.19.4.0.18_160000.xmain-hotfix]\n"
        "[opencl:gpu][opencl:1] Intel(R) OpenCL Graphics, Intel(R) UHD Graphics 750 OpenCL 3.0 NEO  [23.43.27642.67]\n")
    out = intel.probe(ReplayHost(tmp_path))
    assert [g.name for g in out.gpus] == ["Intel(R) UHD Graphics 750"]
    assert any("Level Zero" in w for w in out.warnings)


def test_sycl_ls_garbage_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        intel.parse_sycl_ls("Segmentation fault (core dumped)\n")


def test_xpu_smi_discovery_reads_every_device() -> None:
    devs = intel.parse_xpu_smi_discovery(
        (FIXTURES / "linux-intel-max1550-x6-xpu-smi-discovery" / "xpu-smi-discovery.txt").read_text())
    assert len(devs) == 6 and devs[3]["PCI BDF Address"] == "0001:18:00.0"


def test_xpu_smi_detail_view_gives_the_pci_id() -> None:
    text = ("| 0         | Device Type: GPU                                                                     |\n"
            "|           | Device Name: Intel(R) Arc(TM) Graphics                                               |\n"
            "|           | PCI Device ID: 0x7d55                                                                |\n")
    gpu = intel.gpu_from_xpu_smi(intel.parse_xpu_smi_discovery(text)[0])
    assert gpu.pci_device_id == "0x7d55" and "xpu" in gpu.apis


def test_ipex_is_a_retired_path_never_a_recommendation() -> None:
    plan = _plan("linux-intel-arc-b580-xpu-smi-discovery")
    assert plan["recommended"][0]["recipe"] == "torch-xpu"
    assert all("intel-extension" not in r["recipe"] for r in plan["recommended"])
    assert any(r.get("recipe") == "intel-extension-for-pytorch" for r in plan.get("retired", []))


# -- DirectML ----------------------------------------------------------------------------------------------


def test_a_gpu_the_windows_probe_judged_gets_no_directml_fallback() -> None:
    report = {"os": {"system": "Windows", "windows_build": 7601}, "cpu": {"arch": "x86_64"},
              "gpus": [{"vendor": "amd", "name": "AMD Radeon HD 6310 Graphics", "apis": [], "sources": ["windows"]}]}
    assert derive_facts(report, KB).directml.count == 0
    report["gpus"][0]["sources"] = ["nvidia"]  # a source that cannot judge DirectX: the fallback stays
    report["gpus"][0]["vendor"] = "nvidia"
    assert derive_facts(report, KB).directml.count == 1


def test_directml_says_it_is_no_longer_developed_and_names_successors() -> None:
    plan = _plan("windows-nvidia-rtx3090-dxdiag")
    dml = next(r for r in plan["recommended"] if r["recipe"] == "torch-directml")
    text = " ".join(dml["warnings"])
    assert "no longer developed" in text and "torch-cuda" in text and "Windows ML" in text


# -- Windows text encodings, virtual adapters -------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16", "utf-8-sig", "cp1252"])
def test_dxdiag_reads_in_any_windows_encoding(encoding: str) -> None:
    raw = (FIXTURES / "windows-nvidia-rtx3090-dxdiag" / "dxdiag.txt").read_bytes().decode("utf-8").replace("\r\n", "\n")
    data = raw.replace("\n", "\r\n").encode(encoding, errors="replace")
    dx = windows.parse_dxdiag(windows.decode_windows_text(data))
    assert [a.name for a in dx.adapters] == [a.name for a in windows.parse_dxdiag(raw).adapters]


def test_a_localised_code_page_keeps_its_letters() -> None:
    text = "---------------\nDisplay Devices\n---------------\n          Card name: Carte graphique générique\n"
    assert "générique" in windows.decode_windows_text(text.encode("cp1252"))
    zh = "      Card name: 显示适配器 NVIDIA GeForce RTX 3060\n"
    assert "显示适配器" in windows.decode_windows_text((zh * 20).encode("cp936"))


def test_a_virtual_adapter_with_a_copied_vendor_id_is_no_gpu() -> None:
    entry = ("---------------\nDisplay Devices\n---------------\n"
             "          Card name: Parsec Virtual Display Adapter\n       Manufacturer: Parsec Cloud, Inc.\n"
             "         Device Key: Enum\\ROOT\\DISPLAY\\0000\n          Vendor ID: 0x10DE\n          Device ID: 0x2204\n")
    dx = windows.parse_dxdiag(entry)
    assert dx.adapters and not any(windows.is_gpu(a) for a in dx.adapters)


# -- macOS 26 ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("reported, darwin, real", [("16.0", "25.0.0", "26.0"), ("16.1", "25.1.0", "26.1"),
                                                    ("10.16", "20.6.0", "11.0"), ("15.5", "24.5.0", "15.5"),
                                                    ("26.0", "25.0.0", "26.0")])
def test_macos_compat_versions(reported: str, darwin: str, real: str) -> None:
    assert real_macos_version(reported, darwin) == real


@pytest.mark.parametrize("prefix, cc", [("NVIDIA RTX PRO 6000 Blac", "12.0"), ("NVIDIA GeForce RTX 507", None),
                                        ("NVIDIA RTX PRO", None), ("NVIDIA Quadro ZZZ 9999 Ab", None)])
def test_a_name_cut_after_its_model_number_gets_the_cc_of_the_listed_names_it_begins(prefix: str, cc: Any) -> None:
    assert nv.compute_capability_for_name_prefix(prefix) == cc


def test_the_rtx_pro_6000_blackwell_table_cut_inside_a_word_is_sm_120() -> None:
    out = nv.probe(ReplayHost(FIXTURES / "linux-nvidia-rtx-pro-6000-blackwell-open-kernel-module-smi"))
    (g,) = out.gpus
    assert (g.name, g.compute_capability, g.architecture) == ("NVIDIA RTX PRO 6000 Blac", "12.0", "Blackwell")
    assert out.runtimes.cuda is not None and out.runtimes.cuda.kernel_module == "open"


def test_uname_after_a_pasted_prompt_line_and_proc_nvidia_version_say_linux(tmp_path: Path) -> None:
    from mlprobe.probes.os_ import uname_fields

    text = "(main) root@C.1:/w$ uname -a\nLinux h 5.15.0-161-generic #171-Ubuntu SMP x86_64 GNU/Linux\n"
    assert uname_fields(text)[:3] == ["Linux", "h", "5.15.0-161-generic"]
    assert uname_fields("Darwin mac 23.4.0 Darwin Kernel Version 23.4.0\n")[0] == "Darwin"
    (tmp_path / "uname.txt").write_text(text)
    assert ReplayHost(tmp_path).info()["system"] == "Linux"
    (tmp_path / "uname.txt").unlink()
    (tmp_path / "proc-driver-nvidia-version.txt").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n")
    assert ReplayHost(tmp_path).info()["system"] == "Linux"


def test_a_tcc_gpu_is_cuda_only_and_gets_no_directml() -> None:
    out = nv.probe(ReplayHost(FIXTURES / "windows-nvidia-tesla-t4-tcc-azure-stack-edge-smi"))
    assert out.runtimes.cuda is not None and out.runtimes.cuda.tcc_gpus == ("503c:00:00.0",)
    assert any("driver model TCC" in n for n in out.gpus[0].notes)
    plan = _plan("windows-nvidia-tesla-t4-tcc-azure-stack-edge-smi")
    assert plan["top"]["torch"] == "torch-cpu"
    assert "torch-directml" not in [e["recipe"] for e in plan["recommended"]]
    wddm = nv.probe(ReplayHost(FIXTURES / "windows-nvidia-rtx2080super-smi"))
    assert wddm.runtimes.cuda is not None and not wddm.runtimes.cuda.written("tcc_gpus")


# -- torch-xpu in WSL2 -----------------------------------------------------------------------------------


def _xpu_wsl(distro_id: Any, distro_version: Any, wsl: Any = True) -> Any:
    from mlprobe.plan.conditions import TESTS

    ctx = derive_facts({"os": {"system": "Linux", "wsl": wsl, "distro_id": distro_id,
                               "distro_version": distro_version}}, KB)
    cond = Row({"test": "wsl_distro_validated", "table": "torch_wheels", "key": "xpu_wsl_distros",
                "what": "PyTorch's XPU build"})
    return TESTS["wsl_distro_validated"](cond, ctx, KB, None)


def test_torch_xpu_in_wsl2_needs_the_ubuntu_release_pytorch_documents() -> None:
    old = _xpu_wsl("ubuntu", "22.04")
    assert old.value is False
    assert "documented in WSL2 on Ubuntu 24.04/26.04" in old.reasons[0] and "Ubuntu 22.04" in old.reasons[0]
    assert _xpu_wsl("ubuntu", "24.04").value is True and _xpu_wsl("ubuntu", "26.04").value is True
    other = _xpu_wsl("debian", "12")
    assert other.value is True and "not validated" in other.warnings[0]
    assert _xpu_wsl(None, None).value is None
    assert _xpu_wsl("ubuntu", "22.04", wsl=False).value is True  # native Linux: not this rule's business


# -- DirectML: the rejection names the condition that failed -------------------------------------------


def _dml_reasons(folder: str) -> List[str]:
    plan = _plan(folder)
    return next(r["reasons"] for r in plan["rejected"] if r["recipe"] == "torch-directml")


def test_directml_rejection_names_the_windows_build() -> None:
    assert _dml_reasons("windows-nvidia-gt620-win10-1703-no-directml-dxdiag") == [
        "Windows build 15063 is older than 16299 (Windows 10 1709), the first DirectML runs on"]
    assert "TCC driver model" in _dml_reasons("windows-nvidia-tesla-t4-tcc-azure-stack-edge-smi")[0]


def test_directml_rejection_names_a_gpu_without_a_directx_12_feature_level() -> None:
    from mlprobe.plan.predicates import _directml_missing

    ctx = derive_facts({"os": {"system": "Windows", "wsl": False, "windows_build": 19045},
                        "gpus": [{"vendor": "nvidia", "name": "NVIDIA GeForce GT 620", "apis": [],
                                  "sources": ["windows"]},
                                 {"vendor": "amd", "name": None, "apis": [], "sources": ["windows"]}]}, KB)
    reasons = _directml_missing(ctx, KB)
    assert "NVIDIA GeForce GT 620 has no DirectX 12 feature level (12_x)" in reasons[0]
    assert "Basic Display driver" in reasons[1]
    assert "not on Darwin" in _directml_missing(derive_facts({"os": {"system": "Darwin"}, "gpus": []}, KB), KB)[0]


def test_r580_ends_in_june_2028_for_data_center_cards_and_october_2028_for_geforce() -> None:
    text = " ".join(_plan("linux-nvidia-tesla-p100-smi-xml")["recommended"][0]["warnings"])
    assert "Long Term Support Branch of NVIDIA's data center drivers, supported until June 2028" in text
    geforce = _run("nvidia_driver_branch", _ctx([{"name": "NVIDIA GeForce GTX 1080", "compute_capability": "6.1"}],
                                                "580.95.05"))
    assert "security updates until October 2028" in geforce.warnings[0]
    quadro = _run("nvidia_driver_branch", _ctx([{"name": "Quadro P4000", "compute_capability": "6.1"}], "580.95.05"))
    assert "October 2028" in quadro.warnings[0]
    rows = KB.rows("nvidia_gpus", "driver_branches")
    assert all(r.get("datacenter_until") == "2028-06" and r.get("datacenter_source") == "N-DC-620" for r in rows)


def test_torch_rocm_on_windows_names_amds_wheels_where_amd_lists_the_target() -> None:
    def reason(folder: str) -> str:
        plan = _plan(folder)
        return next(r["reasons"][0] for r in plan["rejected"] if r["recipe"] == "torch-rocm")

    listed = reason("windows-amd-rx5700xt-gfx1010-dxdiag")
    assert "AMD's own wheels (torch-rocm-amd) list gfx1010 (AMD Radeon RX 5700 XT, Release Ready) for Windows" in listed
    assert "torch-directml" not in listed
    # An HD 5800 (TeraScale, no gfx target AMD builds) gets the other roads.
    assert "(on Windows use torch-directml, or WSL2" in reason("windows-amd-hd5800-win7-i5-m540-no-avx-dxdiag")
