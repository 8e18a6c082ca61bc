"""collect_env probe: `python -m torch.utils.collect_env` pastes (CUDA on Linux, ROCm on WSL2, CUDA
on Windows) -> torch build, GPUs, runtimes, and OS/CPU only where the bundle has nothing better."""

from __future__ import annotations

from pathlib import Path
from typing import List

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mlprobe.errors import ParseError
from mlprobe.model.facts import Runtimes
from mlprobe.scan.host import ReplayHost
from mlprobe.probes import collect_env as ce

from .fuzz import examples, mutated

FIX = Path(__file__).resolve().parent.parent / "fixtures"
BUNDLES = sorted(p.parent.name for p in FIX.glob("*/collect_env.txt"))


def read(folder: str) -> str:
    return (FIX / folder / "collect_env.txt").read_bytes().decode("utf-8", errors="replace")


# A 4-GPU block as printed by torch 2.x collect_env (quoted in a public issue digest); the list
# starts on the line after its key and ends at a blank line.
MULTI = """PyTorch version: 2.5.1+cu124
Is debug build: False
CUDA used to build PyTorch: 12.4
ROCM used to build PyTorch: N/A

OS: Rocky Linux 8.10 (Green Obsidian) (x86_64)
Python platform: Linux-4.18.0-553.40.1.el8_10.x86_64-x86_64-with-glibc2.28
Is CUDA available: True
CUDA runtime version: 12.4.131
CUDA_MODULE_LOADING set to: LAZY
GPU models and configuration:@
GPU 0: NVIDIA A100 80GB PCIe
GPU 1: NVIDIA A100 80GB PCIe
GPU 2: NVIDIA A100 80GB PCIe
GPU 3: NVIDIA A100 80GB PCIe

Nvidia driver version: 550.54.15
cuDNN version: Could not collect
HIP runtime version: N/A
MIOpen runtime version: N/A
""".replace("@", " ")  # collect_env prints the key with a trailing space before the list


def test_there_are_cuda_and_rocm_bundles() -> None:
    envs = [ce.parse_collect_env(read(f)) for f in BUNDLES]
    assert len(envs) >= 3
    assert any(ce.known(e.get("ROCM used to build PyTorch")) for e in envs)
    assert any(ce.known(e.get("CUDA used to build PyTorch")) for e in envs)


def test_linux_cuda_h100() -> None:
    env = ce.parse_collect_env(read("linux-nvidia-h100-torch-collect-env"))
    gpus = ce.gpus_from_env(env)
    assert [
        (g.vendor, g.name, g.driver_version, g.apis, g.compute_capability, g.integrated) for g in gpus
    ] == [("nvidia", "NVIDIA H100 80GB HBM3", "570.172.08", ("cuda",), "9.0", False)]
    fws = {f.name: f for f in ce.frameworks_from_env(env)}
    # the version exactly as printed (no +cu130), the flavour from "CUDA used to build PyTorch: 13.0"
    assert (fws["torch"].version, fws["torch"].flavour, fws["torch"].cuda) == ("2.9.0", "cu130", "13.0")
    assert fws["torchvision"].version == "0.24.0" and fws["torchaudio"].version == "2.9.0"
    assert "triton" not in fws and "numpy" not in fws
    rt = ce.runtimes_from_env(env, "Linux")
    assert rt.cuda is not None
    assert rt.cuda.to_dict() == {"driver_version": "570.172.08", "version": "12.8", "toolkit_version": "13.0.88"}
    assert rt.rocm is None
    os_facts = ce.os_from_env(env)
    assert os_facts is not None and (os_facts.system, os_facts.distro, os_facts.glibc, os_facts.wsl) == (
        "Linux",
        "Ubuntu 22.04.5 LTS",
        "2.35",
        False,
    )
    cpu = ce.cpu_from_env(env)
    assert cpu is not None and (cpu.vendor, cpu.cores, cpu.threads, cpu.x86_64_level) == ("intel", 64, 128, 4)
    assert "amx_bf16" in cpu.flags and cpu.source == "collect_env.txt"


