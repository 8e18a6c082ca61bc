"""The OpenCL child sees the ICDs the system's ocl-icd would load: pyopencl's bundled loader ignores
OCL_ICD_FILENAMES, so the child turns that list into a vendors directory (probes/opencl_child.py)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mlprobe.scan.live import _early
from mlprobe.scan.live.opencl_child import icd_vendors_dir


def _bundled_pocl() -> str:
    import importlib.util

    spec = importlib.util.find_spec("pyopencl")
    assert spec is not None and spec.submodule_search_locations
    libs = glob.glob(os.path.join(list(spec.submodule_search_locations)[0], ".libs", "libpocl*.so*"))
    if not libs:
        pytest.skip("this pyopencl wheel bundles no PoCL")
    return libs[0]


def _pocl_copy(pocl: str, tmp_path: Path) -> Path:
    """A second copy of the wheel's PoCL, laid out as PoCL expects: it finds its runtime files and
    libraries relative to its own folder (site-packages/<pkg>/.libs/../../pocl_binary_distribution)."""
    libs_dir = Path(pocl).parent
    site = libs_dir.parent.parent
    copy_dir = tmp_path / "site" / libs_dir.parent.name / libs_dir.name
    copy_dir.mkdir(parents=True)
    for other in site.iterdir():
        if other.name != libs_dir.parent.name and other.is_dir():
            (tmp_path / "site" / other.name).symlink_to(other)
    copy = copy_dir / "libpocl-copy.so"
    shutil.copy2(pocl, copy)
    return copy


def _platforms(env_extra: dict, tmp_path: Path) -> list:
    env = _early.child_env()
    env.update(env_extra)
    out = subprocess.run(_early.child_argv(), env=env, capture_output=True, timeout=60, check=True)
    return [p["name"] for p in json.loads(out.stdout)["platforms"]]


def test_ocl_icd_filenames_gives_the_platforms_the_system_loader_gives(tmp_path: Path) -> None:
    # The H200 machine's case in miniature (OCL_ICD_FILENAMES=libpocl.so.2:libnvidia-opencl.so.1 and a
    # vendors directory naming libpocl.so.2.12.0, the same file: clinfo lists two platforms). Each ICD
    # entry that loads is one platform, so the count tells which entries were loaded. The Khronos loader
    # loads every OCL_ICD_FILENAMES entry, then the vendors directory, each library once, and never
    # the wheel's bundled PoCL; pyopencl's bundled loader alone would load the vendors directory plus
    # its bundled PoCL and ignore OCL_ICD_FILENAMES.
    pocl = _bundled_pocl()
    copy = _pocl_copy(pocl, tmp_path)  # another file: another library handle, another platform
    libs = {"LD_LIBRARY_PATH": os.path.dirname(pocl)}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert len(_platforms({"OCL_ICD_VENDORS": str(empty)}, tmp_path)) == 1  # the bundled PoCL
    assert len(_platforms({**libs, "OCL_ICD_VENDORS": str(empty), "OCL_ICD_FILENAMES": str(copy)}, tmp_path)) == 1
    both = f"{copy}:{pocl}"
    assert len(_platforms({**libs, "OCL_ICD_VENDORS": str(empty), "OCL_ICD_FILENAMES": both}, tmp_path)) == 2
    twice = f"{copy}:{copy}"
    assert len(_platforms({**libs, "OCL_ICD_VENDORS": str(empty), "OCL_ICD_FILENAMES": twice}, tmp_path)) == 1
    vendors = tmp_path / "vendors"
    vendors.mkdir()
    (vendors / "pocl.icd").write_text(f"{copy}\n")  # the same library as the env entry: one platform
    assert len(_platforms({**libs, "OCL_ICD_VENDORS": str(vendors), "OCL_ICD_FILENAMES": str(copy)}, tmp_path)) == 1
    (vendors / "pocl.icd").write_text(f"{pocl}\n")  # another library: two
    assert len(_platforms({**libs, "OCL_ICD_VENDORS": str(vendors), "OCL_ICD_FILENAMES": str(copy)}, tmp_path)) == 2


def test_vendors_dir_keeps_the_system_icds_and_adds_the_listed_ones(tmp_path: Path) -> None:
    vendors = tmp_path / "etc"
    vendors.mkdir()
    (vendors / "intel.icd").write_text("libigdrcl.so\n")
    (vendors / "README").write_text("not an icd\n")
    out = tmp_path / "out"
    out.mkdir()
    got = icd_vendors_dir(
        {"OCL_ICD_FILENAMES": "libnvidia-opencl.so.1:/opt/x/libfoo.so", "OCL_ICD_VENDORS": str(vendors)},
        str(out),
    )
    assert got == str(out)
    contents = sorted(p.read_text().strip() for p in out.iterdir())
    assert contents == ["/opt/x/libfoo.so", "libigdrcl.so", "libnvidia-opencl.so.1"]


def test_without_ocl_icd_filenames_nothing_changes(tmp_path: Path) -> None:
    assert icd_vendors_dir({"OCL_ICD_VENDORS": "/nonexistent"}, str(tmp_path)) is None
    assert icd_vendors_dir({"OCL_ICD_FILENAMES": " : "}, str(tmp_path)) is None
    assert not list(tmp_path.iterdir())


def test_a_missing_vendors_dir_still_gives_the_listed_libraries(tmp_path: Path) -> None:
    got = icd_vendors_dir(
        {"OCL_ICD_FILENAMES": "libnvidia-opencl.so.1", "OCL_ICD_VENDORS": str(tmp_path / "absent")},
        str(tmp_path),
    )
    assert got and [p.read_text().strip() for p in tmp_path.iterdir()] == ["libnvidia-opencl.so.1"]


def _child_doc(mode: str, env_extra: dict) -> bytes:
    env = _early.child_env()
    env.update(env_extra)
    if mode:
        env["MLPROBE_OPENCL_IMPORT"] = mode
    else:
        env.pop("MLPROBE_OPENCL_IMPORT", None)
    return subprocess.run(_early.child_argv(), env=env, capture_output=True, timeout=60, check=True).stdout


def test_the_loader_through_ctypes_gives_the_document_the_binding_gives() -> None:
    """The default child calls pyopencl's bundled ICD loader through ctypes (no numpy import); its
    document is byte for byte the one pyopencl's binding and a full `import pyopencl` give."""
    _bundled_pocl()
    fast = _child_doc("", {})
    assert json.loads(fast)["platforms"], fast  # the bundled PoCL is found without the binding's RPATH
    assert fast == _child_doc("binding", {}) == _child_doc("full", {})


def test_no_platform_reads_as_absent_as_with_a_full_import(tmp_path: Path) -> None:
    """With no ICD the loader can load (OCL_ICD_VENDORS names a folder that is not there), the child says what
    `import pyopencl` says: no platform, absent. (The bare binding's error has no words, only an
    object's repr, so it read as an error.)"""
    _bundled_pocl()
    env = {"OCL_ICD_VENDORS": str(tmp_path / "absent")}
    fast = _child_doc("", env)
    assert fast == _child_doc("full", env)
    doc = json.loads(fast)
    assert doc["absent"] is True and doc["platforms"] == []
    assert "PLATFORM_NOT_FOUND" in doc["error"]


def test_a_pyopencl_without_a_bundled_loader_uses_the_binding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution's pyopencl links the system's libOpenCL (no .libs folder): the child does not
    guess a loader and takes the binding's way."""
    from mlprobe.scan.live import opencl_child

    pkg = tmp_path / "pyopencl"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("PYOPENCL_HOME", raising=False)
    import importlib

    importlib.invalidate_caches()
    monkeypatch.delitem(__import__("sys").modules, "pyopencl", raising=False)
    assert opencl_child._bundled_loader() is None
