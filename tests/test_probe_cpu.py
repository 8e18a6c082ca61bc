from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from mlprobe.scan.capture import decode
from mlprobe.errors import ParseError
from mlprobe.probes import cpu

from .conftest import FIXTURES
from .fuzz import examples, mutated


def test_x86_levels_follow_the_psabi() -> None:
    v1 = ["cmov", "cx8", "fpu", "fxsr", "mmx", "sse", "sse2", "lm"]
    v2 = v1 + ["cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"]
    v3 = v2 + ["avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"]
    v4 = v3 + ["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"]
    assert [cpu.x86_64_level(x) for x in (v1, v2, v3, v4)] == [1, 2, 3, 4]
    # Sandy Bridge: AVX but no AVX2 -> still v2 (TensorFlow runs; the level alone can't tell)
    assert cpu.x86_64_level(v2 + ["avx"]) == 2
    # AVX-512 without v3 does not make v4
    assert cpu.x86_64_level(v2 + ["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"]) == 2


def test_mac_intel_features_map_to_linux_names() -> None:
    text = (
        "machdep.cpu.vendor: GenuineIntel\n"
        "machdep.cpu.brand_string: Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz\n"
        "machdep.cpu.features: FPU VME SSE SSE2 SSE3 SSSE3 FMA CX16 SSE4.1 SSE4.2 MOVBE POPCNT XSAVE AVX1.0 F16C CMOV CX8 FXSR MMX\n"
        "machdep.cpu.leaf7_features: BMI1 AVX2 BMI2\n"
        "machdep.cpu.extfeatures: SYSCALL XD EM64T LAHF LZCNT\n"
        "hw.physicalcpu: 8\nhw.logicalcpu: 16\n"
    )
    facts = cpu.cpu_from_sysctl(cpu.parse_sysctl(text))
    assert {"avx", "avx2", "fma", "pni", "sse4_2", "abm", "lahf_lm", "lm"} <= set(facts.flags)
    assert facts.x86_64_level == 3 and facts.arch == "x86_64" and facts.vendor == "intel"
    assert (facts.cores, facts.threads) == (8, 16)


def test_apple_silicon_feat_names_map_to_arm_hwcaps() -> None:
    text = ("machdep.cpu.brand_string: Apple M2\nhw.optional.arm.FEAT_BF16: 1\nhw.optional.arm.FEAT_I8MM: 1\n"
            "hw.optional.AdvSIMD: 1\nhw.optional.arm.FEAT_SME: 0\nhw.optional.arm.FEAT_DotProd: 1\n"
            "hw.physicalcpu: 8\nhw.logicalcpu: 8\nhw.optional.arm64: 1\n")
    facts = cpu.cpu_from_sysctl(cpu.parse_sysctl(text))
    assert {"bf16", "i8mm", "asimd", "asimddp"} <= set(facts.flags)
    assert "sme" not in facts.flags
    assert facts.arch == "arm64" and facts.vendor == "apple" and facts.x86_64_level is None


def test_garbage_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        cpu.parse_proc_cpuinfo("\x00\x01 not a cpuinfo")
    with pytest.raises(ParseError):
        cpu.parse_sysctl("kern.hostname: x\n")
    with pytest.raises(ParseError):
        cpu.parse_lscpu("garbage")


CPUINFO = sorted(FIXTURES.glob("*/proc-cpuinfo.txt"))
SYSCTL = sorted(FIXTURES.glob("*/sysctl.txt"))
LSCPU = sorted(FIXTURES.glob("*/lscpu.txt"))


def _fuzz(path: Path, parse) -> None:  # type: ignore[no-untyped-def]
    original = decode(path.read_bytes())
    base = parse(original)

    @settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutated(original))
    def check(text: str) -> None:
        try:
            got = parse(text)
        except ParseError:
            return
        # never more processors than the original had (doubled lines may repeat one block)
        if base.threads is not None and got.threads is not None:
            assert got.threads <= base.threads + 1

    check()


@pytest.mark.parametrize("path", CPUINFO, ids=[p.parent.name for p in CPUINFO])
def test_proc_cpuinfo_survives_mutations(path: Path) -> None:
    _fuzz(path, cpu.parse_proc_cpuinfo)


@pytest.mark.parametrize("path", SYSCTL, ids=[p.parent.name for p in SYSCTL])
def test_sysctl_survives_mutations(path: Path) -> None:
    _fuzz(path, lambda t: cpu.cpu_from_sysctl(cpu.parse_sysctl(t)))


@pytest.mark.parametrize("path", LSCPU, ids=[p.parent.name for p in LSCPU])
def test_lscpu_survives_mutations(path: Path) -> None:
    _fuzz(path, lambda t: cpu.cpu_from_lscpu(cpu.parse_lscpu(t)))


def test_a_processor_number_repeated_by_a_paste_is_one_thread() -> None:
    # Found by the mutation fuzz on the SG2042 capture: `processor : 0` pasted three times was counted
    # as three threads (66 of 64).
    text = (FIXTURES / "linux-nogpu-riscv64-sophgo-sg2042-milkv-pioneer-cpuinfo" / "proc-cpuinfo.txt").read_text()
    base = cpu.parse_proc_cpuinfo(text)
    first, rest = text.split("\n", 1)
    assert first.startswith("processor")
    pasted = cpu.parse_proc_cpuinfo("\n".join([first, first, first, rest]))
    assert pasted.threads == base.threads == 64
    x86 = "processor\t: 0\nprocessor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse2\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse2\n"
    got = cpu.parse_proc_cpuinfo(x86)
    assert got.threads == 2 and "sse2" in got.flags