def test_wsl2_rocm() -> None:
    env = ce.parse_collect_env(read("linux-amd-rx6800xt-wsl2-rocm-torch-collect-env"))
    (gpu,) = ce.gpus_from_env(env)
    assert (gpu.vendor, gpu.name, gpu.apis, gpu.driver_version) == (
        "amd",
        "AMD Radeon RX 6800 XT",
        ("rocm",),
        None,
    )
    torch = ce.frameworks_from_env(env)[0]
    assert (torch.version, torch.flavour) == ("2.1.2+rocm6.1.3", "rocm6.1.3")
    rt = ce.runtimes_from_env(env, "Linux")
    assert rt.cuda is None and rt.rocm is not None
    assert rt.rocm.to_dict() == {"hip_version": "6.1.40093", "miopen_version": "3.1.0"}
    os_facts = ce.os_from_env(env)
    assert (
        os_facts is not None
        and os_facts.wsl is True
        and os_facts.release == "5.15.153.1-microsoft-standard-WSL2"
    )
    assert ce.cpu_from_env(env) is None  # this torch printed no CPU section


def test_windows_cuda() -> None:
    env = ce.parse_collect_env(read("windows-nvidia-rtx3060ti-torch-collect-env"))
    (gpu,) = ce.gpus_from_env(env)
    assert (gpu.name, gpu.driver_version, gpu.compute_capability) == (
        "NVIDIA GeForce RTX 3060 Ti",
        "512.96",
        "8.6",
    )
    os_facts = ce.os_from_env(env)
    assert os_facts is not None and (os_facts.system, os_facts.windows_build, os_facts.distro) == (
        "Windows",
        22000,
        "Microsoft Windows 11 Pro",
    )
    names = [f.name for f in ce.frameworks_from_env(env)]
    assert names.count("torch") == 1 and {"torchvision", "torchaudio"} <= set(names)


def test_multi_gpu_list() -> None:
    env = ce.parse_collect_env(MULTI)
    gpus = ce.gpus_from_env(env)
    assert [g.name for g in gpus] == ["NVIDIA A100 80GB PCIe"] * 4
    assert all(g.driver_version == "550.54.15" and g.apis == ("cuda",) for g in gpus)


def test_unknowns_are_null() -> None:
    text = (
        "PyTorch version: 2.3.1+cpu\nIs debug build: False\nCUDA used to build PyTorch: None\n"
        "ROCM used to build PyTorch: N/A\n\nOS: Microsoft Windows 11 Pro\nIs CUDA available: False\n"
        "CUDA runtime version: No CUDA\nGPU models and configuration: No CUDA\n"
        "Nvidia driver version: No CUDA\n"
        "cuDNN version: No CUDA\nHIP runtime version: N/A\n"
    )
    env = ce.parse_collect_env(text)
    assert ce.gpus_from_env(env) == [] and ce.runtimes_from_env(env, "Windows") == Runtimes()
    torch = ce.frameworks_from_env(env)[0]
    assert (torch.version, torch.flavour, torch.cuda) == ("2.3.1+cpu", "cpu", None)


def test_not_collect_env() -> None:
    with pytest.raises(ParseError):
        ce.parse_collect_env("Traceback (most recent call last):\n  File ...\nModuleNotFoundError: torch\n")


def test_probe_defers_to_better_sources(tmp_path: Path) -> None:
    (tmp_path / "collect_env.txt").write_text(read("linux-nvidia-h100-torch-collect-env"))
    out = ce.probe(ReplayHost(tmp_path))
    assert out.os is not None and out.cpu is not None
    (tmp_path / "proc-cpuinfo.txt").write_text(
        "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu lm\n"
    )
    out = ce.probe(ReplayHost(tmp_path))
    assert out.cpu is None and out.os is not None
    (tmp_path / "host.json").write_text('{"system": "Linux"}')
    out = ce.probe(ReplayHost(tmp_path))
    assert out.os is None and out.cpu is None and out.gpus and out.frameworks


