"""mlprobe doctor: every fixture with a doctor ground truth replays to it; the rules are data with a
source and a check each, and each rule is shown by a fixture; the parsers read what users paste; the
JSON fits its published schema; the exit status says whether something blocks; a report carries the
findings and replays them; hostile captures cost a rule, never the run."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlprobe import cli, pipeline
from mlprobe.doctor import checks as C
from mlprobe.doctor import parse as P
from mlprobe.doctor.rules import rule_rows
from mlprobe.model.doctor import DoctorResult, doctor_schema
from mlprobe.model.knowledge import table
from mlprobe.scan.capture import BundleError
from mlprobe.scan.host import ReplayHost

from .conftest import FIXTURES, fixture_dirs, ground_truth
from .fuzz import examples, mutated

CASES = [(d, ground_truth(d)["doctor"]) for d in fixture_dirs() if "doctor" in ground_truth(d)]


def diagnose(folder: Path) -> Dict[str, Any]:
    result = pipeline.doctor(ReplayHost(folder), source={"kind": "replay", "bundle": folder.name}, env={})
    doc: Dict[str, Any] = result.to_json()
    return doc


@contextlib.contextmanager
def streams() -> Iterator[Tuple[io.StringIO, io.StringIO]]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        yield out, err
    finally:
        sys.stdout, sys.stderr = old


def run(argv: List[str]) -> Tuple[int, str, str]:
    with streams() as (out, err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


# -- the fixtures ---------------------------------------------------------------------------------------


LIBRARY_RULES = {"library-two-places", "library-shadowed", "jax-cpu-after-other-import"}


@pytest.mark.parametrize("folder, expected", CASES, ids=[d.name for d, _ in CASES])
def test_fixture_diagnoses_to_its_ground_truth(folder: Path, expected: Dict[str, Any]) -> None:
    doc = diagnose(folder)
    jsonschema.Draft202012Validator(doctor_schema()).validate(doc)
    found = {f["rule"] for f in doc["findings"]}
    blocking = sorted({f["rule"] for f in doc["findings"] if f["severity"] == "blocking"})
    assert doc["verdict"] == expected["verdict"], doc["summary"]
    if "blocking" in expected:
        assert blocking == sorted(expected["blocking"]), doc["summary"]
    assert set(expected.get("found", [])) <= found, found
    if "fix_include" in expected:
        fixes = " ".join(line for f in doc["findings"] for line in f["fix"])
        assert expected["fix_include"] in fixes, fixes
    assert set(expected.get("environment", [])) <= set(doc["environment"]), doc["environment"]
    if "summary_include" in expected:
        assert expected["summary_include"] in doc["summary"]
    if expected.get("decided_all"):
        # the loaded-libraries rules need a capture kind these bundles were made before; every other
        # rule decides (a bundle of today's `mlprobe capture` carries loaded-libraries.json too)
        has_listing = any((folder / n).is_file() for n in ("loaded-libraries.json", "loaded-libraries.txt"))
        undecided = [r for r in doc["rules"] if r["outcome"] == "unknown"
                     and (has_listing or r["rule"] not in LIBRARY_RULES)]
        assert undecided == []
    for f in doc["findings"]:
        assert f["evidence"], f"{f['rule']} gave no evidence"
        assert f["source"].split(":")[0] in table("doctor")["source_key"]
        if f["severity"] == "blocking":
            assert f["fix"], f"{f['rule']} blocks without a fix"


def test_every_rule_is_shown_by_a_fixture() -> None:
    shown = set()
    for _, expected in CASES:
        shown |= set(expected.get("blocking", [])) | set(expected.get("found", []))
    missing = [r["id"] for r in rule_rows() if r["id"] not in shown]
    assert not missing, f"rules no fixture shows: {missing}"


def test_the_h200_with_a_cpu_torch_blocks_and_names_the_cu13x_index() -> None:
    doc = diagnose(FIXTURES / "synthetic-linux-nvidia-h200-torch-cpu-build")
    (f,) = [f for f in doc["findings"] if f["severity"] == "blocking"]
    assert f["rule"] == "torch-cpu-build" and "2.11.0+cpu" in f["title"] and "H200" in f["title"]
    assert any("https://download.pytorch.org/whl/cu13" in line for line in f["fix"])
    assert f["evidence"][0]["capture"] == "mlprobe-frameworks.json" and "2.11.0+cpu" in f["evidence"][0]["line"]
    real = diagnose(FIXTURES / "linux-nvidia-h200-mlprobe-capture")
    assert real["verdict"] == "ok" and not [x for x in real["findings"] if x["severity"] == "blocking"]


# -- the rules as data -----------------------------------------------------------------------------------


def test_the_pins_variable_for_uv_is_no_setting_a_python_start_needs() -> None:
    # The real H100 venv with the hook turned off: activate sets UV_CONSTRAINT for the shell's uv, a
    # Python start never reads it, so only the recipe's four settings are missing, not five.
    doc = diagnose(FIXTURES / "linux-nvidia-h100-plaidml-hook-off-capture")
    missing = sorted(f["title"].split()[0] for f in doc["findings"] if f["rule"] == "setting-missing-plain-start")
    assert missing == ["KERAS_BACKEND", "OCL_ICD_VENDORS", "PLAIDML_DEVICE_IDS", "PLAIDML_EXPERIMENTAL"]


def test_cusparselt_beside_cusparse_is_two_libraries_not_one_from_two_places() -> None:
    # The real H100 torch process maps libcusparseLt.so.0 (its own wheel) beside libcusparse.so.12.
    doc = diagnose(FIXTURES / "linux-nvidia-h100-torch-jax-loaded-libraries-capture")
    assert not [f for f in doc["findings"] if f["rule"] == "library-two-places"]
    doc = diagnose(FIXTURES / "linux-nvidia-h100-ld-preload-system-cudnn-graph-capture")
    two = [f["title"] for f in doc["findings"] if f["rule"] == "library-two-places"]
    assert len(two) == 1 and two[0].startswith("cuDNN ")


def test_every_rule_names_a_check_a_source_and_a_known_severity() -> None:
    doc = table("doctor")
    used = set()
    for row in rule_rows():
        assert row["test"] in C.CHECKS, row["id"]
        assert row["severity"] in ("blocking", "warning", "info"), row["id"]
        assert row["source"] in doc["source_key"], row["id"]
        used.add(row["test"])
    assert set(C.CHECKS) == used, f"checks no rule uses: {set(C.CHECKS) - used}"
    ids = [r["id"] for r in rule_rows()]
    assert len(ids) == len(set(ids))


def test_a_check_that_fails_costs_only_its_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(dc: Any, row: Any) -> Any:
        raise ValueError("odd capture")

    monkeypatch.setitem(C.CHECKS, "torch_cpu_build", boom)
    doc = diagnose(FIXTURES / "synthetic-linux-nvidia-h200-torch-cpu-build")
    outcome = next(r for r in doc["rules"] if r["rule"] == "torch-cpu-build")
    assert outcome["outcome"] == "unknown" and "ValueError" in outcome["why"]
    assert doc["verdict"] == "ok"  # the only blocking rule could not run; the others still did


# -- parsers ------------------------------------------------------------------------------------------------


def test_ls_l_reads_sections_full_paths_and_bare_names() -> None:
    text = ("/dev:\ncrw-rw---- 1 root render 509, 0 Aug 22 21:34 kfd\nlrwxrwxrwx 1 root root 13 Dec  4 03:50 fd -> /proc/self/fd\n"
            "\n/dev/dri:\ncrw-rw----+ 1 root video 226, 128 Aug 22 21:34 renderD128\n")
    nodes = {n.path: n for n in P.parse_ls_l(text)}
    assert nodes["/dev/kfd"].group == "render" and nodes["/dev/kfd"].kind == "c"
    assert nodes["/dev/dri/renderD128"].acl and nodes["/dev/fd"].kind == "l"
    pasted = P.parse_ls_l("user@box:~$ ls -l /dev/kfd\ncrw-rw-rw- 1 root render 235, 0 Apr  8 16:46 /dev/kfd\n")
    assert [n.path for n in pasted] == ["/dev/kfd"]
    bare = P.parse_ls_l("total 0\ncrw-rw---- 1 root render 226, 129 Aug 22 21:34 renderD129\n"
                        "drwxr-xr-x 2 root root 140 Aug 22 21:34 .\n")
    assert [n.path for n in bare] == ["/dev/dri/renderD129"]


def test_access_follows_owner_group_other_and_says_unknown_for_an_acl() -> None:
    ann = P.parse_id("uid=1000(ann) gid=1000(ann) groups=1000(ann),44(video)")
    assert ann is not None and ann.group_names() == ["ann", "video"]
    (kfd,) = P.parse_ls_l("crw-rw---- 1 root render 509, 0 Aug 22 21:34 /dev/kfd")
    (card,) = P.parse_ls_l("crw-rw---- 1 root video 226, 0 Aug 22 21:34 /dev/dri/card0")
    (acl,) = P.parse_ls_l("crw-rw----+ 1 root render 226, 128 Aug 22 21:34 /dev/dri/renderD128")
    (open_,) = P.parse_ls_l("crw-rw-rw- 1 root root 195, 0 Dec  2 10:00 /dev/nvidia0")
    assert kfd.allows(ann) is False and card.allows(ann) is True and open_.allows(ann) is True
    assert acl.allows(ann) is None  # logind's uaccess ACL may grant the seat's user more
    root = P.parse_id("uid=0(root) gid=0(root) groups=0(root)")
    assert root is not None and kfd.allows(root) is True
    groups = P.parse_id("rocm-user sudo video")
    assert groups is not None and groups.uid is None and kfd.allows(groups) is False
    by_number = P.parse_id("uid=1000 gid=1000 groups=1000,109")
    (num,) = P.parse_ls_l("crw-rw---- 1 0 109 509, 0 Aug 22 21:34 /dev/kfd")
    assert by_number is not None and num.allows(by_number) is True


@pytest.mark.parametrize("value, count, visible", [
    ("", 1, 0), ("-1", 2, 0), ("0", 2, 1), ("1,0", 2, 2), ("0,5,1", 3, 1), ("2", 2, 0),
    ("GPU-868df17e", 1, 1), ("NoDevFiles", 1, 0), (" 0 , 1 ", 4, 2),
])
def test_visible_device_lists_stop_at_the_first_entry_that_is_no_device(value: str, count: int, visible: int) -> None:
    assert C._visible(value, count, []) == visible


def test_ldconfig_and_override_names() -> None:
    cache = P.parse_ldconfig("2 libs found in cache `/etc/ld.so.cache'\n"
                             "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n")
    assert cache["libcuda.so.1"][0][0] == "/usr/lib/wsl/lib/libcuda.so.1"
    assert C._override_gfx("10.3.0") == "gfx1030" and C._override_gfx("9.0.10") == "gfx90a"
    assert C._override_gfx("11") is None


# -- the command -------------------------------------------------------------------------------------------


def test_json_fits_the_published_schema_and_the_exit_status_says_what_blocks() -> None:
    code, out, _ = run(["doctor", "--replay", str(FIXTURES / "synthetic-linux-nvidia-h200-torch-cpu-build"), "--json"])
    doc = json.loads(out)
    jsonschema.Draft202012Validator(doctor_schema()).validate(doc)
    assert code == 1 and doc["verdict"] == "blocking"
    assert DoctorResult.from_json(doc).to_json() == doc
    code, out, _ = run(["doctor", "--replay", str(FIXTURES / "linux-nvidia-h200-mlprobe-capture")])
    assert code == 0 and "Nothing blocks" in out
    code, out, _ = run(["schema", "doctor"])
    assert code == 0 and json.loads(out) == doctor_schema()


def test_the_terminal_shows_evidence_fix_and_source() -> None:
    code, out, _ = run(["doctor", "--replay", str(FIXTURES / "linux-nvidia-h200-cuda-visible-devices-empty-capture")])
    assert code == 1
    assert "BLOCKING" in out and "CUDA_VISIBLE_DEVICES=''" in out
    assert 'evidence (host.json): "CUDA_VISIBLE_DEVICES": ""' in out
    assert "fix: unset CUDA_VISIBLE_DEVICES" in out and "source: CUDA-ENV" in out


def test_python_and_replay_together_is_a_usage_error() -> None:
    code, out, err = run(["doctor", "--replay", str(FIXTURES / "linux-nvidia-h200-mlprobe-capture"), "--python",
                          sys.executable, "--json"])
    assert code == 2 and json.loads(out)["error"]["ref"] == "E301"
    code, _, err = run(["doctor", "--python", "/nonexistent/python"])
    assert code == 2 and "E601" in err


@pytest.mark.slow
def test_doctor_on_this_machine_says_what_this_machine_and_this_python_have() -> None:
    """Live, on whatever machine runs the tests: what it says is checked against what the test can see
    for itself (the frameworks this interpreter imports, the container marker), not against one
    machine's answer."""
    import importlib.metadata
    import importlib.util

    from mlprobe.doctor.enumerate import FRAMEWORKS
    from mlprobe.model.vocabulary import vocabulary

    code, out, _ = run(["doctor", "--json"])
    doc = json.loads(out)
    jsonschema.Draft202012Validator(doctor_schema()).validate(doc)
    assert doc["source"]["kind"] == "live" and os.path.samefile(doc["python"], sys.executable)
    assert code == (1 if doc["verdict"] == "blocking" else 0)
    assert doc["summary"].startswith("Nothing blocks") == (doc["verdict"] == "ok")
    importable = set()
    for name in FRAMEWORKS:  # the frameworks doctor asks: listed exactly when this Python imports them
        fw = vocabulary().framework(name)
        assert fw is not None
        with contextlib.suppress(ImportError, ValueError):
            if importlib.util.find_spec(fw.import_name) is not None:
                importable.add(name)
    listed = {f["name"]: f for f in doc["frameworks"]}
    assert set(listed) == importable
    for name, f in listed.items():
        if f["error"] is None:
            assert f["version"] == importlib.metadata.version(name) and any(d.startswith("cpu") for d in f["devices"])
    if os.path.exists("/.dockerenv"):
        assert "container-detected" in {f["rule"] for f in doc["findings"]}
        assert any("Docker container" in e for e in doc["environment"])