def test_py_cpuinfo_is_a_capture_so_a_replay_gives_what_the_live_call_found(tmp_path: Path) -> None:
    """Where no /proc/cpuinfo, lscpu or sysctl exists (Windows), the CPU comes from py-cpuinfo's
    answer, taken live as the py-cpuinfo.json capture and parsed the same way in a replay."""
    import importlib.util
    import json as _json

    from mlprobe.probes.cpu import parse_py_cpuinfo
    from mlprobe.scan.capture import spec
    from mlprobe.scan.host import ReplayHost
    from mlprobe.scan.live.cpuinfo import live_cpuinfo
    from mlprobe.scan.run import scan

    if importlib.util.find_spec("cpuinfo") is None:
        pytest.skip("py-cpuinfo is not installed")
    cap = live_cpuinfo(spec("py-cpuinfo.json"))
    assert cap.ok
    live = parse_py_cpuinfo(cap.text())
    assert live.threads and live.source == "py-cpuinfo"
    (tmp_path / "host.json").write_text(_json.dumps({"system": "Windows", "python_version": "3.12.1"}))
    (tmp_path / "py-cpuinfo.json").write_bytes(cap.data or b"")
    facts = scan(ReplayHost(tmp_path), only=["cpu"])
    assert facts.cpu == live
    with pytest.raises(ParseError):
        parse_py_cpuinfo("not json")


# -- lscpu on Arm servers: util-linux's names and numbers mapped back to the MIDR tables --------------

GRACE_LSCPU = FIXTURES / "linux-arm64-nvidia-grace-neoverse-v2-lscpu-archspec-159" / "lscpu.txt"


def test_lscpu_names_the_core_kind_with_its_midr_ids() -> None:
    got = cpu.cpu_from_lscpu(cpu.parse_lscpu(GRACE_LSCPU.read_text()))
    assert (got.vendor, got.model) == ("arm", "Neoverse-V2")
    assert [(k.name, k.count, k.implementer, k.part) for k in got.core_types] == [("Neoverse-V2", 72, "0x41", "0xd4f")]
    assert got.isa_summary and "SVE2" in got.isa_summary
    # `Architecture:` lost in the paste; the 64-bit op-mode of an Arm implementer's cores says aarch64
    assert got.arch == "aarch64" and got.arch_evidence and "op-mode" in got.arch_evidence


def _lscpu(vendor: str, model: str, mode: str = "32-bit, 64-bit", arch: str = "aarch64\n") -> str:
    head = f"Architecture:        {arch}" if arch else ""
    return (head + f"CPU op-mode(s):      {mode}\nCPU(s):              96\nVendor ID:           {vendor}\n"
            f"Model name:          {model}\nThread(s) per core:  1\nCore(s) per socket:  48\nSocket(s):           2\n")


@pytest.mark.parametrize("spelling", ["tsv110", "Kunpeng-920", "TaiShan-v110"])
def test_every_util_linux_spelling_of_kunpeng_920_is_one_part(spelling: str) -> None:
    # util-linux issue #969: 0xd01 was `tsv110`, then `Kunpeng-920`; later tables say `TaiShan-v110`
    got = cpu.cpu_from_lscpu(cpu.parse_lscpu(_lscpu("HiSilicon", spelling)))
    assert (got.vendor, got.model, got.cores) == ("hisilicon", "Kunpeng-920", 96)
    assert [(k.implementer, k.part) for k in got.core_types] == [("0x48", "0xd01")]


def test_an_lscpu_older_than_its_implementer_table_prints_the_number() -> None:
    got = cpu.cpu_from_lscpu(cpu.parse_lscpu(_lscpu("0xc0", "-")))
    assert (got.vendor, got.model) == ("ampere", None)  # `-`: lscpu had no name for the part
    assert [(k.name, k.implementer, k.part) for k in got.core_types] == []


def test_x86_lscpu_is_not_read_as_arm() -> None:
    got = cpu.cpu_from_lscpu(cpu.parse_lscpu(_lscpu("GenuineIntel", "Intel(R) Xeon(R) Gold 6230", arch="x86_64\n")))
    assert (got.vendor, got.core_types, got.isa_summary) == ("intel", (), None)
    # without `Architecture:` an x86 CPU's op-modes say nothing mlprobe claims
    assert cpu.cpu_from_lscpu(cpu.parse_lscpu(_lscpu("GenuineIntel", "Xeon", arch=""))).arch is None


def test_wrapped_flags_are_one_list() -> None:
    text = (FIXTURES / "linux-arm64-ampere-altra-mt-jade-lscpu-elided-llvm-zorg-354" / "lscpu.txt").read_text()
    got = cpu.cpu_from_lscpu(cpu.parse_lscpu(text))
    assert {"cpuid", "asimdrdm", "asimddp"} <= set(got.flags) and "<...>" not in got.flags
