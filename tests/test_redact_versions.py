"""Four-part versions (jax 0.12.0.1, a torch 2.13.0.1) look like IPv4 addresses; in a framework or
package context they are versions and a report keeps them, while real addresses are still redacted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mlprobe.report.redact import Redactor

from .conftest import FIXTURES
from .test_cli_errors import run

VERSIONS = ["0.12.0.1", "2.13.0.1"]


@pytest.mark.parametrize("v", VERSIONS)
@pytest.mark.parametrize("template", [
    'jax {v} on cpu',
    'jax=={v}',
    '{{"name": "jax", "version": "{v}"}}',
    "{{'version': '{v}'}}",
    'jaxlib: {v}',
    '"jaxlib": "{v}"',
    'jax-{v}-py3-none-any.whl',
    'jax-{v}.dist-info',
    'jax ({v})',
    'torch/{v}',
    'torch {v}+cpu',
    'Successfully installed jax-{v} jaxlib-{v}',
    'jax                 {v}\n',
])
def test_versions_in_package_contexts_are_not_addresses(template: str, v: str) -> None:
    text = template.format(v=v)
    assert Redactor().redact_text(text) == text
    if text.lstrip().startswith("{"):
        assert Redactor().redact_text(text, mode="json") == text


@pytest.mark.parametrize("v", VERSIONS)
def test_versions_in_json_objects_are_kept(v: str) -> None:
    doc = {"frameworks": [{"name": "jax", "version": v}], "packages": {"numpy": v, "jaxlib": v},
           "env": {"JAX_VERSION": v}}
    assert Redactor().redact_obj(doc) == doc
    text = json.dumps(doc)
    assert Redactor().redact_text(text, mode="json") == text


@pytest.mark.parametrize("text,addr", [
    ("server: 10.1.2.3", "10.1.2.3"),
    ("inet 192.168.1.20/24 brd 192.168.1.255", "192.168.1.20"),
    ("MASTER_ADDR=10.0.0.5", "10.0.0.5"),
    ('{"address": "172.16.4.2"}', "172.16.4.2"),
    ("host 10.1.2.3 is up", "10.1.2.3"),
    ("ssh root@10.2.3.4", "10.2.3.4"),
    ("jax served on 10.1.2.3:8080", "10.1.2.3"),
    ("connect to 2.13.0.1 port 22", "2.13.0.1"),
])
def test_real_addresses_are_still_redacted(text: str, addr: str) -> None:
    out = Redactor().redact_text(text)
    assert addr not in out and "<ip-" in out
    obj = Redactor().redact_obj({"addr": addr, "env": {"NODE_IP": addr}, "master_addr": addr})
    assert addr not in json.dumps(obj)


@pytest.mark.parametrize("v", VERSIONS)
def test_report_keeps_four_part_framework_versions(tmp_path: Path, v: str) -> None:
    """Through the real `mlprobe report`: the scan's frameworks, the Markdown and the embedded
    captures keep jax's version, and a replay of the report still reads it."""
    b = tmp_path / "bundle"
    shutil.copytree(FIXTURES / "linux-nvidia-h200-mlprobe-capture", b)
    fw = json.loads((b / "mlprobe-frameworks.json").read_text(encoding="utf-8"))
    for d in fw:
        if d["name"] in ("jax", "jaxlib"):
            d["version"] = v
    (b / "mlprobe-frameworks.json").write_text(json.dumps(fw, indent=2), encoding="utf-8")
    pip = (b / "pip-list.txt").read_text(encoding="utf-8")
    (b / "pip-list.txt").write_text(
        "\n".join(ln.replace(ln.split()[1], v, 1) if ln.split()[:1] in (["jax"], ["jaxlib"]) else ln
                  for ln in pip.splitlines()) + "\n", encoding="utf-8")
    rc, out, err = run("report", "--replay", b, "--include-raw")
    assert rc == 0, err
    doc = json.loads(out)
    versions = {f["name"]: f["version"] for f in doc["scan"]["frameworks"]}
    assert versions["jax"] == v and versions["jaxlib"] == v
    assert f'"version": "{v}"' in doc["capture_bundle"]["files"]["mlprobe-frameworks.json"]["text"]
    rc, md, err = run("report", "--replay", b, "--format", "markdown")
    assert rc == 0 and v in md, err
    (tmp_path / "r.json").write_text(out, encoding="utf-8")
    rc, again, err = run("scan", "--json", "--replay", tmp_path / "r.json")
    assert rc == 0, err
    assert {f["name"]: f["version"] for f in json.loads(again)["frameworks"]}["jax"] == v