def test_a_report_carries_the_findings_and_replays_them(tmp_path: Path) -> None:
    folder = FIXTURES / "synthetic-linux-nvidia-h200-framework-sees-no-cuda"
    report = tmp_path / "report.json"
    code, _, _ = run(["report", "--replay", str(folder), "--include-raw", "-o", str(report)])
    assert code == 0
    doc = json.loads(report.read_text())
    assert doc["doctor"]["verdict"] == "blocking"
    assert {"visible-devices-hide-all", "framework-sees-no-gpu"} <= {f["rule"] for f in doc["doctor"]["findings"]}
    assert "framework-devices.json" in doc["capture_bundle"]["files"]
    code, out, _ = run(["doctor", "--replay", str(report), "--json"])
    again = json.loads(out)
    assert code == 1
    assert [f["rule"] for f in again["findings"]] == [f["rule"] for f in doc["doctor"]["findings"]]
    md = tmp_path / "report.md"
    assert run(["report", "--replay", str(folder), "-o", str(md)])[0] == 0
    text = md.read_text()
    assert "## Doctor" in text and "CUDA_VISIBLE_DEVICES" in text


# -- hostile captures ------------------------------------------------------------------------------------------

DOCTOR_CAPTURES = ("ls-l-dev.txt", "id.txt", "ldconfig-p.txt", "opencl-icd.json", "framework-devices.json",
                   "proc-1-cgroup.txt", "rocminfo.txt", "collect_env.txt", "host.json", "mlprobe-frameworks.json")
