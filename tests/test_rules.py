"""The condition evaluator and the named tests, on small hand-made facts: three-valued logic, the
wheel-index choice from the driver AND the GPU architecture, ROCm overrides, Python and OS ranges, and
that every "no" is a sentence."""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mlprobe.model.context import RulesContext
from mlprobe.model.facts import Facts
from mlprobe.model.knowledge import Row
from mlprobe.plan.planner import make_plan
from mlprobe.recipes import find_recipe, knowledge
from mlprobe.plan.rules import (
    arch_coverage,
    cuda_ceiling,
    derive,
    evaluate,
    evaluate_recipe,
    plaidml_opencl_id,
)

from .fuzz import examples

KB = knowledge()


def derive_facts(rep: Dict[str, Any], kb: Any, python: Optional[str] = None) -> RulesContext:
    """The rules context of a hand-made scan report, read the way a report file is (leniently)."""
    return derive(Facts.from_report(rep), kb, python)


def report(
    system: Optional[str] = "Linux",
    arch: Optional[str] = "x86_64",
    flags: Optional[List[str]] = None,
    python: Optional[str] = "3.11",
    gpus: Optional[List[Dict[str, Any]]] = None,
    cuda: Optional[Dict[str, Any]] = None,
    **os_extra: Any,
) -> Dict[str, Any]:
    return {
        "os": dict({"system": system, "wsl": False}, **os_extra),
        "cpu": {
            "arch": arch,
            "flags": flags if flags is not None else ["sse2", "avx", "avx2", "fma"],
            "vendor": "intel",
        },
        "python": {"version": python},
        "gpus": gpus or [],
        "runtimes": {"cuda": cuda, "rocm": None, "opencl": None},
        "frameworks": [],
        "usb_accelerators": [],
    }


def nvidia(name: str, cc: Optional[str], driver: str, **kw: Any) -> Dict[str, Any]:
    return dict(
        {
            "vendor": "nvidia",
            "name": name,
            "compute_capability": cc,
            "driver_version": driver,
            "apis": ["cuda"],
            "integrated": False,
        },
        **kw,
    )


def amd(
    name: str, gfx: Optional[str], integrated: bool = False, runtime: Optional[str] = None
) -> Dict[str, Any]:
    return {
        "vendor": "amd",
        "name": name,
        "gfx_target": gfx,
        "runtime_gfx_target": runtime,
        "apis": ["rocm"],
        "integrated": integrated,
    }


def verdict(rep: Dict[str, Any], recipe: str, python: Optional[str] = None):  # type: ignore[no-untyped-def]
    return evaluate_recipe(find_recipe(recipe), derive_facts(rep, KB, python), KB)


def top(rep: Dict[str, Any], fw: str, python: Optional[str] = None) -> Optional[str]:
    return make_plan(rep, python=python)["top"][fw]


def entry(rep: Dict[str, Any], recipe: str, python: Optional[str] = None) -> Dict[str, Any]:
    plan = make_plan(rep, python=python)
    hit = [e for e in plan["recommended"] if e["recipe"] == recipe]
    assert hit, f"{recipe} not recommended: " + str([r for r in plan["rejected"] if r["recipe"] == recipe])
    return hit[0]


# --------------------------------------------------------------------------- the evaluator

CTX = {"a": {"n": 3, "v": "3.11", "none": None, "list": ["avx", "sse2"]}}


