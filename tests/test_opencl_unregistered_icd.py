"""A vendor's OpenCL driver installed but named by no ICD entry (the NVIDIA container toolkit mounts
libnvidia-opencl.so.1 without an .icd file): the doctor's finding, the PlaidML plan on the GPU with
the fix named, the install's vendors folder adding a library that loads, and what stays as it was."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from mlprobe.scan.live import opencl_child
from mlprobe.verify.devicecheck import LoaderRecord, _diagnose_opencl, unregistered_vendor_icds

from .conftest import FIXTURES
from .golden_cases import run as golden_run
from .test_doctor import diagnose

CAPTURE = FIXTURES / "linux-nvidia-h100-opencl-icd-not-registered-capture"
H200_FILENAMES = FIXTURES / "linux-nvidia-h200-ocl-icd-ignores-filenames"


def test_doctor_names_nvidias_unregistered_library_with_evidence_and_both_fixes() -> None:
    doc = diagnose(CAPTURE)
    (f,) = [f for f in doc["findings"] if f["rule"] == "opencl-icd-not-registered"]
    assert f["severity"] == "warning"  # plaidml is installed: a program that opens the loader is there
    assert "libnvidia-opencl.so.1" in f["title"] and "H100" in f["title"]
    lines = [(e["capture"], e["line"]) for e in f["evidence"]]
    assert ("ldconfig-p.txt", "libnvidia-opencl.so.1 (libc6,x86-64) => /usr/local/nvidia/lib64/libnvidia-opencl.so.1") in lines
    assert any(c == "opencl-icd.json" and "pocl.icd" in line and "OCL_ICD_FILENAMES=unset" in line for c, line in lines)
    fixes = "\n".join(f["fix"])
    assert "echo libnvidia-opencl.so.1 > ~/.local/etc/OpenCL/vendors/nvidia.icd" in fixes
    assert "export OCL_ICD_VENDORS=~/.local/etc/OpenCL/vendors" in fixes
    assert "echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd" in fixes


def test_doctor_is_silent_where_an_entry_names_the_library() -> None:
    # the H200 container names libnvidia-opencl.so.1 in OCL_ICD_FILENAMES: registered (another rule)
    doc = diagnose(H200_FILENAMES)
    assert "opencl-icd-not-registered" not in {f["rule"] for f in doc["findings"]}


def _plaidml(bundle: str) -> Dict[str, Any]:
    code, doc = golden_run("plan", bundle)
    assert code == 0
    (r,) = [r for r in doc["recommended"] if r["recipe"] == "plaidml-keras"]
    return dict(r)


def test_plan_puts_plaidml_on_the_h100_with_the_registration_step() -> None:
    r = _plaidml(CAPTURE.name)
    assert r["device"] == "opencl_nvidia_nvidia_h100_80gb_hbm3.0" and r["device_name"] == "NVIDIA H100 80GB HBM3"
    assert r["env"]["PLAIDML_DEVICE_IDS"] == r["device"] and r["env"]["PLAIDML_EXPERIMENTAL"] == "0"
    step = [w for w in r["warnings"] if w.startswith("register NVIDIA H100 80GB HBM3's OpenCL driver")]
    assert step and "nvidia.icd naming libnvidia-opencl.so.1" in step[0] and "OCL_ICD_VENDORS" in step[0]
    assert not any("llvm_cpu.0" in w for w in r["warnings"])


def test_the_scans_opencl_view_stays_what_clinfo_lists() -> None:
    code, doc = golden_run("scan", CAPTURE.name)
    ocl = doc["runtimes"]["opencl"]
    assert [p["name"] for p in ocl["platforms"]] == ["Portable Computing Language"]
    assert [d["type"] for p in ocl["platforms"] for d in p["devices"]] == ["CPU"]
    assert ocl["unregistered_icds"] == ["libnvidia-opencl.so.1"]
    assert not [g for g in doc["gpus"] if "opencl" in g.get("apis", [])]


# -- the install's vendors folder -------------------------------------------------------------------


def _standin() -> str:
    """A real shared library that loads here, standing in for a vendor's ICD library: the PoCL that
    pyopencl's wheel carries (pocl-binary-distribution installs it for the scan)."""
    import pyopencl

    found = sorted(glob.glob(os.path.join(os.path.dirname(pyopencl.__file__), ".libs", "libpocl*.so*")))
    if not found:
        pytest.skip("no PoCL library in this pyopencl wheel")
    return found[0]