SEEDS = {
    "ls-l-dev.txt": (FIXTURES / "synthetic-linux-amd-render-group-missing" / "ls-l-dev.txt").read_text(),
    "id.txt": "uid=1000(ann) gid=1000(ann) groups=1000(ann),44(video)\n",
    "ldconfig-p.txt": (FIXTURES / "synthetic-linux-wsl2-nvidia-linux-driver-installed" / "ldconfig-p.txt").read_text(),
    "opencl-icd.json": (FIXTURES / "synthetic-linux-nvidia-h200-opencl-loaders-differ" / "opencl-icd.json").read_text(),
    "framework-devices.json": (FIXTURES / "synthetic-linux-nvidia-h200-framework-sees-no-cuda"
                               / "framework-devices.json").read_text(),
    "proc-1-cgroup.txt": "12:devices:/kubepods/besteffort/pod1\n0::/\n",
    "rocminfo.txt": (FIXTURES / "linux-amd-rx6750xt-gfx1031-with-igpu-gfx1036-rocminfo" / "rocminfo.txt").read_text(),
    "collect_env.txt": (FIXTURES / "darwin-apple-m2-pro-rosetta-python-collect-env" / "collect_env.txt").read_text(),
    "host.json": (FIXTURES / "synthetic-linux-nvidia-h200-framework-sees-no-cuda" / "host.json").read_text(),
    "mlprobe-frameworks.json": (FIXTURES / "synthetic-linux-nvidia-h200-torch-cpu-build"
                                / "mlprobe-frameworks.json").read_text(),
}
ODD_JSON = ['{"frameworks": [{"name": "torch", "info": [], "devices": {"a": 1}, "unavailable": "x"}]}',
            '{"loader": [{"name": 5}, "x"], "icd_files": {"a": 1}, "vendors_dir_exists": "yes"}', "[" * 5000, "null",
            '{"env": {"CUDA_VISIBLE_DEVICES": ["0"], "LD_LIBRARY_PATH": 5}}', '[{"name": "torch", "version": 2}]']


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(data=st.data())
def test_hostile_captures_never_crash_the_doctor(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    folder = tmp_path_factory.mktemp("hostile")
    shutil.copyfile(FIXTURES / "linux-nvidia-h200-mlprobe-capture" / "nvidia-smi-query.csv", folder / "nvidia-smi-query.csv")
    for name in data.draw(st.lists(st.sampled_from(DOCTOR_CAPTURES), min_size=1, max_size=5, unique=True)):
        text = data.draw(st.one_of(mutated(SEEDS[name]), st.sampled_from(ODD_JSON), st.text(max_size=200)))
        (folder / name).write_text(text, encoding="utf-8", errors="surrogateescape")
    try:
        host = ReplayHost(folder)
    except BundleError as exc:  # a host.json that is not JSON, or not an object, is refused with its own error
        assert "host.json" in str(exc)
        return
    result = pipeline.doctor(host, source={"kind": "replay"}, env={})
    doc = result.to_json()
    jsonschema.Draft202012Validator(doctor_schema()).validate(doc)
    crashed = [r for r in doc["rules"] if r["outcome"] == "unknown" and "check failed" in (r.get("why") or "")]
    assert not crashed, crashed


def test_a_second_check_under_a_taken_name_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe.doctor.checks._base import check

    first = C.CHECKS["torch_cpu_build"]
    monkeypatch.setitem(C.CHECKS, "torch_cpu_build", first)  # put back, should the guard be missing

    def torch_cpu_build(dc: Any, row: Any) -> Any:  # another check under the same name
        return []

    with pytest.raises(ValueError, match=r"'torch_cpu_build' is registered twice: "
                                         r"mlprobe\.doctor\.checks\.build\.torch_cpu_build and .*torch_cpu_build"):
        check("torch_cpu_build")(torch_cpu_build)
    assert C.CHECKS["torch_cpu_build"] is first  # the first one stays
    check("torch_cpu_build")(first)  # the same definition registered again is no second check
