from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mlprobe.scan.host import ReplayHost
from mlprobe.probes import frameworks as fw, os_
from mlprobe.scan.live.frameworks import live_inventory
from mlprobe.scan.run import scan


@pytest.mark.parametrize(
    "name,version,cuda,hip,system,expected",
    [
        ("torch", "2.13.0+cpu", None, None, "Linux", "cpu"),
        ("torch", "2.9.1+cu130", "13.0", None, "Linux", "cu130"),
        ("torch", "2.6.0+rocm6.2.4", None, "6.2.41133", "Linux", "rocm6.2.4"),
        ("torch", "2.11.0", "13.0", None, "Linux", "cu130"),  # PyPI default build, no local label
        ("torch", "2.3.0", None, "6.0.32830", "Linux", "rocm6.0"),
        ("torch", "2.5.1", None, None, "Darwin", "cpu"),
        ("torch", "2.8.0+xpu", None, None, "Linux", "xpu"),
        ("tensorflow-cpu", "2.10.0", None, None, "Windows", "cpu"),
        ("onnxruntime-directml", "1.24.4", None, None, "Windows", "directml"),
        ("tensorflow", "2.16.1", None, None, "Linux", None),
    ],
)
def test_flavour(name, version, cuda, hip, system, expected) -> None:  # type: ignore[no-untyped-def]
    assert fw.flavour(name, version, cuda, hip, system) == expected


def test_torch_version_py() -> None:
    text = "__version__ = '2.13.0+cpu'\ndebug = False\ncuda: Optional[str] = None\nhip: Optional[str] = None\n"
    assert fw.parse_torch_version_py(text) == {"__version__": "2.13.0+cpu", "cuda": None, "hip": None}
    text = "__version__ = '2.11.0+cu130'\ncuda: Optional[str] = '13.0'\nhip: Optional[str] = None\n"
    assert fw.parse_torch_version_py(text)["cuda"] == "13.0"


def test_pip_list_and_freeze() -> None:
    listing = "Package    Version\n---------- ---------\nnumpy      2.4.6\ntorch      2.13.0+cpu\nTensorflow_CPU 2.10.0\n"
    got = {r["name"]: r["version"] for r in fw.parse_pip_list(listing)}
    assert got == {"torch": "2.13.0+cpu", "tensorflow-cpu": "2.10.0"}
    assert fw.parse_pip_list("torch==2.1.0\nplaidml-keras==0.7.0\n")[1]["name"] == "plaidml-keras"


def test_live_inventory_finds_what_is_installed_without_importing() -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("pyopencl")
    except PackageNotFoundError:
        pytest.skip("pyopencl not installed")
    before = set(sys.modules)
    inv = {r["name"]: r for r in live_inventory()}
    assert "torch" not in set(sys.modules) - before and "tensorflow" not in set(sys.modules) - before
    assert inv["pyopencl"]["version"] == installed


def test_replayed_pip_list_gives_frameworks(tmp_path: Path) -> None:
    (tmp_path / "host.json").write_text(json.dumps({"system": "Linux", "python_version": "3.10.12"}))
    (tmp_path / "pip-list.txt").write_text("Package Version\n------- -------\ntorch 2.4.1+cu118\n")
    facts = scan(ReplayHost(tmp_path))
    torch = facts.framework("torch")
    assert torch is not None and torch.flavour == "cu118"


def test_os_release_quotes() -> None:
    rel = os_.parse_os_release('NAME="Ubuntu"\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.3 LTS"\nID=ubuntu\n')
    assert rel["PRETTY_NAME"] == "Ubuntu 22.04.3 LTS" and rel["ID"] == "ubuntu"


def test_wsl_from_kernel_release(tmp_path: Path) -> None:
    (tmp_path / "host.json").write_text(json.dumps(
        {"system": "Linux", "release": "5.15.153.1-microsoft-standard-WSL2", "version": "#1 SMP"}))
    facts = scan(ReplayHost(tmp_path), only=["os"])
    assert facts.os.wsl is True


def test_plugin_probes_are_found_through_entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe.probes import plugins

    dist = tmp_path / "mlprobe_tpu-1.0.dist-info"
    dist.mkdir()
    (dist / "entry_points.txt").write_text("[console_scripts]\nx = y:z\n\n[mlprobe.probes]\ntpu = mlprobe_tpu.probe:probe\n")
    (tmp_path / "other-2.0.dist-info").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    assert ("tpu", "mlprobe_tpu.probe") in plugins()
    assert all(name != "x" for name, _ in plugins())