def _write(folder: Path, source: Path, known: List[str]) -> Dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("OCL_ICD_FILENAMES",)}
    env["OCL_ICD_VENDORS"] = str(source)
    r = subprocess.run([sys.executable, "-S", opencl_child.__file__, "--vendors-dir", str(folder)] + known,
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return dict(json.loads(r.stdout))


def test_vendors_folder_adds_a_known_library_that_loads_and_skips_one_that_does_not(tmp_path: Path) -> None:
    lib = _standin()
    source, folder = tmp_path / "system", tmp_path / "venv-vendors"
    source.mkdir()
    folder.mkdir()
    out = _write(folder, source, [f"{lib}=standin.icd", "libmlprobe-no-such-icd.so.1=missing.icd"])
    assert out["added"] == ["standin.icd"]
    assert sorted(os.listdir(folder)) == ["standin.icd"]
    assert (folder / "standin.icd").read_text() == lib + "\n"


def test_vendors_folder_adds_nothing_where_an_entry_already_names_the_library(tmp_path: Path) -> None:
    lib = _standin()
    source, folder = tmp_path / "system", tmp_path / "venv-vendors"
    source.mkdir()
    folder.mkdir()
    (source / "pocl.icd").write_text(lib + "\n")
    out = _write(folder, source, [f"{lib}=standin.icd"])
    assert out["added"] == [] and sorted(os.listdir(folder)) == ["pocl.icd"]


# -- the device check's diagnosis ---------------------------------------------------------------------


def _record(icd_libs: List[str], filenames: str = "") -> LoaderRecord:
    return LoaderRecord.from_json({
        "name": "libOpenCL.so", "path": "/usr/lib/x86_64-linux-gnu/libOpenCL.so.1.0.0",
        "reads_ocl_icd_filenames": False,
        "platforms": [{"name": "Portable Computing Language", "vendor": "The pocl project",
                       "devices": [{"name": "cpu", "type": "CPU", "vendor": "GenuineIntel"}]}],
        "icd_files": [{"file": f"{i}.icd", "library": lib} for i, lib in enumerate(icd_libs)],
        "vendors_dir": "/etc/OpenCL/vendors", "env": {"OCL_ICD_FILENAMES": filenames} if filenames else {}})


def test_unregistered_library_found_by_the_loader_cache_gives_the_venv_vendors_fix() -> None:
    cache = {"nvidia-opencl": "libnvidia-opencl.so.1"}
    rec = _record(["libpocl.so.2.12.0"])
    assert unregistered_vendor_icds(rec, cache.get) == [("libnvidia-opencl.so.1", "nvidia.icd")]
    assert unregistered_vendor_icds(_record(["libpocl.so.2", "libnvidia-opencl.so.1"]), cache.get) == []
    assert unregistered_vendor_icds(_record(["libpocl.so.2"], "libnvidia-opencl.so.1"), cache.get) == []
    assert unregistered_vendor_icds(rec, {}.get) == []  # not installed: nothing to register


def test_diagnosis_on_this_machine_skips_a_library_the_cache_does_not_hold() -> None:
    # libnvidia-opencl is not installed on a machine without NVIDIA's driver: no fix is made up
    import ctypes.util

    if ctypes.util.find_library("nvidia-opencl"):
        pytest.skip("NVIDIA's OpenCL library is installed here")
    d = _diagnose_opencl("plaidml", "opencl_nvidia_nvidia_h100_80gb_hbm3.0", [_record(["libpocl.so.2"])], "/v")
    assert d.fix is None and "no OpenCL loader on this machine lists" in d.cause


def test_diagnosis_with_the_library_in_the_loader_cache_writes_the_vendors_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes.util

    monkeypatch.setattr(ctypes.util, "find_library",
                        lambda name: "libnvidia-opencl.so.1" if name == "nvidia-opencl" else None)
    d = _diagnose_opencl("plaidml", "opencl_nvidia_nvidia_h100_80gb_hbm3.0", [_record(["libpocl.so.2"])], "/v")
    assert d.fix is not None and d.fix.id == "venv-vendors"
    assert d.fix.env == {"OCL_ICD_VENDORS": "/v/etc/OpenCL/vendors"}
    assert "libnvidia-opencl.so.1" in d.cause and "echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd" in d.next_step


def test_the_device_check_takes_plaidmls_own_id_of_the_same_vendor() -> None:
    from mlprobe.install.apply import _same_vendor_device

    listed = ["llvm_cpu.0", "opencl_nvidia_nvidia_h100_80gb_hbm3.0"]
    assert _same_vendor_device("opencl_nvidia_nvidia_h100.0", listed) == "opencl_nvidia_nvidia_h100_80gb_hbm3.0"
    assert _same_vendor_device("opencl_amd_gfx90a.0", listed) is None
    assert _same_vendor_device("llvm_cpu.0", listed) is None


def test_a_live_scan_reads_the_same_without_a_subprocess(tmp_path: Path) -> None:
    from mlprobe.probes.opencl import unregistered_icds
    from mlprobe.scan.host import LiveHost

    libdir, vendors = tmp_path / "lib", tmp_path / "vendors"
    libdir.mkdir()
    vendors.mkdir()
    (libdir / "libnvidia-opencl.so.1").write_bytes(b"")  # as the container toolkit mounts it
    (vendors / "pocl.icd").write_text("libpocl.so.2\n")
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(libdir), "OCL_ICD_VENDORS": str(vendors)}
    assert unregistered_icds(LiveHost(env=env)) == ("libnvidia-opencl.so.1",)
    (vendors / "nvidia.icd").write_text("libnvidia-opencl.so.1\n")
    assert unregistered_icds(LiveHost(env=env)) is None
    assert unregistered_icds(LiveHost(env=dict(env, OCL_ICD_VENDORS=str(tmp_path / "empty"),
                                               OCL_ICD_FILENAMES="libnvidia-opencl.so.1"))) is None


