"""usb probe: Movidius and Coral sticks from `lsusb`, on the real Jetson capture."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mlprobe.scan.capture import decode
from mlprobe.errors import ParseError
from mlprobe.model.facts import UsbAccelerator
from mlprobe.scan.host import ReplayHost
from mlprobe.probes import usb
from mlprobe.probes.usb import UsbDevice, accelerators, parse_lsusb

from . import hosts
from .conftest import FIXTURES
from .fuzz import examples, mutated

JETSON = "linux-arm64-jetson-movidius-myriadx-lsusb"
CAPTURES = sorted(FIXTURES.glob("*/usb-devices.txt"))
TABLE = Path(usb.__file__).resolve().parent.parent / "knowledge" / "usb_accelerators.json"


class DictHost(hosts.DictHost):
    failure = ("timeout", "slow")


def _text(folder: str) -> str:
    return decode((FIXTURES / folder / "usb-devices.txt").read_bytes())


def test_table_rows_are_sourced() -> None:
    doc = json.loads(TABLE.read_text(encoding="utf-8"))
    pairs = [(r["vendor_id"], r["product_id"]) for r in doc["rows"]]
    assert len(pairs) == len(set(pairs))
    for row in doc["rows"]:
        assert re.fullmatch(r"[0-9a-f]{4}", row["vendor_id"]) and re.fullmatch(r"[0-9a-f]{4}", row["product_id"])
        assert row["source"] in doc["source_key"] and row["kind"] and row["name"]
        assert all(s in doc["source_key"] for s in row.get("confirmed_by", []))


def test_jetson_capture_lists_nine_devices_and_one_accelerator() -> None:
    devices = parse_lsusb(_text(JETSON))
    assert len(devices) == 9
    assert UsbDevice(1, 7, "03e7", "2485", "Intel Movidius MyriadX") in devices
    assert devices[0] == UsbDevice(2, 2, "0bda", "0489", "Realtek Semiconductor Corp. 4-Port USB 3.0 Hub")
    (acc,) = accelerators(devices)
    assert (acc.vendor_id, acc.product_id, acc.kind) == ("03e7", "2485", "movidius-ncs2")


def test_probe_on_the_replayed_bundle_gives_no_gpu() -> None:
    c = usb.probe(ReplayHost(FIXTURES / JETSON))
    assert c.status == "ok" and c.gpus == []
    assert [(a.vendor_id, a.product_id) for a in c.usb_accelerators] == [("03e7", "2485")]


@pytest.mark.parametrize("line, kind", [
    # As public guides quote them: with and without a usb.ids description.
    ("Bus 001 Device 010: ID 03e7:2150 Intel Myriad VPU [Movidius Neural Compute Stick]", "movidius-ncs"),
    ("Bus 001 Device 015: ID 03e7:2150  ", "movidius-ncs"),
    ("Bus 001 Device 015: ID 03e7:2485 ", "movidius-ncs2"),
    ("Bus 001 Device 003: ID 03e7:f63b Myriad VPU [Movidius Neural Compute Stick]", "movidius-booted"),
    ("Bus 004 Device 003: ID 1a6e:089a Global Unichip Corp. ", "coral-usb"),
    ("Bus 002 Device 002: ID 18d1:9302 Google Inc.", "coral-usb"),
])
def test_known_sticks(line: str, kind: str) -> None:
    (acc,) = accelerators(parse_lsusb(line + "\n"))
    assert acc.kind == kind


def test_other_google_and_intel_devices_are_not_accelerators() -> None:
    text = ("Bus 001 Device 002: ID 8087:8008 Intel Corp. Integrated Rate Matching Hub\n"
            "Bus 003 Device 004: ID 18d1:4ee7 Google Inc. Nexus/Pixel Device (charging + debug)\n"
            "Bus 001 Device 001: ID 1d6b:0002 Linux Foundation 2.0 root hub\n")
    assert len(parse_lsusb(text)) == 3 and accelerators(parse_lsusb(text)) == []


def test_lsusb_verbose_form_is_read_too() -> None:
    text = ("\nBus 002 Device 005: ID 045e:0039 Microsoft Corp. IntelliMouse Optical\nDevice Descriptor:\n"
            "  bLength                18\n  idVendor           0x045e Microsoft Corp.\n"
            "\nBus 002 Device 006: ID 03e7:2485 Intel Movidius MyriadX\nDevice Descriptor:\n"
            "  idVendor           0x03e7 Intel Corp.\n  idProduct          0x2485 Movidius MyriadX\n")
    assert [a.product_id for a in accelerators(parse_lsusb(text))] == ["2485"]


def test_unrecognisable_and_empty_input() -> None:
    assert parse_lsusb("") == []
    with pytest.raises(ParseError):
        parse_lsusb("unable to initialize libusb: -99\n")


def test_probe_statuses() -> None:
    assert usb.probe(DictHost({})).status == "absent"
    assert usb.probe(DictHost({"usb-devices.txt": None})).status == "error"
    assert usb.probe(DictHost({"usb-devices.txt": "garbage"})).status == "error"


def test_accelerator_fact_shape() -> None:
    (acc,) = accelerators(parse_lsusb("Bus 002 Device 002: ID 18d1:9302 Google Inc.\n"))
    assert isinstance(acc, UsbAccelerator)
    assert acc.to_dict() == {"vendor_id": "18d1", "product_id": "9302",
                             "name": "Google Coral USB Accelerator (Edge TPU)", "kind": "coral-usb"}


@pytest.mark.parametrize("path", CAPTURES, ids=[p.parent.name for p in CAPTURES])
def test_parser_survives_mutations(path: Path) -> None:
    original = decode(path.read_bytes())
    limit = len(accelerators(parse_lsusb(original)))

    @settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutated(original))
    def check(text: str) -> None:
        try:
            devices = parse_lsusb(text)
        except ParseError:
            return
        assert len(accelerators(devices)) <= limit

    check()


@settings(max_examples=examples(100), deadline=None)
@given(st.text(max_size=300))
def test_any_text_gives_devices_or_a_parse_error(text: str) -> None:
    try:
        accelerators(parse_lsusb(text))
    except ParseError:
        pass