@pytest.mark.parametrize(
    "cond, value",
    [
        ({"fact": "a.n", "gte": 3, "because": "x"}, True),
        ({"fact": "a.n", "lt": 3, "because": "x"}, False),
        ({"fact": "a.v", "specifier": ">=3.10,<3.13", "because": "x"}, True),
        ({"fact": "a.v", "specifier": "<3.10", "because": "x"}, False),
        ({"fact": "a.list", "contains": "avx", "because": "x"}, True),
        ({"fact": "a.list", "contains": "avx2", "because": "x"}, False),
        ({"fact": "a.none", "equals": 1, "because": "x"}, None),
        (
            {
                "all": [
                    {"fact": "a.n", "gte": 3, "because": "x"},
                    {"fact": "a.none", "equals": 1, "because": "x"},
                ]
            },
            None,
        ),
        (
            {
                "all": [
                    {"fact": "a.n", "gte": 4, "because": "x"},
                    {"fact": "a.none", "equals": 1, "because": "x"},
                ]
            },
            False,
        ),
        (
            {
                "any": [
                    {"fact": "a.n", "gte": 4, "because": "x"},
                    {"fact": "a.none", "equals": 1, "because": "x"},
                ]
            },
            None,
        ),
        (
            {
                "any": [
                    {"fact": "a.n", "gte": 3, "because": "x"},
                    {"fact": "a.none", "equals": 1, "because": "x"},
                ]
            },
            True,
        ),
        ({"not": {"fact": "a.n", "gte": 3, "because": "x"}, "because": "y"}, False),
        ({"not": {"fact": "a.none", "gte": 3, "because": "x"}, "because": "y"}, None),
    ],
)
def test_three_valued_logic(cond: Dict[str, Any], value: Optional[bool]) -> None:
    assert evaluate(Row(cond), CTX, KB).value is value  # type: ignore[arg-type]


def test_failures_are_sentences_from_templates() -> None:
    out = evaluate(
        Row({"fact": "a.v", "specifier": ">=3.12", "because": "needs Python {operand}; this is {value}"}),
        CTX, KB,  # type: ignore[arg-type]
    )
    assert out.value is False and out.reasons == ["needs Python >=3.12; this is 3.11"]
    out = evaluate(Row({"fact": "a.none", "equals": 1, "because": "x", "unknown": "could not see {a.n}"}),
                   CTX, KB)  # type: ignore[arg-type]
    assert out.unknown == ["could not see 3"]


def test_all_reports_every_failure_but_stops_at_a_gate() -> None:
    both = {
        "all": [{"fact": "a.n", "gte": 4, "because": "first"}, {"fact": "a.n", "gte": 5, "because": "second"}]
    }
    assert evaluate(Row(both), CTX, KB).reasons == ["first", "second"]  # type: ignore[arg-type]
    both["all"][0]["stop"] = True  # type: ignore[index]
    assert evaluate(Row(both), CTX, KB).reasons == ["first"]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "archs, cc, how",
    [
        (["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"], "5.2", "cubin"),  # GTX 960 on cu126
        (["7.5", "8.0", "8.6", "9.0", "10.0", "12.0+PTX"], "5.2", None),  # ... but not on cu130
        (["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"], "8.9", "cubin"),  # Ada on an 8.6 cubin
        (["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"], "12.0", None),  # Blackwell needs cu128+
        (["7.5", "8.0", "8.6", "9.0", "10.0", "12.0+PTX"], "12.1", "cubin"),  # GB10
        (["7.5", "8.0", "8.6", "9.0", "10.0", "12.0+PTX"], "13.0", "ptx"),  # a future GPU: PTX JIT
        (["8.0", "9.0a"], "9.0", None),  # sm_90a runs only on its chip... as 9.0a
    ],
)
def test_arch_coverage(archs: List[str], cc: str, how: Optional[str]) -> None:
    assert arch_coverage(archs, cc) == how


_REL = st.lists(st.integers(0, 20), min_size=1, max_size=3).map(lambda xs: ".".join(map(str, xs)))


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([">=", "<=", ">", "<", "==", "!=", "~=", "=="]), _REL),
        min_size=1,
        max_size=3,
    ),
    _REL,
    st.booleans(),
)
def test_fast_specifier_path_agrees_with_packaging(clauses: List[Any], value: str, star: bool) -> None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    from mlprobe.plan.conditions import spec_contains

    spec = ",".join(
        f"{op}{v}" + (".*" if star and op in ("==", "!=") and i == 0 else "")
        for i, (op, v) in enumerate(clauses)
    )
    try:
        want = SpecifierSet(spec).contains(Version(value), prereleases=True)
    except InvalidSpecifier:
        with pytest.raises(ValueError):
            spec_contains(spec, Version(value))
        return
    assert spec_contains(spec, Version(value)) == want, spec


