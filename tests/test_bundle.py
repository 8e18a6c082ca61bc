"""`mlprobe bundle` and the pin and lock files, without the network: the readers and writers on
their own, and each refusal of `bundle` (a folder that is not empty, a report without Python tags,
no wheel for that machine), which must leave nothing behind. tests/test_bundle_registry.py makes a
real bundle through pip's configuration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from mlprobe.commands.bundle import parse_installed
from mlprobe.install import lock as locks
from mlprobe.install import pin as pins
from mlprobe.install.bundle import bundle_target, check_fits, missing_wheel

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "fixtures" / "linux-nvidia-h200-mlprobe-capture"
NO_TAGS = ROOT / "fixtures" / "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo"


def _bundle(args: List[str], cwd: Path) -> "subprocess.CompletedProcess[str]":
    env: Dict[str, str] = {**os.environ, "XDG_CACHE_HOME": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "mlprobe", "bundle", *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd)


def _left(cwd: Path) -> List[str]:
    return sorted(p.name for p in cwd.iterdir() if p.name != "cache")


# ---------------------------------------------------------------- pins ---------------------------

def test_pins_file_reads_back_what_was_written() -> None:
    written = [pins.Pin("torch", "2.13.0+cpu", "https://download.pytorch.org/whl/cpu"), pins.Pin("numpy", "2.2.6")]
    recipe, note, read = pins.parse_pins(pins.render_pins(written, "torch-cpu", "created"))
    assert (recipe, note, read) == ("torch-cpu", "created", written)


def test_pins_are_the_recipes_packages_and_every_labelled_build() -> None:
    installed = {"torch": ("torch", "2.13.0+cpu"), "torchvision": ("torchvision", "0.28.0+cpu"),
                 "numpy": ("numpy", "2.2.6"), "filelock": ("filelock", "3.20.0")}
    chosen = pins.choose_pins(["torch>=2", "not a requirement ((("], installed, "https://example.org/whl/cpu")
    assert [p.requirement for p in chosen] == ["torch==2.13.0+cpu", "torchvision==0.28.0+cpu"]
    assert {p.index for p in chosen} == {"https://example.org/whl/cpu"}


def test_constraint_files_of_pips_configuration_are_found() -> None:
    listing = ("global.cert='/etc/ssl/certs/ca.crt'\nglobal.constraint='/etc/pip/c.txt /etc/pip/d.txt'\n"
               ":env:.constraint='/tmp/x.txt'\n")
    assert pins.constraint_values(listing) == (["/etc/pip/c.txt", "/etc/pip/d.txt"], "/tmp/x.txt")
    assert pins.constraint_values("install.constraint='/a'\nglobal.constraint='/b'\n") == (["/a"], None)


def test_pip_conf_keeps_other_settings_and_gives_back_the_old_constraint() -> None:
    old = "[global]\ntimeout = 60\n\n[install]\nconstraint = /etc/c.txt\n"
    new = pins.pip_conf_with(old, ["/etc/c.txt", "file:///v/mlprobe-pins.txt"])
    assert "timeout = 60" in new and "constraint = /etc/c.txt file:///v/mlprobe-pins.txt" in new
    back = pins.pip_conf_without(new, "/etc/c.txt")
    assert back is not None and "constraint = /etc/c.txt\n" in back and "mlprobe-pins" not in back
    assert pins.pip_conf_without(pins.pip_conf_with(None, ["file:///v/p.txt"]), None) is None


def test_a_file_url_keeps_a_path_with_spaces_one_entry() -> None:
    url = pins.file_url(Path("/tmp/a b/mlprobe-pins.txt"))
    assert " " not in url and url.startswith("file:///")


# ---------------------------------------------------------------- locks --------------------------

def _entries() -> List[locks.LockEntry]:
    return [locks.LockEntry(name="Keras", version="2.2.4", filename="Keras-2.2.4-py2.py3-none-any.whl",
                            sha256="a" * 64, path="./Keras-2.2.4-py2.py3-none-any.whl", size=312537),
            locks.LockEntry(name="numpy", version="2.2.6", sha256="b" * 64, url="https://example.org/n.whl",
                            filename="numpy-2.2.6-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")]


def test_lock_toml_reads_back_through_tomllib_and_packaging() -> None:
    tricky = json.dumps({"title": 'quotes " and \\ backslashes, newline\n, tab\t, ünïcode, [brackets]'})
    lock = locks.build_lock(_entries(), requires_python="==3.12.*",
                            environments=['sys_platform == "linux"'], tool={"recommendation": tricky, "a.b": "c"})
    text = locks.dumps(lock)
    doc = locks.loads_toml(text)
    assert doc["lock-version"] == "1.0" and doc["packages"][0]["name"] == "keras"
    from packaging.pylock import Pylock

    again = Pylock.from_dict(doc)
    rec = locks.recommendation_of(again)
    assert again == lock and rec is not None and rec.title == json.loads(tricky)["title"]
    assert all(w.hashes["sha256"] for p in again.packages for w in p.wheels)


def test_a_lock_that_is_not_one_is_a_clear_error(tmp_path: Path) -> None:
    from mlprobe.errors import StageError

    for name, text in [("not-toml", "this is = = not toml"), ("no-version", 'created-by = "x"\npackages = []\n'),
                       ("v2", 'lock-version = "2.0"\ncreated-by = "x"\npackages = []\n')]:
        f = tmp_path / f"{name}.toml"
        f.write_text(text)
        with pytest.raises(StageError) as e:
            locks.read_lock(f)
        assert e.value.ref == "E532" and e.value.kind == "usage"


def test_selection_for_another_machine_names_the_tags() -> None:
    from mlprobe.errors import StageError

    lock = locks.build_lock(_entries()[1:], requires_python="==3.12.*")
    env = {"python_full_version": "3.12.3", "python_version": "3.12", "sys_platform": "linux",
           "platform_machine": "x86_64", "implementation_name": "cpython"}
    assert len(locks.select(lock, env, ["cp312-cp312-manylinux_2_17_x86_64"])) == 1
    with pytest.raises(StageError) as e:
        locks.select(lock, env, ["cp312-cp312-win_amd64"])
    assert e.value.ref == "E533" and "cp312-cp312-win_amd64" in e.value.why
    line = locks.hashed_requirements(locks.select(lock, env, ["cp312-cp312-manylinux2014_x86_64"]))
    assert line == [f"numpy==2.2.6 --hash=sha256:{'b' * 64}"]


# ---------------------------------------------------------------- bundle: pure -----------------

def test_the_target_is_the_reports_machine_not_this_one() -> None:
    from mlprobe import pipeline
    from mlprobe.scan.host import open_replay

    report = pipeline.scan_report(open_replay(str(H200)))
    t = bundle_target(report)
    assert t.python_version == "3.12.3" and t.platform == "manylinux_2_39_x86_64"
    assert "cp312-cp312-manylinux_2_39_x86_64" in t.tags and "cp311-cp311-manylinux_2_17_x86_64" not in t.tags
    args = t.pip_args()
    assert args[args.index("--python-version") + 1] == "3.12" and "--only-binary" in args
    assert check_fits("plaidml-0.7.0-py2.py3-none-manylinux1_x86_64.whl", t.tags)
    assert not check_fits("numpy-2.2.6-cp311-cp311-manylinux_2_17_x86_64.whl", t.tags)
    assert t.environment["sys_platform"] == "linux" and t.environment["python_version"] == "3.12"


def test_pips_no_match_message_names_the_package() -> None:
    out = ("ERROR: Could not find a version that satisfies the requirement plaidml==0.7.0 (from versions: none)\n"
           "ERROR: No matching distribution found for plaidml==0.7.0\n")
    assert missing_wheel(out) == "plaidml==0.7.0"
    assert missing_wheel("ERROR: ResolutionImpossible") is None


def test_installed_packages_are_read_from_pip_list_and_freeze() -> None:
    text = "Package    Version\n---------- -------\nnumpy      2.5.2\nPyYAML     6.0.3\n"
    assert parse_installed(text) == {"numpy": "2.5.2", "PyYAML": "6.0.3"}
    assert parse_installed("six==1.17.0\n-e git+https://x#egg=y\n") == {"six": "1.17.0"}
    assert parse_installed((H200 / "pip-list.txt").read_text())["scipy"] == "1.18.1"


# ---------------------------------------------------------------- bundle: refusals -------------

def test_a_folder_that_is_not_empty_is_refused_untouched(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    r = _bundle(["--replay", str(H200), "--recipe", "plaidml-keras", "-o", str(out)], tmp_path)
    assert r.returncode == 2 and "E536" in r.stderr and "not empty" in r.stderr, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"] and _left(tmp_path) == ["out"]


def test_a_report_without_python_tags_is_refused(tmp_path: Path) -> None:
    r = _bundle(["--replay", str(NO_TAGS), "--framework", "torch", "-o", str(tmp_path / "out")], tmp_path)
    assert r.returncode == 2 and "E535" in r.stderr and "no Python tags" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and _left(tmp_path) == []


def test_a_report_for_another_python_than_cpython_is_its_own_fault() -> None:
    """No Python tags is a usage error (E535: make the report there); a PyPy machine is one no bundle is
    made for (E548: nothing usable), each with its own reference."""
    from mlprobe.errors import StageError
    from mlprobe.model.facts import Facts, OsFacts, PythonFacts

    def facts(implementation: str, tags: Tuple[str, ...]) -> Facts:
        return Facts(os=OsFacts(system="Linux", glibc="2.39"),
                     python=PythonFacts(version="3.11.9", implementation=implementation, platform_tags=tags,
                                        machine="x86_64"))

    assert bundle_target(facts("CPython", ("cp311-cp311-manylinux_2_39_x86_64",))).major_minor == "3.11"
    for implementation, tags, ref, kind in (("PyPy", ("pp311-pypy311_pp73-manylinux_2_39_x86_64",), "E548",
                                             "unavailable"), ("CPython", (), "E535", "usage")):
        with pytest.raises(StageError) as e:
            bundle_target(facts(implementation, tags))
        assert (e.value.ref, e.value.kind) == (ref, kind)


def test_no_pip_to_drive_the_target_is_its_own_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    from mlprobe.errors import StageError
    from mlprobe.install import backends

    monkeypatch.setattr(backends, "_pip_version_tuple", lambda: (21, 0))
    assert backends.pip_command("/some/python", True) == ["/some/python", "-m", "pip"]
    with pytest.raises(StageError) as e:
        backends.pip_command("/some/python", False)
    assert (e.value.ref, e.value.kind) == ("E550", "unavailable") and "ensurepip" in (e.value.next_step or "")


def test_no_wheel_for_that_machine_names_the_package_and_tags_and_leaves_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "wheels"
    empty.mkdir()
    r = _bundle(["--replay", str(H200), "--recipe", "plaidml-keras", "-o", str(tmp_path / "out"),
                 "--no-index", "--find-links", str(empty)], tmp_path)
    assert r.returncode == 3, r.stderr
    assert "E537" in r.stderr and "plaidml-keras==0.7.0" in r.stderr and "manylinux_2_39_x86_64" in r.stderr
    assert "cp312-cp312" in r.stderr and _left(tmp_path) == ["wheels"]


def test_a_recipe_or_framework_is_required(tmp_path: Path) -> None:
    r = _bundle(["--replay", str(H200), "-o", str(tmp_path / "out")], tmp_path)
    assert r.returncode == 2 and "E538" in r.stderr


def test_a_lock_made_for_another_machine_uses_this_machines_device(tmp_path: Path) -> None:
    """A bundle carries the device the recipe chose on the machine it was made for (the H200's OpenCL
    id); installed on another machine, the device comes from this machine's own plan of the same
    recipe, and the change is said. (Found on a GPU machine of another model: the device check
    refused the H200's id although PlaidML listed that machine's GPU.)"""
    from mlprobe.commands.install import _device_of_this_machine
    from mlprobe.model.plan import Recommendation
    from mlprobe.pipeline import plan, scan_report
    from mlprobe.scan.host import ReplayHost

    def entry(bundle: Path) -> Recommendation:
        return next(r for r in plan(scan_report(ReplayHost(bundle)), framework="keras", env={}).recommended
                    if r.recipe == "plaidml-keras")

    rec = entry(H200)
    assert rec.device == "opencl_nvidia_nvidia_h200.0"

    class Args:
        replay = str(ROOT / "fixtures" / "linux-intel-hd-graphics-haswell-intel-sdk-clinfo")

    here = _device_of_this_machine(rec, Args())  # type: ignore[arg-type]
    other = entry(Path(Args.replay))
    assert here.device == other.device != rec.device
    assert here.env["PLAIDML_DEVICE_IDS"] == other.device and here.verify.device == other.device
    assert here.packages == rec.packages
    assert any("the lock was made for NVIDIA H200" in n for n in here.notes)
    assert _device_of_this_machine(other, Args()) is other  # type: ignore[arg-type]
