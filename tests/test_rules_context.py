"""The rules context is derived from the scan's typed Facts, so adding a fact is two edits: the field
on its facts record (model/facts.py) and its line in knowledge/registry.json (`facts`). Nothing in
plan/ lists the fields of the records the context carries whole (the OS, the GPUs)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import pytest

from mlprobe.model.context import RulesContext
from mlprobe.model.contract import contract
from mlprobe.model.facts import Facts, GpuFacts, OsFacts
from mlprobe.model.knowledge import Row
from mlprobe.model.vocabulary import vocabulary
from mlprobe.plan.conditions import evaluate, fmt, lookup
from mlprobe.plan.context import derive
from mlprobe.recipes import check_names, knowledge
from mlprobe.scan.host import ReplayHost
from mlprobe.scan.run import scan

from .conftest import FIXTURES

BUNDLES = ["linux-nvidia-h200-mlprobe-capture", "linux-amd-rx6700xt-gfx1031-hsa-override-rocminfo",
           "darwin-apple-m4-max-sysctl", "windows-nvidia-rtx3090-dxdiag"]


def _ctx(bundle: str) -> "tuple[Facts, RulesContext]":
    facts = scan(ReplayHost(FIXTURES / bundle))
    return facts, derive(facts, knowledge())


@pytest.mark.parametrize("bundle", BUNDLES)
def test_every_gpu_field_reaches_the_context(bundle: str) -> None:
    """The context's GPUs are the scan's GpuFacts, every field of them (a field added to GpuFacts is
    there with no edit in plan/), and the vendor groups are drawn from the same records."""
    facts, ctx = _ctx(bundle)
    assert ctx.gpus == facts.gpus
    for mine, theirs in zip(ctx.gpus, facts.gpus):
        for f in dataclasses.fields(GpuFacts):
            assert getattr(mine, f.name) == getattr(theirs, f.name), f.name
    for group in (ctx.intel.gpus, ctx.directml.gpus, ctx.ascend.npus):
        assert all(any(g is s for s in facts.gpus) for g in group)


@pytest.mark.parametrize("bundle", BUNDLES)
def test_every_os_field_reaches_the_conditions(bundle: str) -> None:
    """`os.<field>` reads the scan's OsFacts (the system inferred where the capture lacks it)."""
    facts, ctx = _ctx(bundle)
    for f in dataclasses.fields(OsFacts):
        if f.name != "system":
            assert lookup(ctx, f"os.{f.name}") == getattr(facts.os, f.name), f.name


@contract
class _OsWithSecureBoot(OsFacts):
    """OsFacts with one more field, as a new fact would add it."""

    secure_boot: Optional[bool] = None


def test_a_new_fact_is_two_edits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A field on a facts record (here a subclass standing for the edited OsFacts) plus its line in the
    registry's `facts` (patched here): a recipe naming it passes the load check, its condition reads
    it, and its sentences show it. No other edit."""
    recipe_cond = {"fact": "os.secure_boot", "equals": False,
                   "because": "this build needs Secure Boot off (it is {os.secure_boot})"}
    doc = {"conditions": recipe_cond}
    with pytest.raises(Exception, match="unknown fact 'os.secure_boot'"):
        check_names(doc, "demo.json")  # not in the registry yet
    monkeypatch.setitem(vocabulary().facts, "os.secure_boot", "bool?")
    check_names(doc, "demo.json")

    facts = Facts(os=_OsWithSecureBoot(system="Linux", secure_boot=True))
    ctx = derive(facts, knowledge())
    out = evaluate(Row(recipe_cond), ctx, knowledge())
    assert out.value is False and out.reasons == ["this build needs Secure Boot off (it is yes)"]
    assert evaluate(Row(recipe_cond), derive(Facts(os=_OsWithSecureBoot(secure_boot=False)), knowledge()),
                    knowledge()).value is True
    unknown = evaluate(Row(recipe_cond), derive(Facts(), knowledge()), knowledge())
    assert unknown.value is None, "a fact the scan did not read is unknown, not a no"
    assert fmt("{os.secure_boot}", ctx) == "yes"


def test_a_report_file_becomes_facts_at_the_door() -> None:
    """A scan report from a file (another version, hand-written) is read once, leniently: a value of
    the wrong type is unknown, an entry of the wrong shape is left out (a GPU whose vendor is unreadable is
    kept, vendor unknown), the rest is read."""
    doc = {"os": {"system": "Linux", "wsl": "yes", "windows_build": "22631"},
           "cpu": {"arch": "x86_64", "flags": ["avx", 3, "avx2"], "x86_64_level": True},
           "gpus": [{"vendor": "nvidia", "name": "NVIDIA H100", "compute_capability": 9.0}, {"name": "no vendor"}, 7],
           "runtimes": {"cuda": {"driver_version": "580.65.06", "version": 13}, "rocm": "none"},
           "frameworks": "torch"}
    facts = Facts.from_report(doc)
    assert facts.os.system == "Linux" and facts.os.wsl is None and facts.os.windows_build is None
    assert facts.cpu.flags == ("avx", "avx2") and facts.cpu.x86_64_level is None
    # a GPU without a readable vendor is still a GPU (vendor unknown); 7 is no GPU at all
    assert [(g.vendor, g.name) for g in facts.gpus] == [("nvidia", "NVIDIA H100"), ("unknown", "no vendor")]
    assert facts.gpus[0].compute_capability is None
    assert facts.runtimes.cuda is not None and facts.runtimes.cuda.driver_version == "580.65.06"
    assert facts.runtimes.cuda.version is None and facts.runtimes.rocm is None and facts.frameworks == ()
    ctx = derive(facts, knowledge())
    assert ctx.nvidia.driver == "580.65.06" and ctx.nvidia.gpus[0].cc == "9.0", "the name gives the CC"
