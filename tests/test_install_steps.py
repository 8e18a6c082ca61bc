"""Recommendation -> steps, where packages come from, pip's failures read into errors, build variant
pins, activate scripts, and the small pieces of the installer (no network but 127.0.0.1)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator

import pytest
from hypothesis import given, settings, strategies as st

from mlprobe.errors import ParseError, StageError, exit_status
from mlprobe.venvconf import activate
from mlprobe.install.backends import Sources, choose_backend, pip_command, pip_env, source_args
from mlprobe.install.proc import Transcript
from mlprobe.install.resolve import (
    classify_failure,
    needs_variant,
    own_python_check,
    parse_index_versions,
    parse_pip_report,
    pick_variant,
    pin_variants,
)
from mlprobe.model.plan import Recommendation
from mlprobe.install.steps import InstallOptions, build_plan, pick_recommendation
from mlprobe.install.venv import Interpreter, check_system_target, check_venv_target, venv_state
from tests.pep503_server import LocalIndex, build_wheel
from tests.fuzz import examples

# What `mlprobe plan` gives for this machine's torch CPU recipe (index URL left to the data).
PLAN_REC = {
    "recipe": "torch-cpu", "title": "PyTorch, CPU build", "framework": "torch", "backend": "cpu",
    "index": "cpu", "index_url": None, "packages": ["torch"], "env": {}, "files": [], "steps": [],
    "commands": ["python -m pip install torch --index-url <pytorch-index>/cpu"],
    "verify": {"framework": "torch", "device": "cpu"}, "warnings": [], "device": "cpu",
}


# ---------------------------------------------------------------- recommendation -> plan ------

def test_plan_from_a_real_recommendation_without_index_url() -> None:
    # A recommendation that names a build index but carries no URL for it is refused: mlprobe
    # never falls back to pip's own configuration without being told to.
    with pytest.raises(StageError) as e:
        build_plan(Recommendation.from_json(PLAN_REC), InstallOptions())
    assert e.value.ref == "E518" and exit_status(e.value.kind) == 2
    for option in ("--index-url", "--find-links", "--use-pip-config"):
        assert option in (e.value.next_step or "")
    plan = build_plan(Recommendation.from_json(PLAN_REC), InstallOptions(use_pip_config=True))
    assert plan.recipe == "torch-cpu" and plan.packages == ["torch"] and plan.imports == ["torch"]
    assert plan.variant_label == "cpu" and plan.recipe_index_url is None  # the placeholder is no URL
    assert plan.sources.origin == "pip configuration"
    assert plan.device == "cpu"


def test_a_prerequisite_is_said_before_the_install() -> None:
    # torch-npu without CANN: the toolkit the wheels do not bring is the first thing install says
    rec = dict(PLAN_REC, index_url="http://127.0.0.1:9/whl/cpu", warnings=["w"],
               prerequisites=["install the CANN toolkit, CANN 9.0"])
    plan = build_plan(Recommendation.from_json(rec), InstallOptions())
    assert plan.warnings == ["before this install: install the CANN toolkit, CANN 9.0", "w"]


def test_recipe_index_url_is_used_and_isolated() -> None:
    rec = dict(PLAN_REC, index_url="http://127.0.0.1:9/whl/cpu")
    plan = build_plan(Recommendation.from_json(rec), InstallOptions())
    assert plan.sources == Sources(index_url="http://127.0.0.1:9/whl/cpu", origin="recipe")
    assert source_args(plan.sources) == ["--index-url", "http://127.0.0.1:9/whl/cpu"]
    env = pip_env(plan.sources)
    assert env["PIP_FIND_LINKS"].split() == [] and env["PIP_EXTRA_INDEX_URL"].split() == []


def test_the_index_url_comes_from_the_typed_plan_never_from_the_printed_commands() -> None:
    rec = dict(PLAN_REC, commands=["pip install torch --index-url http://127.0.0.1:9/whl/cu126"], index="cu126")
    with pytest.raises(StageError) as e:
        build_plan(Recommendation.from_json(rec), InstallOptions())
    assert e.value.ref == "E518"
    rec = dict(rec, index_url="http://127.0.0.1:9/whl/cu126")
    plan = build_plan(Recommendation.from_json(rec), InstallOptions())
    assert plan.variant_label == "cu126" and plan.sources.index_url == "http://127.0.0.1:9/whl/cu126"


def test_user_sources_override_the_recipe() -> None:
    rec = dict(PLAN_REC, index_url="http://127.0.0.1:9/whl/cpu")
    s = build_plan(Recommendation.from_json(rec), InstallOptions(index_url="http://mirror.invalid/simple")).sources
    assert s.index_url == "http://mirror.invalid/simple" and s.origin == "--index-url"
    w = str(Path(__file__).parent)
    s = build_plan(Recommendation.from_json(rec), InstallOptions(use_pip_config=True, find_links=(w,))).sources
    assert s.use_pip_config and s.origin == "pip configuration" and source_args(s) == ["--find-links", w]
    assert "PIP_FIND_LINKS" not in pip_env(s) or pip_env(s)["PIP_FIND_LINKS"] == os.environ.get("PIP_FIND_LINKS")
    s = build_plan(Recommendation.from_json(rec), InstallOptions(no_index=True, find_links=(w,))).sources
    assert source_args(s) == ["--no-index", "--find-links", w]
    with pytest.raises(StageError) as e:
        build_plan(Recommendation.from_json(rec), InstallOptions(no_index=True))
    assert e.value.ref == "E523"
    with pytest.raises(StageError):
        build_plan(Recommendation.from_json(rec), InstallOptions(use_pip_config=True, index_url="http://x.invalid/"))


def test_env_files_and_shims() -> None:
    rec = {"recipe": "plaidml-keras", "framework": "keras", "packages": ["plaidml-keras==0.7.0"],
           "env": {"PLAIDML_DEVICE_IDS": "opencl_amd_ellesmere.0"},
           "files": [{"path": "plaidml.json", "json": {"PLAIDML_DEVICE_IDS": ["opencl_amd_ellesmere.0"]}}],
           "steps": [{"shim": "plaidml-collections", "why": "Keras 2.2.4 on Python >= 3.10"}]}
    plan = build_plan(Recommendation.from_json(rec), InstallOptions())
    assert plan.shims == ["plaidml-collections"] and plan.env == {"PLAIDML_DEVICE_IDS": "opencl_amd_ellesmere.0"}
    assert json.loads(plan.config_files[0]["content"]) == {"PLAIDML_DEVICE_IDS": ["opencl_amd_ellesmere.0"]}
    assert plan.sources.origin == "default index" and plan.variant_label is None
    # A recipe from the Python Package Index: pip's default index, named, and pip's configured
    # sources set aside like for any recipe (a configured index-url cannot replace it silently).
    assert plan.sources.index_url and plan.sources.index_url.startswith("https://")
    assert source_args(plan.sources)[:2] == ["--index-url", plan.sources.index_url]
    assert "Python Package Index" in plan.sources.describe()


@pytest.mark.parametrize("url,ok", [
    ("https://mirror.example/whl", True), ("http://127.0.0.1:8080/whl/", True), ("file:///srv/whl", True),
    ("ftp://mirror.example/whl", False), ("mirror.example/whl", False), ("<pytorch-index>/cpu", False),
    ("https:///whl", False), ("http://host:notaport/whl", False), ("", False), ("https://a b/whl", False),
    ("javascript:alert(1)", False), ("http://[::1/whl", False),
])
def test_index_urls_from_the_command_line_are_checked(url: str, ok: bool) -> None:
    from mlprobe.urls import check_url

    if ok:
        assert check_url(url, "--index-url") == url.rstrip("/")
        return
    from mlprobe.commands.advice import advice
    from mlprobe.urls import BadIndexLocation

    with pytest.raises(BadIndexLocation) as e:
        check_url(url, "--index-url")
    shown = advice(e.value)
    assert shown.ref == "E517" and shown.exit_code == 2 and "--index-url" in shown.what


def test_missing_file_index_and_find_links_folder_are_usage_errors(tmp_path: Path) -> None:
    rec = dict(PLAN_REC, index_url="http://127.0.0.1:9/whl/cpu")
    for opts in (InstallOptions(index_url=(tmp_path / "nope").as_uri()),
                 InstallOptions(find_links=(str(tmp_path / "nope"),)),
                 InstallOptions(extra_index_urls=("ftp://x/y",))):
        from mlprobe.commands.advice import advice
        from mlprobe.urls import BadIndexLocation

        with pytest.raises((BadIndexLocation, StageError)) as e:
            build_plan(Recommendation.from_json(rec), opts)
        shown = advice(e.value)
        assert shown.ref == "E517" and shown.exit_code == 2
    assert build_plan(Recommendation.from_json(rec), InstallOptions(index_url=tmp_path.as_uri())).sources.index_url == tmp_path.as_uri()
    (tmp_path / "a-file").write_text("x")
    with pytest.raises((BadIndexLocation, StageError)) as e:
        build_plan(Recommendation.from_json(rec), InstallOptions(index_url=(tmp_path / "a-file").as_uri()))
    shown = advice(e.value) if isinstance(e.value, BadIndexLocation) else e.value
    assert "a file, not a folder" in shown.what  # it said "a folder that does not exist"


def test_a_file_index_without_the_project_is_not_called_http_404(tmp_path: Path) -> None:
    from mlprobe.install.index import check_index, running_target

    c = check_index(tmp_path.as_uri(), "demo-app", running_target())
    assert not c.ok and c.ref == "E502"
    assert "HTTP" not in c.message and "has no folder demo-app" in c.message


def test_pick_recommendation() -> None:
    plan = {"recommended": [PLAN_REC, dict(PLAN_REC, recipe="torch-cuda")],
            "rejected": [{"recipe": "torch-rocm", "reasons": ["no AMD GPU"]}]}
    assert pick_recommendation(plan, None).recipe == "torch-cpu"
    assert pick_recommendation(plan, "torch-cuda").recipe == "torch-cuda"
    with pytest.raises(StageError) as e:
        pick_recommendation(plan, "torch-rocm")
    assert "no AMD GPU" in (e.value.why or "")
    with pytest.raises(StageError) as e:
        pick_recommendation(plan, "nope")
    assert "torch-cpu" in (e.value.why or "")
    with pytest.raises(StageError):
        pick_recommendation({"recommended": []}, None)


# ---------------------------------------------------------------- sources through real pip ---

@pytest.mark.slow
def test_isolation_from_pip_configuration_with_real_pip(tmp_path: Path) -> None:
    """PIP_FIND_LINKS offers goodlib 3.0; the recipe's index only 1.0. Isolated, pip sees 1.0; with
    --use-pip-config it sees both."""
    served, extra = tmp_path / "served", tmp_path / "extra"
    build_wheel(served, "goodlib", "1.0")
    build_wheel(extra, "goodlib", "3.0")
    base = dict(os.environ, PIP_FIND_LINKS=str(extra))
    with LocalIndex(served, max_requests=50, lifetime_s=60) as idx:
        def versions(s: Sources) -> str:
            env = {**pip_env(s), "PIP_FIND_LINKS": base["PIP_FIND_LINKS"]} if s.use_pip_config else \
                {**base, **{k: v for k, v in pip_env(s).items() if k.startswith("PIP_")}}
            cp = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "goodlib", *source_args(s)],
                                capture_output=True, text=True, timeout=120, env=env)
            return cp.stdout
        assert "3.0" not in versions(Sources(index_url=idx.url, origin="recipe"))
        assert "1.0" in versions(Sources(index_url=idx.url, origin="recipe"))
        both = versions(Sources(index_url=idx.url, use_pip_config=True, origin="pip configuration"))
        assert "3.0" in both


def test_variant_pin_through_pip_sources(tmp_path: Path) -> None:
    folder = tmp_path / "w"
    build_wheel(folder, "torch", "2.13.0+cpu")
    build_wheel(folder, "torch", "2.14.1")
    s = Sources(no_index=True, find_links=(str(folder),), origin="--find-links")
    pinned, notes = pin_variants([sys.executable, "-m", "pip"], ["torch", "numpy>=1"], "cpu", s)
    assert pinned == ["torch==2.13.0+cpu", "numpy>=1"] and "2.13.0+cpu" in notes[0]
    with pytest.raises(StageError) as e:
        pin_variants([sys.executable, "-m", "pip"], ["torch"], "cu126", s)
    assert e.value.ref == "E514" and "+cu126" in e.value.what


def test_pick_variant_and_needs_variant() -> None:
    versions = ["2.15.0", "2.14.1", "2.14.0+cpu", "2.13.0+cpu", "2.13.0+cu126", "bad version"]
    assert pick_variant(versions, "torch", "cpu") == "2.14.0+cpu"
    assert pick_variant(versions, "torch<2.14", "cpu") == "2.13.0+cpu"
    assert pick_variant(versions, "torch", "cu126") == "2.13.0+cu126"
    assert pick_variant(versions, "torch", "rocm6.2") is None
    assert needs_variant("torch") and needs_variant("torchvision>=0.2")
    assert not needs_variant("torch==2.13.0+cpu") and not needs_variant("numpy")


def test_parse_index_versions() -> None:
    text = "torch (2.15.0)\nAvailable versions: 2.15.0, 2.13.0+cpu, 2.13.0\n  INSTALLED: 2.13.0+cpu\n"
    assert parse_index_versions(text) == ["2.15.0", "2.13.0+cpu", "2.13.0"]
    with pytest.raises(ParseError):
        parse_index_versions("ERROR: No matching distribution found for torch")


# ---------------------------------------------------------------- pip's failures -------------

FAILURES: Dict[str, str] = {
    "conflict": "ERROR: Cannot install conflict-a==1.0 and conflict-b==1.0 because these package versions have "
                "conflicting dependencies.\nERROR: ResolutionImpossible: for help visit https://x/",
    "404": "ERROR: HTTP error 404 while getting http://127.0.0.1:1/files/gone_lib-1.0-py3-none-any.whl\n"
           "ERROR: 404 Client Error: Not Found for url: http://127.0.0.1:1/files/gone_lib-1.0-py3-none-any.whl",
    "down": "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after "
            "connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPConnection object>: "
            "Failed to establish a new connection: [Errno 111] Connection refused')': /simple/demo-app/\n"
            "ERROR: Could not find a version that satisfies the requirement demo-app (from versions: none)\n"
            "ERROR: No matching distribution found for demo-app",
    "missing": "ERROR: Could not find a version that satisfies the requirement incompat-lib (from versions: "
               "none)\nERROR: No matching distribution found for incompat-lib",
    "broken": "Installing collected packages: goodlib, brokenlib\nTraceback (most recent call last):\n"
              "zipfile.BadZipFile: Bad CRC-32 for file 'brokenlib/__init__.py'",
    "pep668": "error: externally-managed-environment\n\n× This environment is externally managed",
    "cancel": "ERROR: Operation cancelled by user",
    "uv-conflict": "  × No solution found when resolving dependencies:\n  ╰─▶ Because conflict-a==1.0 depends on "
                   "goodlib==1.0 and conflict-b==1.0 depends on goodlib==2.0, we can conclude ...",
}


@pytest.mark.parametrize("name,kind,ref", [
    ("conflict", "conflict", "E504"), ("404", "not-found", "E502"), ("down", "network", "E501"),
    ("missing", "not-found", "E503"), ("broken", "broken", "E505"), ("pep668", "externally-managed", "E508"),
    ("cancel", "interrupted", "E507"), ("uv-conflict", "conflict", "E504"),
])
def test_classify_failure(name: str, kind: str, ref: str) -> None:
    f = classify_failure(FAILURES[name], "pip", "installing")
    assert (f.kind, f.ref) == (kind, ref)
    assert f.what and f.next_step
    err = f.to_error()
    assert err.render().startswith(f"error [{ref}]")


@settings(max_examples=examples(60), deadline=None)
@given(text=st.text(max_size=400))
def test_classify_failure_never_raises(text: str) -> None:
    f = classify_failure(text)
    assert f.ref.startswith("E5")


# ---------------------------------------------------------------- pip's report ---------------

@pytest.fixture(scope="module")
def real_report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A report from real pip against the local index."""
    folder = tmp_path_factory.mktemp("w")
    build_wheel(folder, "goodlib", "2.0")
    build_wheel(folder, "demo-app", "1.0", requires=["goodlib>=2"])
    cp = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--report", "-",
                         "--quiet", "--no-index", "--find-links", str(folder), "demo-app"],
                        capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, PIP_FIND_LINKS=" ", PIP_EXTRA_INDEX_URL=" "))
    assert cp.returncode == 0, cp.stderr
    yield cp.stdout


