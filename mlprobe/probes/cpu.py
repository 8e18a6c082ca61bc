"""CPU: /proc/cpuinfo, lscpu, macOS sysctl. Flags use Linux /proc/cpuinfo spellings.

x86-64 levels follow the psABI (Table 3.1), written in kernel flag names:
source: gitlab.com/x86-psABIs/x86-64-ABI Table 3.1; glibc commit b80f16ad (BMI1/BMI2 in v3);
kernel spellings: pni = SSE3, abm = LZCNT, lahf_lm = LAHF-SAHF; the kernel prints `xsave` for
OSXSAVE-capable CPUs (it hides xsave when the OS has not enabled it).
"""

from __future__ import annotations

import re
from typing import Callable, Dict, List, Optional, Set, Tuple

from ..errors import ParseError
from ..model.facts import Contribution, CpuFacts
from ..scan.capture import Host
from ._util import nothing_read, parse_capture
from ..model.hw.cpu import (ML_FLAGS as ML_FLAGS, X86_LEVELS as X86_LEVELS, X86_VENDORS as X86_VENDORS,
                            x86_64_level as x86_64_level)
from .cpu_lscpu import _int, cpu_from_lscpu as cpu_from_lscpu, parse_lscpu as parse_lscpu

# ARM "CPU implementer" codes. source: Linux arch/arm64/include/asm/cputype.h (ARM_CPU_IMP_*),
# and util-linux sys-utils/lscpu-arm.c (implementer table).
ARM_IMPLEMENTERS: Dict[int, str] = {
    0x41: "arm", 0x42: "broadcom", 0x43: "cavium", 0x46: "fujitsu", 0x48: "hisilicon",
    0x4E: "nvidia", 0x50: "apm", 0x51: "qualcomm", 0x53: "samsung", 0x56: "marvell",
    0x61: "apple", 0x66: "faraday", 0x69: "intel", 0x6D: "microsoft", 0x70: "phytium",
    0xC0: "ampere",
}

