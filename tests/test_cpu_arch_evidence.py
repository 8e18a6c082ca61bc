"""The CPU from bundles without a CPU source: what other tools printed of it is used, the
architecture comes with the fact it follows from, and nothing is defaulted."""

from __future__ import annotations

import pytest

from mlprobe.probes.opencl import cpu_model_of
from mlprobe.scan.host import ReplayHost
from mlprobe.scan.run import facts_to_report, scan

from .conftest import FIXTURES


@pytest.mark.parametrize("bundle, model, arch, evidence", [
    # a tool's CPU device or agent name, then the model's x86 family (cpu_families.json)
    ("linux-intel-arc-a770-x4-docker-sycl-ls-ipex-llm-vllm", "Intel(R) Xeon(R) w5-3435X", "x86_64", "x86 family"),
    ("linux-intel-arc-a770-x2-uhd770-sycl-ls-ipex-llm", "Intel(R) Core(TM) i9-14900K", "x86_64", "x86 family"),
    ("linux-amd-instinct-mi25-x7-rocminfo", "AMD Ryzen Threadripper PRO 3955WX 16-Cores", "x86_64", "x86 family"),
    # a product found on one architecture only (host_inference.json)
    ("linux-arm64-jetson-agx-thor-jp7-l4t-device-tree", None, "aarch64", "Jetson board"),
    ("linux-nvidia-gh200-x4-smi", None, "aarch64", "Grace superchip"),
    # a CPU source of its own names the capture
    ("linux-arm64-grace-neoverse-v2-cpuinfo", None, "aarch64", "proc-cpuinfo.txt"),
])
def test_arch_comes_with_its_evidence(bundle: str, model: object, arch: str, evidence: str) -> None:
    cpu = scan(ReplayHost(FIXTURES / bundle)).cpu
    assert cpu.arch == arch and cpu.arch_evidence and evidence in cpu.arch_evidence, cpu
    if model is not None:
        assert cpu.model == model


@pytest.mark.parametrize("bundle", ["linux-nvidia-h100-smi", "linux-nvidia-l40s-smi-query-csv"])
def test_nothing_implies_an_architecture_so_it_stays_unknown(bundle: str) -> None:
    report = facts_to_report(scan(ReplayHost(FIXTURES / bundle)))
    assert report["cpu"]["arch"] is None and report["cpu"]["arch_evidence"] is None


def test_a_platform_tag_gives_the_architecture(tmp_path: object) -> None:
    from pathlib import Path

    folder = Path(str(tmp_path))
    (folder / "collect_env.txt").write_text(
        "PyTorch version: 2.5.1+cu124\nPython platform: Linux-6.8.0-45-generic-aarch64-with-glibc2.39\n"
        "Is CUDA available: False\n", encoding="utf-8")
    cpu = scan(ReplayHost(folder)).cpu
    assert cpu.arch == "aarch64" and "Python platform tag" in str(cpu.arch_evidence)


@pytest.mark.parametrize("name, model", [
    ("pthread-Intel(R) Xeon(R) CPU E5-2682 v4 @ 2.50GHz", "Intel(R) Xeon(R) CPU E5-2682 v4 @ 2.50GHz"),
    ("cpu-haswell-Intel(R) Core(TM) Ultra 7 256V", "Intel(R) Core(TM) Ultra 7 256V"),
    ("cpu-x86-64-v3-AMD EPYC 7763 64-Core Processor", "AMD EPYC 7763 64-Core Processor"),
    ("AMD Ryzen 9 7950X 16-Core Processor", "AMD Ryzen 9 7950X 16-Core Processor"),
])
def test_opencl_cpu_device_names(name: str, model: str) -> None:
    assert cpu_model_of(name) == model