def test_parse_pip_report(real_report: str) -> None:
    dists = parse_pip_report(real_report)
    assert {(d.name, d.version) for d in dists} == {("demo-app", "1.0"), ("goodlib", "2.0")}
    assert [d.name for d in dists if d.requested] == ["demo-app"]
    assert all(d.url and d.url.startswith("file:") and d.filename for d in dists)


@settings(max_examples=examples(80), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), cut=st.floats(0, 1), how=st.sampled_from(["cut", "insert", "prompt"]))
def test_fuzz_pip_report(real_report: str, seed: int, cut: float, how: str) -> None:
    n = len(parse_pip_report(real_report))
    rnd = random.Random(seed)
    if how == "cut":
        text = real_report[: int(len(real_report) * cut)]
    elif how == "insert":
        at = rnd.randrange(len(real_report))
        text = real_report[:at] + chr(rnd.randrange(32, 0x250)) + real_report[at:]
    else:
        text = "user@host:~$ pip install --dry-run --report - demo-app\n" + real_report
    try:
        assert len(parse_pip_report(text)) <= n
    except ParseError:
        pass


# ---------------------------------------------------------------- activate scripts -----------

def test_activate_scripts_in_a_real_venv(tmp_path: Path) -> None:
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    scripts = venv / "bin"
    original = {p.name: p.read_bytes() for p in activate.activate_scripts(scripts)}
    env = {"HSA_OVERRIDE_GFX_VERSION": "10.3.0", "PLAIDML_DEVICE_IDS": "metal_amd_radeon_pro_5600m.0 it's"}
    written = activate.write_env(scripts, env)
    assert {p.name for p in written} == set(original)
    assert activate.write_env(scripts, env) == []  # idempotent
    # every flavour reads back what was written
    for p in activate.activate_scripts(scripts):
        if p.name != "deactivate.bat":
            assert activate.parse_block(p.name, p.read_text()) == env, p.name
    # a value the person set before activating wins; deactivate unsets only what activate set
    sh = (f"export HSA_OVERRIDE_GFX_VERSION=mine; . {venv}/bin/activate; echo \"[$HSA_OVERRIDE_GFX_VERSION]"
          f"[$PLAIDML_DEVICE_IDS]\"; deactivate; echo \"[$HSA_OVERRIDE_GFX_VERSION][${{PLAIDML_DEVICE_IDS-unset}}]\"")
    for shell in ("bash", "dash"):
        if not shutil.which(shell):
            continue
        out = subprocess.run([shell, "-c", sh], capture_output=True, text=True, timeout=30).stdout.splitlines()
        assert out == ["[mine][metal_amd_radeon_pro_5600m.0 it's]", "[mine][unset]"], shell
    unset = f". {venv}/bin/activate; echo \"[$HSA_OVERRIDE_GFX_VERSION]\"; deactivate; echo \"[${{HSA_OVERRIDE_GFX_VERSION-unset}}]\""
    out = subprocess.run(["bash", "-c", unset], capture_output=True, text=True, timeout=30,
                         env={k: v for k, v in os.environ.items() if k != "HSA_OVERRIDE_GFX_VERSION"}).stdout
    assert out.splitlines() == ["[10.3.0]", "[unset]"]
    ps1 = (scripts / "Activate.ps1").read_text()
    if "# SIG # Begin signature block" in ps1:
        assert ps1.index("$env:HSA_OVERRIDE_GFX_VERSION") < ps1.index("# SIG # Begin signature block")
    if shutil.which("fish"):
        fish = subprocess.run(["fish", "-c", f"set -gx HSA_OVERRIDE_GFX_VERSION mine; source {venv}/bin/activate.fish; "
                               "echo $HSA_OVERRIDE_GFX_VERSION $PLAIDML_DEVICE_IDS; deactivate; "
                               "echo $HSA_OVERRIDE_GFX_VERSION (set -q PLAIDML_DEVICE_IDS; or echo unset)"],
                              capture_output=True, text=True, timeout=30)
        assert fish.stdout.splitlines() == ["mine metal_amd_radeon_pro_5600m.0 it's", "mine unset"], fish.stderr
    if shutil.which("tcsh"):
        csh = subprocess.run(["tcsh", "-f", "-c", f"set prompt=; setenv HSA_OVERRIDE_GFX_VERSION mine; source {venv}/bin/activate.csh; "
                              'echo "$HSA_OVERRIDE_GFX_VERSION|$PLAIDML_DEVICE_IDS"'],
                             capture_output=True, text=True, timeout=30)
        assert csh.stdout.strip() == "mine|metal_amd_radeon_pro_5600m.0 it's", csh.stderr
    activate.write_env(scripts, {})
    assert {p.name: p.read_bytes() for p in activate.activate_scripts(scripts)} == original