# macOS machdep.cpu.features / leaf7_features / extfeatures -> Linux names.
# source: xnu osfmk/i386/cpuid.c (feature_map / leaf7_feature_map / extfeature_map strings) and
# Linux arch/x86/include/asm/cpufeatures.h (the names /proc/cpuinfo prints).
MAC_X86_FEATURES: Dict[str, str] = {
    "FPU": "fpu", "VME": "vme", "DE": "de", "PSE": "pse", "TSC": "tsc", "MSR": "msr", "PAE": "pae",
    "MCE": "mce", "CX8": "cx8", "APIC": "apic", "SEP": "sep", "MTRR": "mtrr", "PGE": "pge",
    "MCA": "mca", "CMOV": "cmov", "PAT": "pat", "PSE36": "pse36", "PSN": "pn", "CLFSH": "clflush",
    "DS": "dts", "ACPI": "acpi", "MMX": "mmx", "FXSR": "fxsr", "SSE": "sse", "SSE2": "sse2",
    "SS": "ss", "HTT": "ht", "TM": "tm", "PBE": "pbe", "SSE3": "pni", "PCLMULQDQ": "pclmulqdq",
    "DTES64": "dtes64", "MON": "monitor", "DSCPL": "ds_cpl", "VMX": "vmx", "SMX": "smx",
    "EST": "est", "TM2": "tm2", "SSSE3": "ssse3", "CID": "cid", "FMA": "fma", "CX16": "cx16",
    "TPR": "xtpr", "PDCM": "pdcm", "SSE4.1": "sse4_1", "SSE4.2": "sse4_2", "X2APIC": "x2apic",
    "x2APIC": "x2apic", "MOVBE": "movbe", "POPCNT": "popcnt", "AES": "aes", "PCID": "pcid",
    "XSAVE": "xsave", "TSCTMR": "tsc_deadline_timer", "AVX1.0": "avx", "RDRAND": "rdrand",
    "F16C": "f16c", "VMM": "hypervisor",
    # leaf7
    "RDWRFSGS": "fsgsbase", "TSC_THREAD_OFFSET": "tsc_adjust", "SGX": "sgx", "BMI1": "bmi1",
    "HLE": "hle", "AVX2": "avx2", "FDPEO": "fdp_excptn_only", "SMEP": "smep", "BMI2": "bmi2",
    "ERMS": "erms", "INVPCID": "invpcid", "RTM": "rtm", "PQM": "cqm", "FPU_CSDS": "zero_fcs_fds",
    "MPX": "mpx", "PQE": "rdt_a", "AVX512F": "avx512f", "AVX512DQ": "avx512dq", "RDSEED": "rdseed",
    "ADX": "adx", "SMAP": "smap", "AVX512IFMA": "avx512ifma", "CLFSOPT": "clflushopt",
    "CLWB": "clwb", "IPT": "intel_pt", "AVX512CD": "avx512cd", "SHA": "sha_ni",
    "AVX512BW": "avx512bw", "AVX512VL": "avx512vl", "PREFETCHWT1": "prefetchwt1",
    "AVX512VBMI": "avx512vbmi", "UMIP": "umip", "PKU": "pku", "OSPKE": "ospke", "WAITPKG": "waitpkg",
    "GFNI": "gfni", "VAES": "vaes", "VPCLMULQDQ": "vpclmulqdq", "AVX512VNNI": "avx512_vnni",
    "AVX512BITALG": "avx512_bitalg", "AVX512VPCNTDQ": "avx512_vpopcntdq",
    "AVX512VPOPCNTDQ": "avx512_vpopcntdq", "AVX512VBMI2": "avx512_vbmi2", "RDPID": "rdpid",
    "CLDEMOTE": "cldemote", "MOVDIRI": "movdiri", "MOVDIRI64B": "movdir64b", "MOVDIR64B": "movdir64b",
    "SGXLC": "sgx_lc", "AVX5124VNNIW": "avx512_4vnniw", "AVX5124FMAPS": "avx512_4fmaps",
    "FSREPMOV": "fsrm", "MDCLEAR": "md_clear", "TSXFA": "tsx_force_abort", "IBRS": "ibrs",
    "STIBP": "stibp", "L1DF": "flush_l1d", "ACAPMSR": "arch_capabilities", "SSBD": "ssbd",
    "SERIALIZE": "serialize", "AVX512BF16": "avx512_bf16", "AVX512FP16": "avx512_fp16",
    "AVXVNNI": "avx_vnni", "AMXBF16": "amx_bf16", "AMXTILE": "amx_tile", "AMXINT8": "amx_int8",
    # extfeatures
    "SYSCALL": "syscall", "XD": "nx", "1GBPAGE": "pdpe1gb", "EM64T": "lm", "LAHF": "lahf_lm",
    "LZCNT": "abm", "PREFETCHW": "3dnowprefetch", "RDTSCP": "rdtscp", "TSCI": "constant_tsc",
}

# macOS hw.optional.* (Intel) -> Linux names. source: xnu bsd/kern/kern_mib.c (hw.optional.*).
MAC_HW_OPTIONAL_X86: Dict[str, str] = {
    "mmx": "mmx", "sse": "sse", "sse2": "sse2", "sse3": "pni", "supplementalsse3": "ssse3",
    "sse4_1": "sse4_1", "sse4_2": "sse4_2", "aes": "aes", "avx1_0": "avx", "rdrand": "rdrand",
    "f16c": "f16c", "enfstrg": "erms", "fma": "fma", "avx2_0": "avx2", "bmi1": "bmi1",
    "bmi2": "bmi2", "rtm": "rtm", "hle": "hle", "adx": "adx", "mpx": "mpx", "sgx": "sgx",
    "avx512f": "avx512f", "avx512cd": "avx512cd", "avx512dq": "avx512dq", "avx512bw": "avx512bw",
    "avx512vl": "avx512vl", "avx512ifma": "avx512ifma", "avx512vbmi": "avx512vbmi",
    "x86_64": "lm",
}