AFTER_FIX = FIXTURES / "linux-nvidia-h100-plaidml-venv-vendors-folder-hook-on-capture"


def test_after_the_install_the_venvs_vendors_folder_gives_plaidml_the_gpu() -> None:
    """The same machine after the PlaidML install registered NVIDIA's driver in the venv (a real capture
    from a shell that never activated it): PlaidML lists the H100, the plan keeps it on the GPU, and the
    unregistered-driver finding is gone (the hook's OCL_ICD_VENDORS names the venv's folder)."""
    doc = diagnose(AFTER_FIX)
    rules = {f["rule"] for f in doc["findings"]}
    assert "opencl-icd-not-registered" not in rules and "framework-sees-gpu" in rules
    icd = json.loads((AFTER_FIX / "opencl-icd.json").read_text(encoding="utf-8"))
    assert icd["OCL_ICD_VENDORS"] == "/opt/torch/.venv/etc/OpenCL/vendors"
    _, plan = golden_run("plan", AFTER_FIX.name)
    (plaid,) = [r for r in plan["recommended"] if r["recipe"] == "plaidml-keras"]
    assert plaid["device"] == "opencl_nvidia_nvidia_h100_80gb_hbm3.0"
    assert plaid["env"]["PLAIDML_DEVICE_IDS"] == plaid["device"]