def test_windows_scripts_render() -> None:
    out = activate.render_scripts({"HSA_OVERRIDE_GFX_VERSION": "10.3.0", "P": "50%"},
                                  {"activate.bat": "@echo off\r\nset VIRTUAL_ENV=C:\\v\r\n",
                                   "deactivate.bat": "@echo off\r\n"})
    assert 'if defined _MLPROBE_SET_HSA_OVERRIDE_GFX_VERSION set "HSA_OVERRIDE_GFX_VERSION=10.3.0"' in out["activate.bat"]
    assert "\r\n" in out["activate.bat"] and 'set "P=50%%"' in out["activate.bat"]
    assert 'set "HSA_OVERRIDE_GFX_VERSION="' in out["deactivate.bat"]
    assert activate.parse_block("activate.bat", out["activate.bat"]) == {"HSA_OVERRIDE_GFX_VERSION": "10.3.0", "P": "50%"}
    with pytest.raises(StageError):
        activate.check_names({"BAD NAME": "x"})


@pytest.mark.parametrize("value", ["two\nlines", "a\rb", 'say "hi"', "nul\x00"])
def test_a_value_no_script_can_hold_is_refused_before_anything_is_written(tmp_path: Path, value: str) -> None:
    scripts = tmp_path / "bin"
    scripts.mkdir()
    (scripts / "activate").write_text("deactivate () {\n    :\n}\n")
    before = (scripts / "activate").read_bytes()
    with pytest.raises(StageError) as e:
        activate.write_env(scripts, {"OK_VAR": "fine", "DEMO_MODE": value})
    assert e.value.ref == "E560" and "DEMO_MODE" in e.value.what
    assert (scripts / "activate").read_bytes() == before