# macOS hw.optional.arm.FEAT_* and older hw.optional.* (Apple silicon) -> Linux arm64 hwcap names.
# source: Apple "Determining instruction set characteristics" (developer.apple.com/documentation/
# kernel/1387446-sysctlbyname) and Linux Documentation/arch/arm64/elf_hwcaps.rst.
MAC_ARM_FEATURES: Dict[str, Tuple[str, ...]] = {
    "FEAT_AdvSIMD": ("asimd",), "AdvSIMD": ("asimd",), "neon": ("asimd",),
    "FEAT_FP": ("fp",), "floatingpoint": ("fp",),
    "FEAT_FP16": ("fphp", "asimdhp"), "neon_fp16": ("asimdhp",), "neon_hpfp": ("fphp",),
    "FEAT_DotProd": ("asimddp",), "FEAT_BF16": ("bf16",), "FEAT_I8MM": ("i8mm",),
    "FEAT_SME": ("sme",), "FEAT_SME2": ("sme2",), "FEAT_SVE": ("sve",), "FEAT_SVE2": ("sve2",),
    "FEAT_LSE": ("atomics",), "armv8_1_atomics": ("atomics",), "FEAT_CRC32": ("crc32",),
    "armv8_crc32": ("crc32",), "FEAT_SHA1": ("sha1",), "FEAT_SHA256": ("sha2",),
    "FEAT_SHA512": ("sha512",), "armv8_2_sha512": ("sha512",), "FEAT_SHA3": ("sha3",),
    "armv8_2_sha3": ("sha3",), "FEAT_AES": ("aes",), "FEAT_PMULL": ("pmull",),
    "FEAT_FHM": ("asimdfhm",), "armv8_2_fhm": ("asimdfhm",), "FEAT_FCMA": ("fcma",),
    "armv8_3_compnum": ("fcma",), "FEAT_JSCVT": ("jscvt",), "FEAT_LRCPC": ("lrcpc",),
    "FEAT_LRCPC2": ("ilrcpc",), "FEAT_DPB": ("dcpop",), "FEAT_DPB2": ("dcpodp",),
    "FEAT_FlagM": ("flagm",), "FEAT_FlagM2": ("flagm2",), "FEAT_FRINTTS": ("frint",),
    "FEAT_SB": ("sb",), "FEAT_SSBS": ("ssbs",), "FEAT_BTI": ("bti",), "FEAT_PAuth": ("paca", "pacg"),
    "FEAT_RDM": ("asimdrdm",), "FEAT_DIT": ("dit",), "FEAT_ECV": ("ecv",), "FEAT_AFP": ("afp",),
    "FEAT_WFxT": ("wfxt",), "FEAT_EBF16": ("ebf16",), "FEAT_RPRES": ("rpres",),
}


def _kv_blocks(text: str) -> List[Dict[str, str]]:
    """/proc/cpuinfo: blank-line separated blocks of `key<tabs>: value`."""
    blocks: List[Dict[str, str]] = []
    cur: Dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if cur:
                blocks.append(cur)
                cur = {}
            continue
        if ":" not in line:
            continue
        key, _, value = line.partition(":")
        cur[key.strip().lower()] = value.strip()
    if cur:
        blocks.append(cur)
    return blocks


