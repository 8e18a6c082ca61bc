"""The device check (mlprobe/verify/devicecheck.py): the rules that explain a requested device a
framework does not list, over the real loader captures of the H200 machine and of this machine, and
end to end: verify's NOT_SEEN result and install's check, fix and rollback."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

from mlprobe.verify import devicecheck as D
from mlprobe.verify import runner
from mlprobe.verify import verdict as V

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "fixtures" / "linux-nvidia-h200-ocl-icd-ignores-filenames"
HERE = ROOT / "fixtures" / "opencl-loaders-linux-nogpu-container"
WANT = "opencl_nvidia_nvidia_h200.0"


def load(path: Path) -> Dict[str, Any]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def test_the_h200_capture_names_the_loader_that_ignores_ocl_icd_filenames_and_the_fix() -> None:
    d = D.diagnose_opencl("plaidml", WANT, load(H200 / "opencl-loaders.json"), venv="/opt/torch/.venv")
    assert "/usr/lib/x86_64-linux-gnu/libOpenCL.so.1.0.0" in d.cause
    assert "does not read OCL_ICD_FILENAMES" in d.cause and "libnvidia-opencl.so.1" in d.cause
    assert d.fix is not None and d.fix.id == "venv-vendors"
    assert d.fix.env == {"OCL_ICD_VENDORS": "/opt/torch/.venv/etc/OpenCL/vendors"}
    # the evidence shows both loaders: the one PlaidML opens lists PoCL only, the other one NVIDIA too
    assert any(e.startswith("libOpenCL.so -> ") and "NVIDIA" not in e for e in d.evidence)
    assert any(e.startswith("libOpenCL.so.1 -> ") and "NVIDIA H200" in e for e in d.evidence)


def test_without_a_venv_the_same_cause_comes_with_steps_and_no_fix() -> None:
    d = D.diagnose_opencl("plaidml", WANT, load(H200 / "opencl-loaders.json"), venv=None)
    assert d.fix is None and "OCL_ICD_VENDORS" in d.next_step


def test_after_the_fix_the_loader_lists_the_gpu() -> None:
    after = load(H200 / "opencl-loaders-activated.json")
    mine = next(r for r in after["loaders"] if r["name"] == "libOpenCL.so")
    assert D._loader_lists(D.LoaderRecord.from_json(mine), WANT)
    assert mine["env"]["OCL_ICD_VENDORS"] == "/opt/torch/.venv/etc/OpenCL/vendors"
    # listed at the loader level: the cause is PlaidML's own configuration, and nothing to fix there
    d = D.diagnose_opencl("plaidml", WANT, after, venv="/opt/torch/.venv")
    assert "lists" in d.cause and d.fix is None


def test_no_loader_at_all_here_says_which_package_gives_the_name() -> None:
    d = D.diagnose_opencl("plaidml", WANT, load(HERE / "opencl-loaders.json"), venv="/tmp/v")
    assert "finds no such file" in d.cause and "ocl-icd-opencl-dev" in d.cause
    assert d.fix is None  # no other loader on this machine lists the device: nothing to link to


def test_a_missing_unversioned_name_with_another_loader_that_lists_it_gets_a_link() -> None:
    # the H200 capture with `libOpenCL.so` made unresolvable (a machine without ocl-icd-opencl-dev)
    doc = copy.deepcopy(load(H200 / "opencl-loaders.json"))
    mine = next(r for r in doc["loaders"] if r["name"] == "libOpenCL.so")
    mine.update(path=None, platforms=None, reads_ocl_icd_filenames=None,
                error="OSError: libOpenCL.so: cannot open shared object file: No such file or directory")
    d = D.diagnose_opencl("plaidml", WANT, doc, venv="/v")
    assert d.fix is not None and d.fix.id == "venv-loader-link"
    assert d.fix.links == {"lib/mlprobe-opencl/libOpenCL.so":
                           "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libOpenCL.so.1.0.0"}
    assert d.fix.prepend == {"LD_LIBRARY_PATH": "/v/lib/mlprobe-opencl"}


def test_a_device_no_loader_lists_is_a_driver_problem() -> None:
    after = load(H200 / "opencl-loaders-activated.json")  # every ICD reaches every loader here
    d = D.diagnose_opencl("plaidml", "opencl_nvidia_nvidia_h999.0", after, venv="/v")
    assert d.cause.startswith("no OpenCL loader on this machine lists") and d.fix is None
    # where PlaidML's loader still ignores an ICD the environment names, that fix is tried, and said
    # to be maybe not all (the check after it decides)
    d = D.diagnose_opencl("plaidml", "opencl_nvidia_nvidia_h999.0", load(H200 / "opencl-loaders.json"), venv="/v")
    assert d.fix is not None and d.fix.id == "venv-vendors" and "that may not be all" in d.cause


def _torch(devices: Any, unavailable: Any = ()) -> D.Listing:
    return D.Listing("torch", "2.13.0+cpu", tuple(devices), tuple(unavailable))


CPU_ONLY = [{"id": "cuda", "kind": "cuda", "quiet": True,
             "reason": "torch 2.13.0+cpu is a CPU-only build (no CUDA or ROCm)"}]


def test_a_cpu_only_build_is_the_first_broken_link() -> None:
    d = D.diagnose("torch", "cuda", _torch([{"id": "cpu", "kind": "cpu"}], CPU_ONLY), {},
                   nodes={"/dev/nvidiactl": (False, False)})
    assert "CPU-only build" in d.cause and "mlprobe plan" in d.next_step


@pytest.mark.parametrize("value", ["", "-1"])
def test_a_visibility_variable_that_hides_every_gpu_is_named(value: str) -> None:
    built = [{"id": "cuda", "kind": "cuda", "reason": "torch 2.11 is built for CUDA 13.0 but "
              "torch.cuda.is_available() is False: no usable GPU or driver"}]
    d = D.diagnose("torch", "cuda", _torch([{"id": "cpu", "kind": "cpu"}], built),
                   {"CUDA_VISIBLE_DEVICES": value}, nodes={})
    assert f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU" in d.cause
    assert d.next_step.startswith("unset CUDA_VISIBLE_DEVICES")


def test_device_nodes_missing_or_closed_to_this_user() -> None:
    built = [{"id": "cuda", "kind": "rocm", "reason": "torch is built for ROCm/HIP 7.2 but … False"}]
    missing = D.diagnose("torch", "rocm", _torch([{"id": "cpu", "kind": "cpu"}], built), {},
                         nodes={"/dev/kfd": (False, False)})
    assert "/dev/kfd does not exist" in missing.cause and "--device /dev/kfd" in missing.next_step
    denied = D.diagnose("torch", "rocm", _torch([{"id": "cpu", "kind": "cpu"}], built), {},
                        nodes={"/dev/kfd": (True, False)})
    assert "may not open /dev/kfd" in denied.cause and "usermod" in denied.next_step


def test_what_asks_for_a_device(tmp_path: Path) -> None:
    assert runner.requests_for("torch", "cuda", {}) == [("cuda", "--device")]
    assert runner.requests_for("torch", None, {"CUDA_VISIBLE_DEVICES": "0,1"}) == [("gpu", "CUDA_VISIBLE_DEVICES=0,1")]
    assert runner.requests_for("torch", None, {"CUDA_VISIBLE_DEVICES": "-1"}) == []  # hides, asks nothing
    assert runner.requests_for("plaidml", None, {"PLAIDML_DEVICE_IDS": "a.0 b.0"}) == [
        ("a.0", "PLAIDML_DEVICE_IDS"), ("b.0", "PLAIDML_DEVICE_IDS")]
    settings = tmp_path / "plaidml.json"
    settings.write_text(json.dumps({"PLAIDML_DEVICE_IDS": [WANT], "PLAIDML_EXPERIMENTAL": False}))
    assert runner.requests_for("plaidml", None, {"PLAIDML_SETTINGS": str(settings)}) == [(WANT, str(settings))]
    settings.write_text("{not json")
    assert runner.requests_for("plaidml", None, {"PLAIDML_SETTINGS": str(settings)}) == []


def test_a_not_seen_result_fails_verify() -> None:
    doc = {"results": [{"verdict": V.CPU, "device": "llvm_cpu.0"}, {"verdict": V.NOT_SEEN, "device": WANT}],
           "request": {"device": None}}
    assert runner.exit_code(doc) == 1


def test_the_loader_probe_here_answers_in_a_child() -> None:
    doc = D.probe_loaders(sys.executable, {}, ["libOpenCL.so", "/nonexistent/libOpenCL.so.1"])
    assert doc["kind"] == "mlprobe.opencl-loaders/1" and len(doc["loaders"]) == 2
    missing = doc["loaders"][1]
    assert missing["path"] is None and "cannot open" in str(missing["error"])


@pytest.mark.slow
def test_verify_names_a_requested_cuda_device_as_not_seen_on_this_cpu_machine() -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "mlprobe", "verify", "--framework", "torch", "--device", "cuda",
                        "--quick", "--json", "--no-cpu-peers"], capture_output=True, text=True, timeout=600,
                       env=env)
    assert r.returncode == 1, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    seen = [x for x in doc["results"] if x["verdict"] == V.NOT_SEEN]
    assert len(seen) == 1 and seen[0]["device"] == "cuda" and seen[0]["listed_devices"] == ["cpu"]
    assert seen[0]["requested_by"] == "--device" and "CPU-only build" in seen[0]["likely_cause"]
    from mlprobe.verify.schema import validate

    assert validate(doc) == []


# ---------------------------------------------------------------- install's check --------------

def _torch_site() -> str:
    torch = pytest.importorskip("torch")
    return str(Path(torch.__file__).resolve().parent.parent)


@pytest.mark.slow
def test_install_rolls_back_when_the_framework_does_not_list_the_recipes_device(tmp_path: Path) -> None:
    """A recipe for torch on `cuda` into a venv whose torch is this machine's CPU build: the device
    check fails after installing, E540 names the device, what torch lists and why, and the venv is as
    it was; with --keep-without-device the install stays and says so."""
    from tests.pep503_server import IndexConfig, LocalIndex, sample_wheels
    from tests.test_install_transaction import assert_unchanged, cli, existing_env, recipe

    site = _torch_site()
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    sample_wheels(wheels)
    work = tmp_path / "w"
    (work / "cache").mkdir(parents=True)
    (work / "cwd").mkdir()
    with LocalIndex(wheels, IndexConfig(), max_requests=3000, lifetime_s=240) as index:
        venv, py, _, _ = existing_env(work, index)
        purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, timeout=60).stdout.strip()
        Path(purelib, "zz-test-torch.pth").write_text(site + "\n")  # this machine's torch, seen in the venv
        from tests.test_install_transaction import pip_freeze, tree_state

        freeze, tree = pip_freeze(py), tree_state(venv)
        rec = recipe(work, ["demo-app"], framework="torch", device="cuda",
                     verify={"framework": "torch", "device": "cuda"})
        cp = cli(work, "--recipe-file", str(rec), "--index-url", index.url, "--apply", "--no-verify",
                 "--venv", str(venv), "--installer", "pip")
        assert cp.returncode == 1, cp.stdout + cp.stderr
        assert "[E540]" in cp.stderr and "torch does not list cuda in the new environment" in cp.stderr
        assert "it lists cpu" in cp.stderr and "CPU-only build" in cp.stderr
        assert "--keep-without-device" in cp.stderr
        assert_unchanged(venv, py, freeze, tree)
        kept = cli(work, "--recipe-file", str(rec), "--index-url", index.url, "--apply", "--no-verify",
                   "--venv", str(venv), "--installer", "pip", "--keep-without-device", "--json")
        assert kept.returncode == 0, kept.stderr
        doc = json.loads(kept.stdout)
        assert "demo-app==1.0" in pip_freeze(py)
        assert "does not list cuda" in doc["result"]["device_note"] and "Kept anyway" in doc["result"]["device_note"]