# ---------------------------------------------------------------- small pieces ---------------

def _interp(**kw: object) -> Interpreter:
    base = dict(executable="/usr/bin/python3", version="3.12.3", implementation="cpython", prefix="/usr",
                base_prefix="/usr", in_venv=False, externally_managed=False, stdlib="/usr/lib/python3.12",
                purelib="/usr/lib/python3/dist-packages", platlib="/usr/lib/python3/dist-packages",
                scripts="/usr/bin", has_pip=False)
    base.update(kw)
    return Interpreter(**base)  # type: ignore[arg-type]


def test_pep668_system_interpreter_is_refused() -> None:
    with pytest.raises(StageError) as e:
        check_system_target(_interp(externally_managed=True))
    assert e.value.ref == "E508" and "--venv" in (e.value.next_step or "")
    check_system_target(_interp())


def test_venv_states(tmp_path: Path) -> None:
    assert venv_state(tmp_path / "nope") == "missing"
    (tmp_path / "empty").mkdir()
    assert venv_state(tmp_path / "empty") == "empty"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x").write_text("x")
    with pytest.raises(StageError) as e:
        check_venv_target(tmp_path / "other")
    assert e.value.ref == "E509"


def test_pip_command_for_a_venv_never_targets_this_interpreter(tmp_path: Path) -> None:
    venv_py = tmp_path / "v" / "bin" / "python"
    venv_py.parent.mkdir(parents=True)
    os.symlink(sys.executable, venv_py)  # like a venv: a link to the base interpreter
    cmd = pip_command(str(venv_py), target_has_pip=False)
    assert cmd[-2:] == ["--python", str(venv_py)]
    assert pip_command(str(venv_py), target_has_pip=True) == [str(venv_py), "-m", "pip"]
    b = choose_backend("pip", Sources(origin="recipe"), str(venv_py), False)
    assert b.name == "pip" and str(venv_py) in b.install_argv(["x"], Sources(origin="recipe"))