# --------------------------------------------------------------------------- PyTorch CUDA: driver AND arch


def test_gtx960_on_driver_580_gets_cu126_not_cu130() -> None:
    rep = report(
        gpus=[nvidia("NVIDIA GeForce GTX 960", "5.2", "580.65.06")],
        cuda={"version": "13.0", "driver_version": "580.65.06"},
    )
    e = entry(rep, "torch-cuda")
    assert (e["index"], e["version"]) == ("cu126", "2.14")
    v = verdict(rep, "torch-cuda")
    cu130 = next(x for x in v.variants if x.label == "torch 2.14 cu130")
    assert cu130.fits is False
    assert any("sm_52" in r and "sm_75" in r for r in cu130.reasons)


def test_driver_510_gets_cu118_and_a_torch_that_still_ships_it() -> None:
    rep = report(
        gpus=[nvidia("Tesla P100-PCIE-16GB", "6.0", "510.47.03")],
        cuda={"version": "11.6", "driver_version": "510.47.03"},
    )
    e = entry(rep, "torch-cuda")
    assert (e["index"], e["version"]) == ("cu118", "2.7")
    assert e["packages"] == ["torch==2.7.*"], "a newer torch was rejected, so the plan pins the series"
    assert any("minor-version compatibility" in w for w in e["warnings"])


def test_blackwell_on_driver_570_gets_cu128_of_the_last_torch_that_ships_it() -> None:
    rep = report(
        gpus=[nvidia("NVIDIA GeForce RTX 5090", "12.0", "570.124.04")],
        cuda={"version": "12.8", "driver_version": "570.124.04"},
    )
    e = entry(rep, "torch-cuda")
    assert (e["index"], e["version"]) == ("cu128", "2.11")


def test_new_driver_prefers_the_series_it_runs_natively() -> None:
    rep = report(
        gpus=[nvidia("NVIDIA H100 80GB HBM3", "9.0", "590.48.01")],
        cuda={"version": "13.1", "driver_version": "590.48.01"},
    )
    assert entry(rep, "torch-cuda")["index"] == "cu130"  # cu132 would run only through compatibility
    rep["runtimes"]["cuda"]["version"] = "13.3"
    assert entry(rep, "torch-cuda")["index"] == "cu132"
    rep = report(
        python=None,
        gpus=[nvidia("NVIDIA H100 80GB HBM3", "9.0", "590.48.01")],
        cuda={"version": "13.1", "driver_version": "590.48.01"},
    )
    assert entry(rep, "torch-cuda")["index"] == "cu130", "an unknown Python does not change the choice"


def test_windows_driver_numbers_give_the_ceiling() -> None:
    rep = report(system="Windows", gpus=[nvidia("NVIDIA GeForce RTX 3090", "8.6", "531.18")])
    ctx = derive_facts(rep, KB)
    assert cuda_ceiling(ctx, KB) == "12.1"
    e = entry(rep, "torch-cuda")
    assert e["index"] == "cu126" and any("528.33" in w for w in e["warnings"])


def test_too_old_driver_rejects_with_the_driver_it_needs() -> None:
    rep = report(
        gpus=[nvidia("Tesla K80", "3.7", "440.33.01")],
        cuda={"version": "10.2", "driver_version": "440.33.01"},
    )
    v = verdict(rep, "torch-cuda")
    assert not v.fits
    assert any("450.80.02" in r for r in v.reasons)


def test_unknown_compute_capability_does_not_reject_but_says_so() -> None:
    rep = report(gpus=[nvidia("NVIDIA Mystery 9000", None, "580.65.06")], cuda={"version": "13.0"})
    v = verdict(rep, "torch-cuda")
    assert v.fits and any("compute capability" in u for u in v.unknown)


def test_gpu_name_gives_the_compute_capability_when_the_probe_did_not() -> None:
    rep = report(system="Windows", gpus=[nvidia("NVIDIA GeForce GTX 960", None, "581.57")])
    assert derive_facts(rep, KB).nvidia.gpus[0].cc == "5.2"
    assert entry(rep, "torch-cuda")["index"] == "cu126"


