"""Compute capability from every source that carries it (clinfo text and JSON, `nvidia-smi -q`'s
architecture, the name table), AMD OpenCL names, and ROCm-family accelerators that are not `GPU`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from mlprobe.model import knowledge as kb
from mlprobe.model.hw import nvidia as nvhw
from mlprobe.probes import nvidia as nv, opencl, rocm

from .fuzz import examples

NAME_ROWS = kb.rows("nvidia_gpus", "compute_capability_by_name")


@pytest.mark.parametrize("row", NAME_ROWS, ids=[r["pattern"] for r in NAME_ROWS])
def test_every_example_of_a_row_gets_that_rows_compute_capability(row: dict) -> None:
    # A later, broader row must never shadow an earlier one's products (and vice versa).
    for example in row.get("examples", []):
        if "/" in example:  # "RTX PRO 5000/4500/4000 Blackwell": a summary, not a product name
            continue
        assert nvhw.compute_capability_for(example) == row["compute_capability"], example


# Product names as nvidia-smi / OpenCL print them, Maxwell to Blackwell, across the market segments
# of NVIDIA's CUDA GPUs page. A known name without a compute capability is a bug.
PRODUCTS = [
    "GeForce GTX 750 Ti",
    "GeForce GTX 960",
    "GeForce GTX 980 Ti",
    "GeForce GTX 960M",
    "GeForce 940MX",
    "GeForce MX130",
    "Quadro M4000",
    "Quadro M1200",
    "Tesla M60",
    "Tesla M10",
    "NVIDIA Jetson Nano",
    "GeForce GTX 1060 6GB",
    "NVIDIA GeForce GTX 1050 Ti",
    "GeForce GT 1030",
    "Quadro P400",
    "Quadro P2200",
    "Tesla P100-PCIE-16GB",
    "Tesla P40",
    "NVIDIA TITAN Xp",
    "Tesla V100-SXM2-16GB",
    "Quadro GV100",
    "TITAN V",
    "NVIDIA GeForce RTX 2080 Ti",
    "NVIDIA GeForce GTX 1660 SUPER",
    "NVIDIA GeForce GTX 1630",
    "Quadro RTX 5000",
    "NVIDIA T400 4GB",
    "NVIDIA T1000 8GB",
    "Tesla T4",
    "NVIDIA GeForce MX450",
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA A800 80GB PCIe",
    "NVIDIA A30",
    "NVIDIA A10",
    "NVIDIA A10G",
    "NVIDIA A2",
    "NVIDIA RTX A4000",
    "NVIDIA RTX A500 Laptop GPU",
    "NVIDIA GeForce RTX 3090",
    "NVIDIA GeForce RTX 3050 Laptop GPU",
    "NVIDIA Jetson AGX Orin",
    "NVIDIA L4",
    "NVIDIA L40S",
    "NVIDIA L20",
    "NVIDIA RTX 4000 Ada Generation",
    "NVIDIA RTX 2000 Ada Generation Laptop GPU",
    "NVIDIA GeForce RTX 4090",
    "NVIDIA GeForce RTX 4060 Laptop GPU",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA H800",
    "NVIDIA H20",
    "NVIDIA H200",
    "NVIDIA GH200 480GB",
    "NVIDIA B200",
    "NVIDIA B300",
    "NVIDIA GB200",
    "NVIDIA GeForce RTX 5090",
    "NVIDIA GeForce RTX 5070 Laptop GPU",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
    "NVIDIA GB10",
    "NVIDIA Jetson AGX Thor",
]


@pytest.mark.parametrize("name", PRODUCTS)
def test_a_known_product_has_a_compute_capability(name: str) -> None:
    cc = nvhw.compute_capability_for(name)
    assert cc is not None, f"{name}: no compute capability"
    assert nvhw.architecture_for(cc) is not None


def test_mobile_maxwell_is_not_read_as_desktop_maxwell() -> None:
    assert nvhw.compute_capability_for("GeForce GTX 960M") == "5.0"  # GM107
    assert nvhw.compute_capability_for("GeForce GTX 960") == "5.2"  # GM206
    assert nvhw.compute_capability_for("GeForce GTX 980M") == "5.2"  # GM204


@pytest.mark.parametrize(
    "arch, cc",
    [
        ("Hopper", "9.0"),
        ("Ada Lovelace", "8.9"),
        ("Turing", "7.5"),
        ("Ampere", None),
        ("Blackwell", None),
        ("Pascal", None),
        ("", None),
    ],
)
def test_smi_architecture_implies_a_value_only_when_it_has_one(arch: str, cc: Any) -> None:
    assert nvhw.compute_capability_for_architecture(arch) == cc


def test_smi_q_architecture_fills_an_unknown_name() -> None:
    text = (
        "==============NVSMI LOG==============\n\nDriver Version : 570.86.15\nCUDA Version : 12.8\n\n"
        "Attached GPUs : 1\nGPU 00000000:01:00.0\n    Product Name : NVIDIA Future Hopper Part\n"
        "    Product Architecture : Hopper\n"
    )
    g = nv.to_gpu_facts(nv.parse_smi_q(text).gpus[0], "570.86.15")
    assert (g.compute_capability, g.architecture) == ("9.0", "Hopper")


def test_clinfo_json_nv_attributes() -> None:
    doc = {
        "platforms": [{"CL_PLATFORM_NAME": "NVIDIA CUDA", "CL_PLATFORM_VENDOR": "NVIDIA Corporation"}],
        "devices": [
            {
                "online": [
                    {
                        "CL_DEVICE_NAME": "NVIDIA Mystery",
                        "CL_DEVICE_TYPE": "CL_DEVICE_TYPE_GPU",
                        "CL_DEVICE_VENDOR": "NVIDIA Corporation",
                        "CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV": 8,
                        "CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV": 9,
                    }
                ]
            }
        ],
    }
    plat = opencl.parse_clinfo_json(json.dumps(doc))[0]
    assert plat.devices[0].compute_capability == "8.9"
    assert opencl.gpu_from_device(plat.devices[0], plat).compute_capability == "8.9"


@settings(max_examples=examples(200), deadline=None)
@given(
    st.one_of(st.none(), st.integers(-5, 200), st.text(max_size=8)),
    st.one_of(st.none(), st.integers(-5, 200), st.text(max_size=8)),
)
def test_nv_attribute_values_of_any_type(major: Any, minor: Any) -> None:
    got = opencl._cc((major, minor))
    assert got is None or (got.count(".") == 1 and all(p.isdigit() for p in got.split(".")))


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=30))
def test_architecture_and_codename_lookups_take_any_text(text: str) -> None:
    assert nvhw.compute_capability_for_architecture(text) in (None, "7.5", "8.9", "9.0", "3.0", "6.0", "7.0")
    assert opencl._amd_codename_gfx(text) in {None} | {r["gfx_target"] for r in kb.rows("amd_opencl_names")}
    opencl._cc(text)


def test_amd_codename_and_gfx_names() -> None:
    from mlprobe.model.facts import OpenClDevice, OpenClPlatform

    plat = OpenClPlatform(name="AMD Accelerated Parallel Processing", vendor="Advanced Micro Devices, Inc.")
    tonga = OpenClDevice(
        name="Tonga", type="GPU", vendor="Advanced Micro Devices, Inc.", board_name="AMD FirePro S7150"
    )
    g = opencl.gpu_from_device(tonga, plat)
    assert (g.name, g.runtime_gfx_target) == ("AMD FirePro S7150", "gfx802")
    rocm_cl = OpenClDevice(
        name="gfx1031", type="GPU", vendor="Advanced Micro Devices, Inc.", board_name="AMD Radeon RX 6700 XT"
    )
    g = opencl.gpu_from_device(rocm_cl, plat)
    assert (g.name, g.runtime_gfx_target) == ("AMD Radeon RX 6700 XT", "gfx1031")


# rocminfo's agent layout (the field names and order of ROCm's rocminfo), with a DCU agent as Hygon's
# DTK prints it: `Device Type: DCU`. Synthetic: no complete public DCU rocminfo was found to copy.
DCU_ROCMINFO = """hygon module is loaded
=====================
HSA System Attributes
=====================
Runtime Version:         1.1

