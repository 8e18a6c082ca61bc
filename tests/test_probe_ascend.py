"""Huawei Ascend: `npu-smi info` and the CANN toolkit's install record, over the real fixture and
the table layouts of other real reports; the plan that follows (torch-npu for the installed CANN)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlprobe.errors import ParseError
from mlprobe.probes.ascend import display_name, parse_npu_smi_info, parse_toolkit_info
from mlprobe.scan.capture import SPECS

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "linux-huawei-ascend-910b2c-npu-smi-cann83"

# The first Ascend 910 lists two chips under one NPU id and prints a Phy-ID column, with the process
# table after it (layout of the tables in vllm-project/vllm-ascend issues #4989 and #1363).
TWO_CHIPS = """\
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     Ascend910           | OK            | 165.3       36                0    / 0             |
| 0     0                   | 0000:9D:00.0  | 0           0    / 0          3143 / 65536         |
+------------------------------------------------------------------------------------------------+
| 0     Ascend910           | OK            | -           36                0    / 0             |
| 1     1                   | 0000:9F:00.0  | 0           0    / 0          2887 / 65536         |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| No running processes found in NPU 0                                                            |
"""


def test_the_fixture_gives_one_910b2c_with_its_driver_and_hbm() -> None:
    smi = parse_npu_smi_info((FIXTURE / "npu-smi-info.txt").read_text())
    assert smi.version == "25.0.rc1.1"
    (chip,) = smi.chips
    assert (chip.npu, chip.chip, chip.name, chip.health) == (0, 0, "910B2C", "OK")
    assert chip.pci_bus_id == "0000:5A:00.0" and chip.memory_total_mb == 65536


def test_two_chips_on_one_card_are_two_devices_and_the_process_table_is_not_read() -> None:
    smi = parse_npu_smi_info("root@host:~# npu-smi info\n" + TWO_CHIPS)
    assert smi.version is None
    assert [(c.npu, c.chip, c.pci_bus_id) for c in smi.chips] == [(0, 0, "0000:9D:00.0"), (0, 1, "0000:9F:00.0")]
    assert display_name(smi.chips[0].name) == "Ascend 910" and display_name("910B2C") == "Ascend 910B2C"


def test_a_hidden_bus_id_is_no_bus_id() -> None:
    text = (FIXTURE / "npu-smi-info.txt").read_text().replace("0000:5A:00.0", "0000:xx:00.0")
    assert parse_npu_smi_info(text).chips[0].pci_bus_id is None


def test_other_text_is_not_npu_smi_output() -> None:
    with pytest.raises(ParseError):
        parse_npu_smi_info("command not found: npu-smi\n")
    assert parse_npu_smi_info("").chips == []


def test_the_toolkit_record_gives_the_cann_version() -> None:
    info = parse_toolkit_info((FIXTURE / "ascend-toolkit-install-info.txt").read_text())
    assert info["version"] == "8.3.RC2" and info["arch"] == "x86_64"
    with pytest.raises(ParseError):
        parse_toolkit_info("package_name=Ascend-cann-toolkit\n")


def test_the_captures_are_taken_on_linux_only() -> None:
    assert SPECS["npu-smi-info.txt"].argv == ("npu-smi", "info")
    assert SPECS["ascend-toolkit-install-info.txt"].path.endswith("-linux/ascend_toolkit_install.info")  # type: ignore[union-attr]
    assert SPECS["npu-smi-info.txt"].systems == ("Linux",)


def test_the_plan_recommends_torch_npu_for_cann_8_3() -> None:
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "mlprobe", "plan", "--replay", str(FIXTURE), "--json",
                          "--python", "3.11"], capture_output=True, text=True, timeout=120)
    plan = json.loads(out.stdout)
    best = plan["recommended"][0]
    assert best["recipe"] == "torch-npu", [r["recipe"] for r in plan["recommended"]]
    assert best["version"] == "2.8.0" and any("torch-npu==2.8.0" in p for p in best["packages"]), best
    assert best["verify"]["device"] == "npu"


def _plan(folder: Path, python: str = "3.11") -> dict:
    from mlprobe.plan.planner import make_plan
    from mlprobe.scan.host import ReplayHost
    from mlprobe.scan.run import facts_to_report, scan

    return make_plan(facts_to_report(scan(ReplayHost(folder))), framework="torch", python=python)


def test_without_cann_the_plan_keeps_the_npu_with_the_cann_for_its_driver_as_the_first_step(tmp_path: Path) -> None:
    # the real 910B2C table alone, as a container with only the driver mounted would capture it
    import shutil

    shutil.copy(FIXTURE / "npu-smi-info.txt", tmp_path / "npu-smi-info.txt")
    plan = _plan(tmp_path)
    best = plan["recommended"][0]
    assert best["recipe"] == "torch-npu", [r["recipe"] for r in plan["recommended"]]
    # driver 25.0.rc1.1: CANN 9.1 does not run on 25.0.X, 9.0 does (CANN 9.1.0 release notes); its newest
    # torch-npu build with a wheel for Python 3.11 is torch 2.9.0 + torch-npu 2.9.0.post2
    (step,) = best["prerequisites"]
    assert "CANN 9.0" in step and "25.0.rc1.1" in step and "9.1" not in step
    assert best["version"] == "2.9.0" and "torch-npu==2.9.0.post2" in best["packages"], best
    assert any("no CANN toolkit is installed" in w for w in best["warnings"])
    with_cann = _plan(FIXTURE)["recommended"][0]
    assert with_cann["recipe"] == "torch-npu" and "prerequisites" not in with_cann  # CANN 8.3 is there


FIX = FIXTURE.parent


def test_driver_24_1_gets_cann_8_0_and_its_builds() -> None:
    plan = _plan(FIX / "linux-huawei-ascend-x8-npu-smi-24.1.rc2-no-cann-names-hidden", python="3.10")
    best = plan["recommended"][0]
    assert best["recipe"] == "torch-npu" and "CANN 8.0" in best["prerequisites"][0]
    assert best["version"] == "2.4.0" and "torch-npu==2.4.0.post2" in best["packages"], best


@pytest.mark.parametrize("folder, driver", [("linux-huawei-ascend-910a-x8-npu-smi-22.0.3-no-cann", "22.0.3.1"),
                                            ("linux-huawei-ascend-310-x4-npu-smi-21.0.4-no-cann", "21.0.4.B030")])
def test_a_driver_no_cann_with_torch_npu_builds_runs_on_says_to_update_it(folder: str, driver: str) -> None:
    plan = _plan(FIX / folder)
    assert plan["top"]["torch"] == "torch-cpu"
    (rej,) = [r for r in plan["rejected"] if r["recipe"] == "torch-npu"]
    assert any(driver in r and "update the driver" in r for r in rej["reasons"]), rej


def test_the_prerequisite_survives_the_plan_document() -> None:
    from mlprobe.model.plan import Recommendation

    rec = Recommendation(recipe="torch-npu", title="t", prerequisites=("install CANN 9.0",))
    assert Recommendation.from_json(rec.to_json()).prerequisites == ("install CANN 9.0",)
    assert "prerequisites" not in Recommendation(recipe="x", title="x").to_json()