def test_mig_and_grace_hosts() -> None:
    rep = report(
        system=None,
        arch=None,
        flags=[],
        gpus=[nvidia("NVIDIA GH200 120GB", "9.0", "590.48.01", mig_mode="Enabled")],
        cuda={"version": "13.1", "driver_version": "590.48.01"},
    )
    ctx = derive_facts(rep, KB)
    assert ctx.cpu.arch == "arm64" and ctx.os.system == "Linux"
    e = entry(rep, "torch-cuda")
    assert any("MIG" in w for w in e["warnings"])
    assert top(rep, "tensorflow") == "tensorflow-cpu", "TensorFlow's CUDA build is x86_64-only"


# --------------------------------------------------------------------------- ROCm


def test_gfx1031_runs_through_the_unofficial_override() -> None:
    rep = report(gpus=[amd("AMD Radeon RX 6700 XT", "gfx1031")])
    e = entry(rep, "torch-rocm")
    assert e["env"] == {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}
    assert any("not built for gfx1031" in w and "10.3.0" in w and "unofficial" in w for w in e["warnings"])
    assert "export HSA_OVERRIDE_GFX_VERSION=10.3.0" in e["commands"]
    official = entry(report(gpus=[amd("AMD Radeon RX 6800 XT", "gfx1030")]), "torch-rocm")
    assert official["score"] > e["score"], "an unofficial workaround ranks below the official path"


def test_gfx1010_has_no_override_and_says_why() -> None:
    v = verdict(report(gpus=[amd("AMD Radeon RX 5700 XT", "gfx1010")]), "torch-rocm")
    assert not v.fits
    assert any("gfx1010" in r and "10.3.0" in r for r in v.reasons)


def test_unknown_gfx_is_not_a_yes() -> None:
    v = verdict(report(gpus=[amd("AMD Radeon(TM) R7 Graphics", None, integrated=True)]), "torch-rocm")
    assert not v.fits and any("gfx target" in r for r in v.reasons)


def test_rocm_is_linux_only_and_wsl_needs_rdna3() -> None:
    v = verdict(report(system="Windows", gpus=[amd("AMD Radeon RX 7900 XTX", "gfx1100")]), "torch-rocm")
    assert not v.fits and "Linux-only" in v.reasons[0]
    wsl = report(gpus=[amd("AMD Radeon RX 6800 XT", "gfx1030")])
    wsl["os"]["wsl"] = True
    v = verdict(wsl, "torch-rocm")
    assert not v.fits and any("WSL2" in r and "gfx1030" in r for r in v.reasons)
    wsl["gpus"] = [amd("AMD Radeon RX 7900 XTX", "gfx1100")]
    assert verdict(wsl, "torch-rocm").fits


def test_discrete_gpu_is_the_target_when_an_igpu_is_there_too() -> None:
    rep = report(gpus=[amd("AMD Radeon RX 7800 XT", "gfx1101"), amd("AMD Radeon Graphics", "gfx1036", True)])
    e = entry(rep, "torch-rocm")
    # gfx1101 is built, so no override; the iGPU (no kernels in the wheel) is hidden from the runtime
    assert e["env"] == {"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"}
    assert any("also visible to ROCm" in w and "ROCR_VISIBLE_DEVICES" in w for w in e["warnings"])
    assert "export ROCR_VISIBLE_DEVICES=0" in e["commands"]