def parse_proc_cpuinfo(text: str) -> CpuFacts:
    from .cpu_ports import _processors, detect_port, port_facts

    blocks = _kv_blocks(text)
    port = detect_port(blocks)
    if port not in (None, "x86"):
        # Each kernel port prints its own layout (mlprobe/probes/cpu_ports.py).
        got = port_facts(port, text, blocks)
        if got is not None and (got.threads or got.model or got.flags):
            return got
    procs = _processors(blocks)
    if not procs:
        raise ParseError("no `processor : N` entries in /proc/cpuinfo")
    first = procs[0]
    flags_line = first.get("flags") or first.get("features") or ""
    flags = tuple(sorted({f.lower() for f in flags_line.split() if re.fullmatch(r"[\w.]+", f)}))
    vendor_id = first.get("vendor_id")
    vendor = None
    model = first.get("model name")
    arch = None
    if vendor_id:
        vendor = X86_VENDORS.get(vendor_id, vendor_id.strip().lower() or None)
        arch = "x86_64" if "lm" in flags else "i686"
    elif "cpu implementer" in first:
        code = _int(first["cpu implementer"])
        vendor_id = first["cpu implementer"]
        vendor = ARM_IMPLEMENTERS.get(code, None) if code is not None else None
        arch = "aarch64" if ("asimd" in flags or "fp" in flags or "cpu architecture" in first
                             and first.get("cpu architecture") == "8") else None
    # Hardware / model lines on some ARM boards
    if model is None:
        for key in ("model name", "cpu model", "hardware", "model"):
            for blk in blocks:
                if key in blk and not blk[key].isdigit():
                    model = blk[key]
                    break
            if model:
                break
    cores = None
    pairs = {(b.get("physical id"), b.get("core id")) for b in procs if "core id" in b}
    if pairs:
        cores = len(pairs)
    elif "cpu cores" in first:
        per = _int(first.get("cpu cores"))
        sockets = len({b.get("physical id") for b in procs}) or 1
        cores = per * sockets if per else None
    threads = len(procs)
    if cores is None and arch == "aarch64":
        # arm64 kernels print no topology in /proc/cpuinfo; Arm cores have no SMT (Neoverse,
        # Cortex-A/X; source: Arm Neoverse/Cortex TRMs list one thread per core), so one
        # `processor` entry is one core.
        cores = threads
    return CpuFacts(
        vendor=vendor, vendor_id=vendor_id, model=model, arch=arch, cores=cores, threads=threads,
        flags=flags, x86_64_level=x86_64_level(flags) if arch == "x86_64" else None,
        source="proc-cpuinfo.txt", arch_evidence="proc-cpuinfo.txt" if arch else None,
    )


def parse_sysctl(text: str) -> Dict[str, str]:
    """`sysctl -a` lines: `name: value` (or `name = value` on older systems)."""
    out: Dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9_.]+)\s*[:=]\s?(.*)$", line.strip())
        if m and (m.group(1).startswith(("machdep.", "hw.", "kern.")) or m.group(1) == "sysctl"):
            out.setdefault(m.group(1), m.group(2).strip())
    if not any(k.startswith(("machdep.cpu", "hw.")) for k in out):
        raise ParseError("no machdep.cpu.* or hw.* lines in the sysctl output")
    return out


def cpu_from_sysctl(fields: Dict[str, str]) -> CpuFacts:
    brand = fields.get("machdep.cpu.brand_string")
    vendor_raw = fields.get("machdep.cpu.vendor")
    flags: Set[str] = set()
    is_arm = (
        fields.get("hw.optional.arm64") == "1"
        or any(k.startswith("hw.optional.arm.") for k in fields)
        or (brand or "").startswith("Apple")
        or fields.get("hw.cputype") == "16777228"
    )
    if is_arm:
        for key, value in fields.items():
            if not key.startswith("hw.optional.") or value.strip() != "1":
                continue
            short = key.split(".")[-1]
            flags.update(MAC_ARM_FEATURES.get(short, ()))
        arch = "arm64"
        vendor: Optional[str] = (
            "apple" if (brand or "").startswith("Apple") or vendor_raw is None else vendor_raw.lower())
    else:
        for key in ("machdep.cpu.features", "machdep.cpu.leaf7_features", "machdep.cpu.extfeatures"):
            for word in fields.get(key, "").split():
                name = MAC_X86_FEATURES.get(word) or MAC_X86_FEATURES.get(word.upper())
                if name:
                    flags.add(name)
        for key, value in fields.items():
            if key.startswith("hw.optional.") and value.strip() == "1":
                name = MAC_HW_OPTIONAL_X86.get(key.split(".", 2)[2])
                if name:
                    flags.add(name)
        arch = "x86_64"
        vendor = X86_VENDORS.get(vendor_raw or "") or ((vendor_raw or "").lower() or None)
        # Every x86 Mac is 64-bit; syscall/lm are implied even where extfeatures is missing.
        flags.add("lm")
    ordered = tuple(sorted(flags))
    return CpuFacts(
        vendor=vendor, vendor_id=vendor_raw, model=brand, arch=arch,
        cores=_int(fields.get("hw.physicalcpu")) or _int(fields.get("machdep.cpu.core_count")),
        threads=_int(fields.get("hw.logicalcpu")) or _int(fields.get("machdep.cpu.thread_count")),
        flags=ordered, x86_64_level=x86_64_level(ordered) if arch == "x86_64" else None,
        source="sysctl.txt", arch_evidence="sysctl.txt" if arch else None,
    )


