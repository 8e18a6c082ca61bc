"""/proc/cpuinfo of the kernel ports other than x86: which port printed it, and what each port's layout
says about the CPU (architecture, vendor, the CPU line, threads, ISA features). Pure: text in, facts out.

Each port prints its own keys (Linux arch/<port>/kernel/*: show_cpuinfo):
- arm64/arm: `CPU implementer` / `CPU part` / `Features` (arm64 hwcaps `fp asimd`, arm32 `half thumb vfp`);
- powerpc: `cpu : POWER9 (raw), altivec supported`, `revision : ... (pvr 004e 1202)`, `timebase`;
- s390: `vendor_id : IBM/S390`, `# processors : N`, `processor N: version = .., machine = 8561`;
- riscv: `isa : rv64imafdc...`, `hart`, `uarch : sifive,u74-mc`, `mvendorid`;
- mips: `system type`, `cpu model : ...`, `isa : mips1 ... mips64r2`;
- loongarch: `CPU Family : Loongson-64bit`, `Model Name`, `ISA : loongarch32 loongarch64`;
- sparc: `cpu : ...`, `type : sun4u|sun4v`, `ncpus active : N`, `cpucaps : ...`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

from ..model import knowledge as kb
from ..model.facts import CoreType, CpuFacts


def detect_port(blocks: List[Dict[str, str]]) -> Optional[str]:
    """Which kernel port printed this /proc/cpuinfo (keys are lower-cased)."""
    keys = {k for b in blocks for k in b}

    def first(key: str) -> str:
        return next((b[key] for b in blocks if key in b), "")

    if (
        first("vendor_id").startswith("IBM/S390")
        or "# processors" in keys
        or any(re.fullmatch(r"processor \d+", k) for k in keys)
    ):
        return "s390"
    if "cpu implementer" in keys or "cpu part" in keys:
        return "arm"
    if "vendor_id" in keys and ("flags" in keys or "model name" in keys or "cpu family" in keys):
        return "x86"
    isa = first("isa").lower()
    if "cpu family" in keys and "loongson" in first("cpu family").lower() or "loongarch" in isa:
        return "loongarch"
    if re.match(r"rv(32|64)", isa) or "hart" in keys:
        return "riscv"
    if "cpu model" in keys or re.search(r"\bmips", isa):
        return "mips"
    if "cpucaps" in keys or "ncpus active" in keys or re.match(r"sun4", first("type").lower()):
        return "sparc"
    if (
        "timebase" in keys
        or "pvr" in first("revision")
        or re.match(r"(power|ppc|e\d{3,4}|74\d\d|7[45]0|cell|g[345]\b|pa6t)", first("cpu").lower())
    ):
        return "powerpc"
    if "processor" in keys and ("features" in keys or "cpu architecture" in keys):
        return "arm"
    return None


def _table(key: str) -> List[Dict[str, Any]]:
    return kb.rows("cpu_archs", key)


def _processors(blocks: List[Dict[str, str]]) -> List[Dict[str, str]]:
    """One block per processor number: a number seen again (a paste that repeats lines) is the same
    processor, its fields merged into the first block, not another thread."""
    by_number: Dict[str, Dict[str, str]] = {}
    for b in blocks:
        number = b.get("processor", "").strip()
        if not re.fullmatch(r"\d+", number):
            continue
        key = str(int(number))
        if key in by_number:
            for k, v in b.items():
                by_number[key].setdefault(k, v)
        else:
            by_number[key] = dict(b)
    return list(by_number.values())


def _first(blocks: List[Dict[str, str]], key: str) -> Optional[str]:
    for b in blocks:
        v = b.get(key)
        if v is not None and v.strip():
            return v.strip()
    return None


def _int(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    m = re.match(r"\s*(\d+)", value)
    return int(m.group(1)) if m else None


def _flag_list(words: str, sep: str = r"[\s,]+") -> Tuple[str, ...]:
    return tuple(sorted({w.lower() for w in re.split(sep, words) if re.fullmatch(r"[A-Za-z0-9_.]+", w)}))


def _vendor_by_pattern(text: Optional[str]) -> Optional[str]:
    if not text:
        return None
    for row in _table("vendor_patterns"):
        if re.search(str(row.get("pattern")), text, re.I):
            return str(row["vendor"])
    return None


# --------------------------------------------------------------------------- ARM

ARM_ML_FEATURES = (
    ("asimd", "NEON"),
    ("neon", "NEON"),
    ("asimddp", "dot product"),
    ("asimdfhm", "FP16 FMLAL"),
    ("bf16", "BF16"),
    ("i8mm", "Int8 matrix multiply"),
    ("sve", "SVE"),
    ("sve2", "SVE2"),
    ("sme", "SME"),
    ("sme2", "SME2"),
)


def arm_isa_summary(flags: Tuple[str, ...]) -> str:
    """The ARM features that decide ML kernels' speed, in words (the analogue of x86's psABI level):
    which of NEON, dot product, BF16, I8MM, SVE/SVE2 and SME the CPU has, and which it lacks.
    source: Linux Documentation/arch/arm64/elf_hwcaps.rst (the hwcap names)."""
    have = [words for flag, words in ARM_ML_FEATURES if flag in flags]
    missing = [
        words
        for flag, words in ARM_ML_FEATURES
        if flag not in flags and flag in ("asimddp", "bf16", "i8mm", "sve", "sme")
    ]
    text = ", ".join(have) if have else "no NEON/SIMD features listed"
    if missing:
        text += "; no " + ", ".join(missing)
    return text


def arm_core_types(procs: List[Dict[str, str]]) -> Tuple[CoreType, ...]:
    """Each core kind with its count, named from the MIDR tables (knowledge/arm_cores.json)."""
    counts: Counter[Tuple[str, str]] = Counter()
    order: List[Tuple[str, str]] = []
    for b in procs:
        impl, part = b.get("cpu implementer"), b.get("cpu part")
        key = (_hex(impl, 2), _hex(part, 3))
        if key[0] is None or key[1] is None:
            continue
        k = (key[0], key[1])
        if k not in counts:
            order.append(k)
        counts[k] += 1
    return tuple(
        CoreType(name=arm_part_name(i, p), count=counts[(i, p)], implementer=i, part=p) for i, p in order
    )


def _hex(value: Optional[str], width: int) -> Optional[str]:
    if not value:
        return None
    try:
        n = int(value.strip(), 0)
    except ValueError:
        return None
    return f"0x{n:0{width}x}"


def arm_part_name(implementer: str, part: str) -> Optional[str]:
    for row in kb.rows("arm_cores", "parts"):
        if row.get("implementer") == implementer and row.get("part") == part:
            return str(row["name"])
    return None


def arm_vendor(implementer: Optional[str]) -> Optional[str]:
    code = _hex(implementer, 2)
    for row in kb.rows("arm_cores", "implementers"):
        if row.get("implementer") == code:
            return str(row["vendor"])
    return None


def arm_facts(text: str, blocks: List[Dict[str, str]], procs: List[Dict[str, str]]) -> CpuFacts:
    flags_line = _first(procs, "features") or _first(blocks, "features") or ""
    flags = _flag_list(flags_line, r"\s+")
    impl = _first(procs, "cpu implementer") or _first(blocks, "cpu implementer")
    arch_num = _int(_first(blocks, "cpu architecture"))
    # The CPU line: `model name` (arm32 since 3.8), `Processor` (older arm32, capital P). Never
    # `Hardware` (the board) nor a device-tree model.
    m = re.search(r"^(?:model name|Processor)[ \t]*:[ \t]*(\S.*)$", text, re.M)
    printed = m.group(1).strip() if m and not m.group(1).strip().isdigit() else None
    arm32 = any(f in flags for f in ("half", "thumb", "swp", "vfp", "vfpv3", "vfpv4", "edsp"))
    if arm32 or (arch_num is not None and arch_num < 8 and "asimd" not in flags):
        m = re.search(r"\((v\d+\w*)\)", printed or "")
        arch: Optional[str] = f"arm{m.group(1)}" if m else (f"armv{arch_num}l" if arch_num else "arm")
    elif "asimd" in flags or "fp" in flags or (arch_num or 0) >= 8:
        arch = "aarch64"
    else:
        arch = None
    # Kernels before 3.8 (arm32) print the MIDR lines once, in a block after the processors.
    kinds = arm_core_types(procs)
    if not kinds:
        kinds = arm_core_types(blocks)
        if len(kinds) == 1 and procs:
            kinds = (replace(kinds[0], count=len(procs)),)
    named = [k.name for k in kinds if k.name]
    model = " + ".join(dict.fromkeys(named)) if named else printed
    threads = len(procs) or None
    return CpuFacts(
        vendor=arm_vendor(impl),
        vendor_id=impl,
        model=model,
        arch=arch,
        # Arm cores run one thread each (the Neoverse/Cortex TRMs list no SMT; the few SMT parts,
        # e.g. Cortex-A65AE/Neoverse-E1, also print one `processor` entry per thread).
        cores=threads,
        threads=threads,
        flags=flags,
        core_types=kinds,
        isa_summary=arm_isa_summary(flags)
        if arch == "aarch64" or "asimd" in flags or "neon" in flags
        else None,
        source="proc-cpuinfo.txt",
    )


# --------------------------------------------------------------------------- other ports


def powerpc_facts(blocks: List[Dict[str, str]], procs: List[Dict[str, str]]) -> CpuFacts:
    cpu_line = _first(procs, "cpu") or _first(blocks, "cpu")
    model = cpu_line.split(",")[0].strip() if cpu_line else None
    arch = "ppc"
    for row in _table("powerpc_models"):
        if model and re.search(str(row["pattern"]), model, re.I):
            arch = str(row["arch"])
            break
    flags: Tuple[str, ...] = ("altivec",) if cpu_line and "altivec supported" in cpu_line else ()
    if model and re.match(r"power(\d+)", model, re.I):
        gen = int(re.match(r"power(\d+)", model, re.I).group(1))  # type: ignore[union-attr]
        flags = tuple(
            sorted(set(flags) | ({"vsx"} if gen >= 7 else set()) | ({"mma"} if gen >= 10 else set()))
        )
    return CpuFacts(
        vendor=_vendor_by_pattern(model),
        vendor_id=None,
        model=model,
        arch=arch,
        cores=None,
        threads=len(procs) or None,
        flags=flags,
        isa_summary=_ppc_summary(flags) if flags else None,
        source="proc-cpuinfo.txt",
    )


def _ppc_summary(flags: Tuple[str, ...]) -> str:
    have = [
        w
        for f, w in (("altivec", "AltiVec/VMX"), ("vsx", "VSX"), ("mma", "MMA (POWER10 matrix)"))
        if f in flags
    ]
    return ", ".join(have)


def s390_facts(text: str, blocks: List[Dict[str, str]]) -> CpuFacts:
    threads = _int(_first(blocks, "# processors"))
    machines = re.findall(r"^processor\s+\d+:.*?machine\s*=\s*([0-9A-Fa-f]{4})", text, re.M)
    if threads is None:
        threads = len(set(re.findall(r"^processor\s+(\d+):", text, re.M))) or None
    features = _first(blocks, "features") or ""
    flags = _flag_list(features, r"\s+")
    machine = machines[0] if machines else None
    model = None
    if machine:
        row = next((r for r in _table("s390_machine_types") if r.get("machine") == machine), None)
        model = f"{row['name']} ({machine})" if row else f"IBM machine type {machine}"
    have = [
        w
        for f, w in (
            ("vx", "vector facility"),
            ("vxe", "vector enhancements 1"),
            ("vxe2", "vector enhancements 2"),
            ("nnpa", "NNPA AI accelerator"),
        )
        if f in flags
    ]
    return CpuFacts(
        vendor="ibm",
        vendor_id=_first(blocks, "vendor_id"),
        model=model,
        arch="s390x" if "zarch" in flags else ("s390" if flags else "s390x"),
        cores=None,
        threads=threads,
        flags=flags,
        isa_summary=", ".join(have) if have else "no vector facility listed",
        source="proc-cpuinfo.txt",
    )


def riscv_isa_flags(isa: str) -> Tuple[str, ...]:
    """`rv64imafdcv_zicsr_zba` -> ("a", "c", "d", "f", "i", "m", "v", "zba", "zicsr"); `g` = imafd."""
    isa = isa.strip().lower()
    m = re.match(r"rv(?:32|64|128)([a-z]*)(.*)$", isa)
    if not m:
        return ()
    singles = set(m.group(1).replace("g", "imafd"))
    multi = {w for w in re.split(r"[_\s]+", m.group(2)) if re.fullmatch(r"[a-z][a-z0-9]+", w)}
    # Multi-letter extensions start after the first `s`, `x` or `z` of the single-letter run.
    cut = re.search(r"[sxz]", m.group(1))
    if cut:
        singles = set(m.group(1)[: cut.start()].replace("g", "imafd"))
        multi.add(m.group(1)[cut.start() :])
    return tuple(sorted(singles | multi))


def riscv_facts(blocks: List[Dict[str, str]], procs: List[Dict[str, str]]) -> CpuFacts:
    isa = _first(procs, "isa") or _first(blocks, "isa") or ""
    width = re.match(r"rv(32|64|128)", isa.lower())
    flags = riscv_isa_flags(isa)
    uarch = _first(procs, "uarch")
    mvendor = _first(procs, "mvendorid")
    vendor = None
    if mvendor:
        code = _hex(mvendor, 3)
        vendor = next(
            (str(r["vendor"]) for r in _table("riscv_vendor_ids") if r.get("mvendorid") == code), None
        )
    if vendor is None and uarch and "," in uarch:
        vendor = uarch.split(",")[0].strip().lower() or None
    have = [
        w
        for f, w in (
            ("v", "vector (RVV 1.0)"),
            ("zvfh", "vector FP16"),
            ("xtheadvector", "T-Head vector 0.7"),
        )
        if f in flags
    ]
    return CpuFacts(
        vendor=vendor,
        vendor_id=mvendor,
        model=_first(procs, "model name") or uarch,
        arch=f"riscv{width.group(1)}" if width else "riscv64",
        cores=len(procs) or None,
        threads=len(procs) or None,
        flags=flags,
        isa_summary=", ".join(have) if have else "no vector extension listed",
        source="proc-cpuinfo.txt",
    )


def mips_facts(blocks: List[Dict[str, str]], procs: List[Dict[str, str]]) -> CpuFacts:
    model = _first(procs, "cpu model") or _first(blocks, "cpu model")
    isa = (_first(procs, "isa") or "").lower()
    arch = "mips64" if "mips64" in isa else "mips"
    ases = _first(procs, "ases implemented") or ""
    flags = _flag_list(ases, r"\s+")
    return CpuFacts(
        vendor=_vendor_by_pattern(model),
        vendor_id=None,
        model=model,
        arch=arch,
        cores=None,
        threads=len(procs) or None,
        flags=flags,
        isa_summary=("MSA vector" if "msa" in flags else "no MSA vector listed") if ases else None,
        source="proc-cpuinfo.txt",
    )


def loongarch_facts(blocks: List[Dict[str, str]], procs: List[Dict[str, str]]) -> CpuFacts:
    model = _first(procs, "model name") or _first(blocks, "model name")
    flags = _flag_list(_first(procs, "features") or "", r"\s+")
    isa = (_first(procs, "isa") or "").lower()
    have = [w for f, w in (("lsx", "LSX 128-bit SIMD"), ("lasx", "LASX 256-bit SIMD")) if f in flags]
    cores = len({(b.get("package"), b.get("core")) for b in procs if "core" in b}) or None
    return CpuFacts(
        vendor="loongson",
        vendor_id=_first(procs, "cpu family"),
        model=model,
        arch="loongarch64" if "loongarch64" in isa or not isa else "loongarch32",
        cores=cores,
        threads=len(procs) or None,
        flags=flags,
        isa_summary=", ".join(have) if have else "no SIMD listed",
        source="proc-cpuinfo.txt",
    )


def sparc_facts(blocks: List[Dict[str, str]]) -> CpuFacts:
    model = _first(blocks, "cpu")
    kind = (_first(blocks, "type") or "").lower()
    threads = _int(_first(blocks, "ncpus active")) or _int(_first(blocks, "ncpus probed"))
    flags = _flag_list(_first(blocks, "cpucaps") or "", r"[,\s]+")
    return CpuFacts(
        vendor=_vendor_by_pattern(model),
        vendor_id=None,
        model=model,
        arch="sparc64" if kind.startswith(("sun4u", "sun4v")) or "v9" in flags else "sparc",
        cores=None,
        threads=threads,
        flags=flags,
        isa_summary="VIS" if "vis" in flags or "vis2" in flags else None,
        source="proc-cpuinfo.txt",
    )


def port_facts(port: str, text: str, blocks: List[Dict[str, str]]) -> Optional[CpuFacts]:
    procs = _processors(blocks)
    if port == "arm":
        return arm_facts(text, blocks, procs)
    if port == "powerpc":
        return powerpc_facts(blocks, procs)
    if port == "s390":
        return s390_facts(text, blocks)
    if port == "riscv":
        return riscv_facts(blocks, procs)
    if port == "mips":
        return mips_facts(blocks, procs)
    if port == "loongarch":
        return loongarch_facts(blocks, procs)
    if port == "sparc":
        return sparc_facts(blocks)
    return None
