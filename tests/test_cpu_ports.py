"""The /proc/cpuinfo layouts of the kernel ports (probes/cpu_ports.py), the ARM core tables, and the
plan's per-architecture truth (cpu_archs.json through the arch_has_build condition)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mlprobe.model import knowledge as kb
from mlprobe.scan.capture import decode
from mlprobe.model.context import RulesContext
from mlprobe.model.facts import CpuFacts, Facts
from mlprobe.model.knowledge import Row
from mlprobe.plan.conditions import evaluate
from mlprobe.plan.context import derive
from mlprobe.errors import ParseError
from mlprobe.scan.host import ReplayHost
from mlprobe.plan.planner import make_plan
from mlprobe.probes import cpu, cpu_ports
from mlprobe.recipes import knowledge
from mlprobe.scan.run import facts_to_report, scan

from .conftest import FIXTURES
from .fuzz import examples


def _blocks(folder: str) -> Any:
    return cpu._kv_blocks(decode((FIXTURES / folder / "proc-cpuinfo.txt").read_bytes()))


@pytest.mark.parametrize(
    "folder, port",
    [
        ("linux-nogpu-ppc64-power7-cpuinfo", "powerpc"),
        ("linux-nogpu-ppc-powermac-g3-cpuinfo", "powerpc"),
        ("linux-nogpu-ppc64le-power9-cpuinfo", "powerpc"),
        ("linux-nogpu-s390x-z196-lpar-cpuinfo", "s390"),
        ("linux-nogpu-s390x-z13-lpar-drawer-cpuinfo", "s390"),
        ("linux-nogpu-riscv64-sifive-u74-visionfive2-cpuinfo", "riscv"),
        ("linux-nogpu-loongarch64-3a5000-cpuinfo", "loongarch"),
        ("linux-nogpu-sparc64-ultrasparc2-cpuinfo", "sparc"),
        ("linux-nogpu-armv7-exynos5-cortex-a15-cpuinfo", "arm"),
        ("linux-arm64-nvidia-gb10-cpuinfo", "arm"),
        ("linux-nogpu-xeon-gold-6230-avx512", "x86"),
    ],
)
def test_each_port_is_recognised_by_its_layout(folder: str, port: str) -> None:
    assert cpu_ports.detect_port(_blocks(folder)) == port


def test_the_board_line_is_never_the_cpu_model() -> None:
    # arm32: `Hardware : SAMSUNG EXYNOS5` is the board; powerpc: `machine : PowerNV 9006-22P`.
    arm = cpu.parse_proc_cpuinfo(
        decode((FIXTURES / "linux-nogpu-armv7-exynos5-cortex-a15-cpuinfo" / "proc-cpuinfo.txt").read_bytes())
    )
    assert arm.model == "Cortex-A15" and "EXYNOS" not in (arm.model or "")
    ppc = cpu.parse_proc_cpuinfo(
        decode((FIXTURES / "linux-nogpu-ppc64le-power9-cpuinfo" / "proc-cpuinfo.txt").read_bytes())
    )
    assert ppc.model == "POWER9"


def test_big_little_lists_every_core_kind_once_with_counts() -> None:
    c = cpu.parse_proc_cpuinfo(
        decode((FIXTURES / "linux-arm64-nvidia-gb10-cpuinfo" / "proc-cpuinfo.txt").read_bytes())
    )
    kinds = {k.name: k.count for k in c.core_types}
    assert kinds == {"Cortex-A725": 10, "Cortex-X925": 10}
    assert sum(kinds.values()) == c.threads
    assert c.isa_summary and "SVE2" in c.isa_summary and "no SME" in c.isa_summary


def test_an_unknown_part_keeps_its_ids_and_no_invented_name() -> None:
    text = (
        "processor\t: 0\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
        "CPU variant\t: 0x0\nCPU part\t: 0xfff\nCPU revision\t: 0\n"
    )
    c = cpu.parse_proc_cpuinfo(text)
    assert c.arch == "aarch64" and c.vendor == "arm"
    assert [(k.name, k.part) for k in c.core_types] == [(None, "0xfff")]
    assert c.model is None


def test_every_arm_part_row_names_a_known_implementer() -> None:
    impls = {r["implementer"] for r in kb.rows("arm_cores", "implementers")}
    parts = kb.rows("arm_cores", "parts")
    assert len(parts) > 150
    assert all(p["implementer"] in impls and p["name"] for p in parts)
    keys = [(p["implementer"], p["part"]) for p in parts]
    assert len(keys) == len(set(keys)), "a (implementer, part) pair is listed twice"


@pytest.mark.parametrize(
    "isa, has, lacks",
    [
        ("rv64imafdc", {"i", "m", "a", "f", "d", "c"}, {"v"}),
        ("rv64gc", {"i", "m", "a", "f", "d", "c"}, {"g"}),
        ("rv64imafdcv_zba_zbb", {"v", "zba", "zbb"}, set()),
        ("rv64imafdcsu", {"i", "c"}, {"s", "u"}),
        ("rv32imac", {"i", "m", "a", "c"}, {"f"}),
        ("mips64r2", set(), {"i"}),
    ],
)
def test_riscv_isa_string(isa: str, has: set, lacks: set) -> None:
    flags = set(cpu_ports.riscv_isa_flags(isa))
    assert has <= flags and not (lacks & flags)


def test_arm_summary_says_what_is_missing() -> None:
    assert cpu_ports.arm_isa_summary(("asimd", "asimddp")) == (
        "NEON, dot product; no BF16, Int8 matrix multiply, SVE, SME"
    )
    assert "no NEON" in cpu_ports.arm_isa_summary(())


# --------------------------------------------------------------------------- the plan per architecture


def _ctx(arch: Any) -> RulesContext:
    return derive(Facts(cpu=CpuFacts(arch=arch)), knowledge())


@pytest.mark.parametrize("arch", ["ppc64le", "s390x", "riscv64", "loongarch64", "armv7l", "sparc64", "mips"])
@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_stock_wheels_are_rejected_with_a_reason_in_words(arch: str, framework: str) -> None:
    out = evaluate(Row({"test": "arch_has_build", "framework": framework}), _ctx(arch), knowledge())
    assert out.value is False
    assert len(out.reasons) == 1 and arch in out.reasons[0] and "source" in out.reasons[0]


@pytest.mark.parametrize("arch", ["x86_64", "arm64"])
def test_x86_and_arm64_have_wheels(arch: str) -> None:
    for fw in ("torch", "tensorflow"):
        assert evaluate(Row({"test": "arch_has_build", "framework": fw}), _ctx(arch), knowledge()).value is True


def test_unknown_arch_is_unknown_not_a_no() -> None:
    out = evaluate(Row({"test": "arch_has_build", "framework": "torch"}), _ctx(None), knowledge())
    assert out.value is None and out.unknown


def test_ppc64le_plan_points_at_conda_forge_and_recommends_no_stock_wheel() -> None:
    report = facts_to_report(scan(ReplayHost(FIXTURES / "linux-nogpu-ppc64le-power9-cpuinfo")))
    plan = make_plan(report)
    assert plan["top"]["torch"] is None and plan["top"]["tensorflow"] is None
    torch_cpu = next(r for r in plan["rejected"] if r["recipe"] == "torch-cpu")
    assert any("conda-forge" in r for r in torch_cpu["reasons"])
    tf_cpu = next(r for r in plan["rejected"] if r["recipe"] == "tensorflow-cpu")
    assert not any("AVX" in r for r in tf_cpu["reasons"]), "a POWER CPU is not 'a CPU without AVX'"


# --------------------------------------------------------------------------- fuzzing the new parsers

CPUINFO_TEXTS = [decode(p.read_bytes()) for p in sorted(FIXTURES.glob("*/proc-cpuinfo.txt"))]


@settings(max_examples=examples(200), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(CPUINFO_TEXTS), st.data())
def test_port_parsers_on_spliced_captures(text: str, data: st.DataObject) -> None:
    # Halves of two different ports' captures glued together: any answer, or a ParseError; never a crash.
    other = data.draw(st.sampled_from(CPUINFO_TEXTS))
    cut_a = data.draw(st.integers(0, len(text)))
    cut_b = data.draw(st.integers(0, len(other)))
    try:
        got = cpu.parse_proc_cpuinfo(text[:cut_a] + other[cut_b:])
    except ParseError:
        return
    assert got.threads is None or got.threads >= 1
    assert all(k.count >= 1 for k in got.core_types)


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=80))
def test_riscv_isa_and_port_detection_take_any_text(text: str) -> None:
    flags = cpu_ports.riscv_isa_flags(text)
    assert all(f == f.lower() for f in flags)
    cpu_ports.detect_port(cpu._kv_blocks(text))


@settings(max_examples=examples(200), deadline=None)
@given(st.one_of(st.none(), st.text(max_size=20)), st.sampled_from(["torch", "tensorflow", "keras"]))
def test_arch_has_build_never_crashes(arch: Any, framework: str) -> None:
    out = evaluate(Row({"test": "arch_has_build", "framework": framework}), _ctx(arch), knowledge())
    assert out.value in (True, False, None)
    if out.value is False:
        assert out.reasons and all(r.strip() for r in out.reasons)