==========
HSA Agents
==========
*******
Agent 1
*******
  Name:                    Hygon C86 3350  8-core Processor
  Uuid:                    CPU-XX
  Marketing Name:          Hygon C86 3350  8-core Processor
  Vendor Name:             HygonGenuine
  Node:                    0
  Device Type:             CPU
  Compute Unit:            16
*******
Agent 2
*******
  Name:                    gfx906
  Uuid:                    GPU-XX
  Marketing Name:          Z100L
  Vendor Name:             HYGON
  Node:                    1
  Device Type:             DCU
  Chip ID:                 26273(0x66a1)
  BDFID:                   1024
  Compute Unit:            60
*******
Agent 3
*******
  Name:                    aie2
  Marketing Name:          AMD NPU
  Vendor Name:             AMD
  Node:                    2
  Device Type:             DSP
"""


def test_a_dcu_agent_is_reported_with_its_pytorch_story() -> None:
    info = rocm.parse_rocminfo(DCU_ROCMINFO)
    gpus = rocm.gpus_from_rocminfo(info, [])
    assert len(gpus) == 1, "the CPU and the NPU are not accelerators of this kind; the DCU is"
    g = gpus[0]
    assert (g.vendor, g.name, g.gfx_target, g.compute_units) == ("hygon", "Z100L", "gfx906", 60)
    assert any("DTK" in n and "ROCm wheels" in n for n in g.notes)