def test_the_igpu_listed_first_leaves_the_dgpu_as_rocm_device_1_then_hip_device_0() -> None:
    dgpu = dict(amd("AMD Radeon RX 7800 XT", "gfx1101"), uuid="GPU-e10f2e38e35f3587")
    rep = report(gpus=[amd("AMD Radeon Graphics", "gfx1036", True), amd("AMD Radeon RX 7800 XT", "gfx1101")])
    assert entry(rep, "torch-rocm")["env"] == {"ROCR_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "0"}
    rep["gpus"][1] = dgpu  # a UUID does not depend on the enumeration order
    assert entry(rep, "torch-rocm")["env"]["ROCR_VISIBLE_DEVICES"] == "GPU-e10f2e38e35f3587"


def test_an_override_for_the_dgpu_alone_is_per_node_when_the_node_is_known() -> None:
    dgpu = dict(amd("AMD Radeon RX 6750 XT", "gfx1031"), kfd_node=1)
    igpu = dict(amd("AMD Radeon Graphics", "gfx1036", True), kfd_node=2)
    e = entry(report(gpus=[dgpu, igpu]), "torch-rocm")
    assert e["env"] == {"HSA_OVERRIDE_GFX_VERSION_1": "10.3.0", "ROCR_VISIBLE_DEVICES": "0",
                        "HIP_VISIBLE_DEVICES": "0"}
    # without node numbers the one global override is right too: the iGPU it would also rename is hidden
    e = entry(report(gpus=[amd("AMD Radeon RX 6750 XT", "gfx1031"), amd("AMD Radeon Graphics", "gfx1036", True)]),
              "torch-rocm")
    assert e["env"]["HSA_OVERRIDE_GFX_VERSION"] == "10.3.0"


def test_a_second_dgpu_that_needs_no_override_keeps_its_own_target() -> None:
    # a global HSA_OVERRIDE_GFX_VERSION=10.3.0 would make the RX 7600 (gfx1102, built) run as gfx1030
    a = dict(amd("AMD Radeon RX 6700 XT", "gfx1031"), kfd_node=1)
    b = dict(amd("AMD Radeon RX 7600", "gfx1102"), kfd_node=2)
    e = entry(report(gpus=[a, b]), "torch-rocm")
    assert e["env"] == {"HSA_OVERRIDE_GFX_VERSION_1": "10.3.0"}
    v = verdict(report(gpus=[amd("AMD Radeon RX 6700 XT", "gfx1031"), amd("AMD Radeon RX 7600", "gfx1102")]),
                "torch-rocm")
    assert not v.fits and any("KFD node" in r for r in v.reasons)


# --------------------------------------------------------------------------- AMD's own wheels


def test_amd_wheels_give_gfx1031_native_kernels_ranked_above_the_override() -> None:
    plan = make_plan(report(gpus=[amd("AMD Radeon RX 6700 XT", "gfx1031")]), framework="torch")
    ids = [e["recipe"] for e in plan["recommended"]]
    assert ids[:2] == ["torch-rocm-amd", "torch-rocm"], ids
    native, override = plan["recommended"][0], plan["recommended"][1]
    assert native["packages"] == ["torch[device-gfx1031]==2.12.*"] and native["env"] == {}
    assert native["index_url"] == "https://repo.amd.com/rocm/whl-multi-arch"
    assert override["env"] == {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}


def test_pytorchs_own_wheels_stay_first_where_both_have_native_kernels() -> None:
    plan = make_plan(report(gpus=[amd("AMD Radeon RX 7900 XTX", "gfx1100")]), framework="torch")
    assert [e["recipe"] for e in plan["recommended"]][:2] == ["torch-rocm", "torch-rocm-amd"]


def test_amd_wheels_on_windows_follow_amds_windows_column() -> None:
    win = report(system="Windows", gpus=[amd("AMD Radeon RX 6700 XT", "gfx1031")])
    e = entry(win, "torch-rocm-amd")
    assert e["packages"] == ["torch[device-gfx1031]==2.12.*"]
    assert top(win, "torch") == "torch-rocm-amd"
    # gfx1201 is Release Ready on Linux, Build Passing only on Windows: it fits, unverified, scored lower
    lin = entry(report(gpus=[amd("AMD Radeon RX 9070 XT", "gfx1201")]), "torch-rocm-amd")
    w = entry(report(system="Windows", gpus=[amd("AMD Radeon RX 9070 XT", "gfx1201")]), "torch-rocm-amd")
    assert w["score"] < lin["score"] and any("Build Passing only" in x for x in w["warnings"])
    # Instinct targets have no Windows build at all
    v = verdict(report(system="Windows", gpus=[amd("AMD Instinct MI300X", "gfx942")]), "torch-rocm-amd")
    assert not v.fits and any("no Windows wheels for gfx942" in r for r in v.reasons)


def test_amd_wheels_refuse_what_amd_does_not_ship() -> None:
    v = verdict(report(gpus=[amd("AMD Radeon Graphics", "gfx90c", True)]), "torch-rocm-amd")
    assert not v.fits and any("no device package for gfx90c" in r for r in v.reasons)
    v = verdict(report(gpus=[amd("AMD Radeon RX 580", "gfx803")]), "torch-rocm-amd")
    assert not v.fits
    wsl = report(gpus=[amd("AMD Radeon RX 7900 XTX", "gfx1100")])
    wsl["os"]["wsl"] = True
    v = verdict(wsl, "torch-rocm-amd")
    assert not v.fits and any("WSL" in r for r in v.reasons)
    v = verdict(report(python="3.10", gpus=[amd("AMD Radeon RX 7900 XTX", "gfx1100")]), "torch-rocm-amd")
    assert not v.fits and any("3.10" in r for r in v.reasons)


def test_amd_wheels_warn_about_an_override_left_in_the_environment_and_a_disputed_target() -> None:
    e = entry(report(gpus=[amd("AMD Radeon RX 6700 XT", "gfx1031", runtime="gfx1030")]), "torch-rocm-amd")
    assert any("unset it" in w for w in e["warnings"])
    e = entry(report(gpus=[amd("AMD Custom GPU 0405", "gfx1033", True)]), "torch-rocm-amd")
    assert any("wrong results" in w for w in e["warnings"])


def test_amd_wheels_hide_the_igpu_and_install_the_dgpus_kernels_only() -> None:
    rep = report(gpus=[amd("AMD Radeon RX 6750 XT", "gfx1031"), amd("AMD Radeon Graphics", "gfx1036", True)])
    e = entry(rep, "torch-rocm-amd")
    assert e["packages"] == ["torch[device-gfx1031]==2.12.*"]
    assert e["env"] == {"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"}
    use = make_plan(rep, framework="torch")
    assert use["top"]["torch"] == "torch-rocm-amd"


# --------------------------------------------------------------------------- CPU, Python, OS


def test_no_avx_rejects_every_tensorflow_recipe_naming_avx() -> None:
    rep = report(
        flags=["sse2", "sse4_1", "sse4_2"],
        gpus=[nvidia("NVIDIA GeForce GTX 1080", "6.1", "535.54.03")],
        cuda={"version": "12.2"},
    )
    plan = make_plan(rep)
    tf = [r for r in plan["rejected"] if r["framework"] == "tensorflow"]
    assert {r["recipe"] for r in tf} >= {
        "tensorflow-cpu",
        "tensorflow-cuda",
        "tensorflow-metal",
        "tensorflow-directml-plugin",
        "tensorflow-sycl-opencl",
    }
    assert all(any("AVX" in x for x in r["reasons"]) for r in tf)
    assert plan["top"]["tensorflow"] is None
    assert plan["top"]["torch"] == "torch-cuda", "PyTorch needs no AVX"


def test_python_ranges_pick_the_last_release_that_has_wheels() -> None:
    rep = report()
    assert entry(rep, "torch-cpu", python="3.9")["packages"] == ["torch==2.8.*"]
    assert entry(rep, "torch-cpu", python="3.12")["packages"] == ["torch"]
    plan = make_plan(rep, python="3.14")
    rej = next(r for r in plan["rejected"] if r["recipe"] == "tensorflow-cpu")
    assert any("Python" in x and "3.14" in x for x in rej["reasons"])
    assert plan["top"]["torch"] == "torch-cpu"


def test_intel_mac_stops_at_torch_22_and_tensorflow_216() -> None:
    rep = report(system="Darwin", arch="x86_64", python="3.11")
    t = entry(rep, "torch-cpu")
    assert t["packages"] == ["torch==2.2.*"] and t["index"] is None
    assert any("2.2" in w for w in t["warnings"])
    assert entry(rep, "tensorflow-cpu")["packages"] == ["tensorflow==2.16.*"]


def test_amd_gpu_in_an_intel_mac_gets_mps_and_tensorflow_metal_of_its_era() -> None:
    rep = report(
        system="Darwin",
        arch=None,
        flags=[],
        python=None,
        macos_version="13.6",
        gpus=[
            {"vendor": "intel", "name": "Intel HD Graphics 530", "apis": ["metal"], "integrated": True},
            {"vendor": "amd", "name": "AMD Radeon Pro 450", "apis": ["metal"], "integrated": False},
        ],
    )
    plan = make_plan(rep)
    assert {fw: plan["top"][fw] for fw in ("torch", "tensorflow", "keras")} == {
        "torch": "torch-mps",
        "tensorflow": "tensorflow-metal",
        "keras": "tensorflow-metal",
    }
    metal = entry(rep, "tensorflow-metal")
    assert metal["packages"] == ["tensorflow==2.13.*", "tensorflow-metal==1.0.0"]


def test_apple_silicon_without_a_listed_gpu_still_gets_mps() -> None:
    rep = report(system="Darwin", arch="arm64", flags=["asimd"], python="3.12", macos_version="15.1", gpus=[])
    rep["cpu"].update(vendor="apple", model="Apple M4 Max")
    plan = make_plan(rep)
    assert plan["top"]["torch"] == "torch-mps"
    assert any("Apple GPU is assumed" in w for w in plan["warnings"])
    old = copy.deepcopy(rep)
    old["os"]["macos_version"] = "13.2"
    assert entry(old, "torch-mps")["packages"] == ["torch==2.8.*"]


def test_directml_needs_windows_builds_and_python_pins() -> None:
    gpu = {"vendor": "amd", "name": "AMD Radeon RX 5700 XT", "apis": ["directml"], "integrated": False}
    ok = report(system="Windows", gpus=[gpu], python="3.10", windows_build=19045)
    assert make_plan(ok)["top"]["torch"] == "torch-directml"
    assert make_plan(ok)["top"]["tensorflow"] == "tensorflow-directml-plugin"
    plan = make_plan(report(system="Windows", gpus=[gpu], python="3.11", windows_build=15063))
    reasons = {r["recipe"]: r["reasons"] for r in plan["rejected"]}
    assert any("16299" in x for x in reasons["torch-directml"])
    assert any("3.7-3.10" in x for x in reasons["tensorflow-directml-plugin"])
    paused = entry(ok, "tensorflow-directml-plugin")
    assert any("paused" in w for w in paused["warnings"])


def test_xpu_supports_arc_not_uhd() -> None:
    arc = report(gpus=[{"vendor": "intel", "name": "Intel(R) Arc(TM) A770 Graphics", "integrated": False}])
    assert make_plan(arc)["top"]["torch"] == "torch-xpu"
    uhd = report(gpus=[{"vendor": "intel", "name": "Intel(R) UHD Graphics 630", "integrated": True}])
    v = verdict(uhd, "torch-xpu")
    assert not v.fits and "UHD" in v.reasons[0]


# --------------------------------------------------------------------------- PlaidML


@pytest.mark.parametrize(
    "vendor, name, want",
    [
        ("Advanced Micro Devices, Inc.", "Ellesmere", "opencl_amd_ellesmere"),
        ("Intel(R) Corporation", "Intel(R) HD Graphics 5500", "opencl_intel_hd_graphics_5500"),  # plaidml#375
        ("NVIDIA Corporation", "GeForce GTX 1070", "opencl_nvidia_geforce_gtx_1070"),
    ],
)
def test_plaidml_opencl_ids(vendor: str, name: str, want: str) -> None:
    assert plaidml_opencl_id(vendor, name, KB) == want


def test_plaidml_writes_setup_without_questions() -> None:
    mac = report(
        system="Darwin",
        arch="x86_64",
        python="3.11",
        gpus=[
            {"vendor": "amd", "name": "AMD Radeon Pro 5600M", "apis": ["metal"], "integrated": False},
            {"vendor": "intel", "name": "Intel(R) UHD Graphics 630", "apis": ["metal"], "integrated": True},
        ],
    )
    e = entry(mac, "plaidml-keras")
    assert e["env"]["PLAIDML_DEVICE_IDS"] == "metal_amd_radeon_pro_5600m.0"
    assert e["files"][0]["path"] == "~/.plaidml"
    assert e["files"][0]["json"] == {
        "PLAIDML_DEVICE_IDS": ["metal_amd_radeon_pro_5600m.0"],
        "PLAIDML_EXPERIMENTAL": False,
    }
    assert e["steps"] == [{"shim": "plaidml-collections", "why": e["steps"][0]["why"]}]
    assert e["env"]["KERAS_BACKEND"] == "plaidml.keras.backend"
    assert any("unmaintained" in w for w in e["warnings"])
    cpu = entry(report(python="3.9"), "plaidml-keras")
    assert cpu["env"]["PLAIDML_DEVICE_IDS"] == "llvm_cpu.0" and cpu["env"]["PLAIDML_EXPERIMENTAL"] == "1"
    assert cpu["steps"] == [], "no shim below Python 3.10"
    assert not verdict(report(arch="arm64"), "plaidml-keras").fits


def test_opencl_gpu_for_plaidml_on_linux() -> None:
    rep = report(gpus=[{"vendor": "amd", "name": "Radeon RX 580", "apis": ["opencl"]}])
    rep["runtimes"]["opencl"] = {
        "platforms": [
            {
                "name": "AMD Accelerated Parallel Processing",
                "devices": [
                    {"name": "Ellesmere", "vendor": "Advanced Micro Devices, Inc.", "type": "GPU"},
                    {"name": "AMD Ryzen 5 1600", "vendor": "AuthenticAMD", "type": "CPU"},
                ],
            }
        ]
    }
    e = entry(rep, "plaidml-keras")
    assert e["env"]["PLAIDML_DEVICE_IDS"] == "opencl_amd_ellesmere.0"
    assert e["env"]["PLAIDML_EXPERIMENTAL"] == "0"


# --------------------------------------------------------------------------- robustness

_ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 700),
    st.text(max_size=12),
    st.lists(st.text(max_size=6), max_size=3),
)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_odd_reports_never_crash_the_plan(data: st.DataObject) -> None:
    rep = report(
        gpus=[
            nvidia("NVIDIA GeForce RTX 3060", "8.6", "570.124.04"),
            amd("AMD Radeon RX 6700 XT", "gfx1031"),
        ],
        cuda={"version": "12.8", "driver_version": "570.124.04"},
    )
    for _ in range(data.draw(st.integers(1, 6))):
        section = data.draw(st.sampled_from(["os", "cpu", "python"]))
        key = data.draw(st.sampled_from(sorted(rep[section]) + ["version", "arch", "flags", "system", "wsl"]))
        rep[section][key] = data.draw(_ANY)
        gpu = data.draw(st.sampled_from(rep["gpus"]))
        gkey = data.draw(
            st.sampled_from(["name", "compute_capability", "driver_version", "gfx_target", "integrated"])
        )
        gpu[gkey] = data.draw(
            st.one_of(st.none(), st.text(max_size=10), st.sampled_from(["8.6", "gfx1100", "1.2.3"]))
        )
    try:
        plan = make_plan(rep)
    except (TypeError, ValueError) as exc:  # a report outside the schema may be refused, clearly
        assert str(exc)
        return
    assert set(plan) >= {"recommended", "rejected", "installed", "top"}


def test_a_second_named_test_under_a_taken_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe.plan.conditions import TESTS, test

    first = TESTS["cuda_driver_runs"]
    monkeypatch.setitem(TESTS, "cuda_driver_runs", first)  # put back, should the guard be missing

    def cuda_driver_runs(cond: Any, ctx: Any, kb: Any, row: Any) -> Any:  # another test under the same name
        raise AssertionError("never registered")

    with pytest.raises(ValueError, match=r"'cuda_driver_runs' is registered twice: mlprobe\.plan\..*cuda_driver_runs "
                                         r"and .*test_rules.*cuda_driver_runs"):
        test("cuda_driver_runs")(cuda_driver_runs)
    assert TESTS["cuda_driver_runs"] is first
