"""x86 CPU knowledge the probes share: the x86-64 psABI levels (Table 3.1, in kernel flag names; source:
gitlab.com/x86-psABIs/x86-64-ABI Table 3.1, glibc commit b80f16ad for BMI1/BMI2 in v3), the flags that
matter for ML, and the CPUID vendor strings."""

from __future__ import annotations

from typing import Iterable, Tuple

X86_LEVELS: Tuple[Tuple[int, Tuple[str, ...]], ...] = (
    (2, ("cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3")),
    (3, ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave")),
    (4, ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")),
)

# The flags that matter for ML, in the order the terminal shows them.
ML_FLAGS = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16",
    "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "asimd", "asimddp", "sve", "sve2", "bf16", "i8mm",
    "sme",
)


X86_VENDORS = {
    "GenuineIntel": "intel", "AuthenticAMD": "amd", "HygonGenuine": "hygon",
    "CentaurHauls": "centaur", "  Shanghai  ": "zhaoxin", "VIA VIA VIA ": "via",
}


def x86_64_level(flags: Iterable[str]) -> int:
    """psABI level 1-4 from Linux flag names (callers only ask for x86-64 CPUs)."""
    have = set(flags)
    level = 1
    for lvl, needed in X86_LEVELS:
        if all(f in have for f in needed):
            level = lvl
        else:
            break
    return level