def _merge(primary: CpuFacts, extra: CpuFacts) -> CpuFacts:
    """Fill primary's unknowns from extra (lscpu names ARM models /proc/cpuinfo lacks)."""
    from dataclasses import fields, replace

    changes = {}
    for f in fields(CpuFacts):
        if f.name in ("source",):
            continue
        if getattr(primary, f.name) in (None, ()) and getattr(extra, f.name) not in (None, ()):
            changes[f.name] = getattr(extra, f.name)
    if primary.model and extra.model and primary.vendor in (None, "arm") and not primary.model.strip():
        changes["model"] = extra.model
    return replace(primary, **changes)


def probe(host: Host) -> Contribution:
    out = Contribution()
    info = host.info()
    errors: List[str] = []
    cpu: Optional[CpuFacts] = None
    system = info.get("system")
    sources: Tuple[Tuple[str, Callable[[str], CpuFacts]], ...] = (
        ("proc-cpuinfo.txt", parse_proc_cpuinfo),
        ("lscpu.txt", lambda text: cpu_from_lscpu(parse_lscpu(text))),
        ("sysctl.txt", lambda text: cpu_from_sysctl(parse_sysctl(text))),
    )
    for name, parser in sources:
        if name == "sysctl.txt" and system not in (None, "Darwin"):
            continue
        if name != "sysctl.txt" and system not in (None, "Linux"):
            continue
        got = parse_capture(host, name, parser, errors)
        if got is None:
            continue
        cpu = got if cpu is None else _merge(cpu, got)
        if name == "proc-cpuinfo.txt" and cpu.model and cpu.arch:
            # lscpu only adds the ARM model name; skip its subprocess when /proc/cpuinfo said it.
            if cpu.vendor_id and not str(cpu.vendor_id).startswith("0x"):
                break
            # ARM: the MIDR table named every core kind, which is what lscpu would add.
            if cpu.core_types and all(k.name for k in cpu.core_types):
                break
    if cpu is None:
        cpu = parse_capture(host, "py-cpuinfo.json", parse_py_cpuinfo, errors)
    if cpu is not None and cpu.arch is None and info.get("machine"):
        from dataclasses import replace

        machine = str(info["machine"]).lower()
        arch = {"amd64": "x86_64", "x64": "x86_64", "arm64": "arm64" if system == "Darwin" else "aarch64"}.get(
            machine, machine)
        cpu = replace(cpu, arch=arch, x86_64_level=x86_64_level(cpu.flags) if arch == "x86_64" and cpu.flags else None,
                      arch_evidence=f"host.json: Python's platform.machine() is {info['machine']}")
    if cpu is None:
        return nothing_read(out, errors, "no CPU source (/proc/cpuinfo, lscpu or sysctl) in this capture")
    out.cpu = cpu
    if errors:
        out.warnings.extend(errors)
    return out


def parse_py_cpuinfo(text: str) -> CpuFacts:
    """py-cpuinfo's get_cpu_info() as JSON (the py-cpuinfo.json capture: Windows, or anything
    without cheaper sources)."""
    import json

    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"py-cpuinfo.json is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ParseError("py-cpuinfo.json is not an object")
    flags = tuple(sorted(str(f).lower() for f in data.get("flags") or [] if isinstance(f, str)))
    raw_arch = data.get("arch")
    arch = {"X86_64": "x86_64", "ARM_8": "aarch64"}.get(str(raw_arch), str(raw_arch).lower()) if raw_arch else None
    vendor_id = data.get("vendor_id_raw") if isinstance(data.get("vendor_id_raw"), str) else None
    count = data.get("count")
    return CpuFacts(
        vendor=X86_VENDORS.get(vendor_id or "", (vendor_id or "").lower() or None),
        vendor_id=vendor_id, model=data.get("brand_raw") if isinstance(data.get("brand_raw"), str) else None,
        arch=arch, cores=None, threads=count if isinstance(count, int) and not isinstance(count, bool) else None,
        flags=flags, x86_64_level=x86_64_level(flags) if arch == "x86_64" else None, source="py-cpuinfo",
        arch_evidence="py-cpuinfo" if arch else None,
    )