def test_a_host_json_without_a_cpu_keeps_the_pastes_cpu(tmp_path: Path) -> None:
    """host.json names the platform, not the CPU: a bundle of host.json + collect_env.txt still gets
    the paste's CPU model and flags, in the scan report too."""
    from mlprobe.scan.run import facts_to_report, scan

    (tmp_path / "collect_env.txt").write_text(read("linux-nvidia-h100-torch-collect-env"))
    (tmp_path / "host.json").write_text('{"system": "Linux", "machine": "x86_64", "python_version": "3.11.9"}')
    out = ce.probe(ReplayHost(tmp_path))
    assert out.os is None and out.cpu is not None and out.cpu.model and out.cpu.source == "collect_env.txt"
    cpu = facts_to_report(scan(ReplayHost(tmp_path)))["cpu"]
    assert cpu["model"] == out.cpu.model and cpu["flags"] and cpu["source"] == "collect_env.txt"
    (tmp_path / "py-cpuinfo.json").write_text('{"arch": "X86_64", "brand_raw": "Other CPU", "flags": ["sse2"]}')
    assert ce.probe(ReplayHost(tmp_path)).cpu is None  # a CPU source of its own wins


TEXTS: List[str] = [read(f) for f in BUNDLES] + [MULTI]


@pytest.mark.parametrize("text", TEXTS, ids=BUNDLES + ["multi"])
@settings(
    max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data())
def test_parser_survives_mutation(text: str, data: st.DataObject) -> None:
    original = len(ce.gpus_from_env(ce.parse_collect_env(text)))
    try:
        env = ce.parse_collect_env(data.draw(mutated(text)))
    except ParseError:
        return
    assert len(ce.gpus_from_env(env)) <= original
    ce.frameworks_from_env(env)
    ce.runtimes_from_env(env, "Linux")
    ce.os_from_env(env)
    ce.cpu_from_env(env)


@settings(max_examples=examples(80), deadline=None)
@given(blob=st.binary(max_size=2000))
def test_parser_survives_random_bytes(blob: bytes) -> None:
    try:
        env = ce.parse_collect_env("PyTorch version: 2.4.0\n" + blob.decode("utf-8", errors="replace"))
    except ParseError:
        return
    ce.gpus_from_env(env)
    ce.cpu_from_env(env)
    ce.os_from_env(env)


B60 = "linux-intel-arc-pro-b60-torch-2.11-xpu-collect-env"


def test_xpu_devices_are_read() -> None:
    env = ce.parse_collect_env(read(B60))
    (gpu,) = ce.xpu_gpus_from_env(env)
    assert (gpu.vendor, gpu.name, gpu.pci_device_id, gpu.integrated) == (
        "intel", "Intel(R) Arc(TM) Pro B60 Graphics", "0xe211", False)
    assert gpu.memory_bytes == 23256 * 2**20 and gpu.compute_units == 160 and gpu.apis == ("xpu",)
    assert gpu.driver_version == "25.44.36015.8"  # intel-opencl-icd's upstream version, not libze1's


def test_an_xpu_device_named_by_its_pci_id_gets_the_product() -> None:
    """Older runtimes print the PCI id as the name and older torch has no device_id field: the id in
    the name is enough. An integrated GPU's total_memory is a share of RAM, not its own."""
    text = read(B60).replace("name='Intel(R) Arc(TM) Pro B60 Graphics'", "name='Intel(R) Graphics [0xe20b]'")
    text = text.replace("device_id=0xE211, ", "")
    (gpu,) = ce.xpu_gpus_from_env(ce.parse_collect_env(text))
    assert (gpu.name, gpu.pci_device_id, gpu.architecture) == (
        "Intel(R) Arc(TM) B580 Graphics", "0xe20b", "Xe2/Battlemage (Arc B)")
    lunar = text.replace("Intel(R) Graphics [0xe20b]", "Intel(R) Graphics [0x64a0]")
    (igpu,) = ce.xpu_gpus_from_env(ce.parse_collect_env(lunar))
    assert igpu.integrated is True and igpu.memory_bytes is None and igpu.architecture == "Xe2-LPG (Lunar Lake)"


def test_xpu_not_available_gives_no_xpu_api() -> None:
    text = read(B60).replace("Is XPU available: True", "Is XPU available: False")
    (gpu,) = ce.xpu_gpus_from_env(ce.parse_collect_env(text))
    assert gpu.apis == ()
    assert ce.xpu_gpus_from_env(ce.parse_collect_env(MULTI)) == []