def test_transcript_without_path_writes_nothing(tmp_path: Path) -> None:
    t = Transcript(None)
    t.note("hello")
    t.close()
    t2 = Transcript(tmp_path / "logs" / "a.log")
    t2.note("hello")
    t2.close()
    assert "hello" in (tmp_path / "logs" / "a.log").read_text()


def test_every_recommendation_of_every_fixture_plan_round_trips_through_the_typed_contract() -> None:
    """The planner writes exactly what model/plan.Recommendation holds: from_json(...).to_json()
    gives back every key of every recommended entry in the golden plans."""
    from tests.golden_cases import COMMANDS, bundles, expected

    assert "plan" in COMMANDS
    n = 0
    for bundle in bundles():
        for entry in expected("plan", bundle)["output"]["recommended"]:
            assert Recommendation.from_json(entry).to_json() == entry, (bundle, entry["recipe"])
            n += 1
    assert n > 100


def test_a_recommendation_with_a_wrong_field_type_is_a_clear_error() -> None:
    from mlprobe.model.plan import ContractError

    with pytest.raises(ContractError):
        Recommendation.from_json({"recipe": "x", "packages": "torch", "env": ["not", "an", "object"]})
    with pytest.raises(ContractError):
        Recommendation.from_json({"recipe": "x", "packages": [1, 2]})


def test_a_pip_that_checks_its_own_python_is_named_not_called_incompatible() -> None:
    # pip 23.2.1's words (a dry run with --python-version 3.12, run by Python 3.11.7, for jax 0.11.2)
    out = ("WARNING: Location 'file:///opt/x/simple/jax/' is ignored: it is neither a file nor a directory.\n"
           "ERROR: Package 'jax' requires a different Python: 3.11.7 not in '>=3.12'\n")
    f = own_python_check(out, "3.12")
    assert f is not None and f.ref == "E522" and f.kind == "pip-too-old"
    assert "3.11" in f.what and "3.12" in f.what and "pip>=23.3" in f.next_step
    # the same words for the Python that runs pip are a real mismatch: left to classify_failure
    assert own_python_check(out, "3.11") is None
    assert own_python_check(out, None) is None
    # pip >= 23.3 names the target version; a real mismatch for the target is not pip's fault
    newer = "ERROR: Packages require a different Python. 3.9.0 not in: '>=3.12'\n"
    assert own_python_check(newer, "3.9") is None
