"""scan -> plan -> install -> verify -> report, composed in one place, as typed values:
Facts (ScanReport) -> Plan -> VerifyResult -> ReportEnvelope. The commands call these functions and
write JSON only at their edge (`--json`, files); the stages never call each other backwards (report/
does not scan or plan, plan/ does not read the environment: the pipeline reads it and hands it in).

    scan_report(host)            the scan: Facts with mlprobe's version and where it came from
    plan(facts, env=...)         the ranked Plan for it (MLPROBE_PYTORCH_INDEX_URL read from `env`)
    build_report(host, options)  scan + plan (+ verify, + doctor) in the redacted ReportEnvelope
    node_report(replay=...)      build_report of this machine or a bundle, with no command line (a fleet node)
    diff_side(path)              one side of `mlprobe diff` (a bundle is scanned and planned here)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Tuple

from .errors import error_text
from .model.facts import Facts, ScanReport
from .scan.capture import BundleError, Host
from .scan.run import scan

if TYPE_CHECKING:  # the plan, report and doctor modules load only for the commands that use them
    from .model.doctor import DoctorResult
    from .model.plan import Plan
    from .model.report import DoctorSection, PlanSection, ReportEnvelope, VerifySection
    from .report.diff import Side
    from .report.envelope import ReportOptions

Scanner = Callable[[Host], Facts]


def scan_report(host: Host, source: Optional[Mapping[str, str]] = None, scanner: Scanner = scan) -> ScanReport:
    """The scan (`mlprobe scan --json` is its JSON). `scanner` lets a command wrap the scan in its own
    progress display."""
    return ScanReport.of(scanner(host), source)


def plan(
    facts: Facts,
    framework: str = "any",
    python: Optional[str] = None,
    index_urls: Optional[Mapping[str, str]] = None,
    env: Optional[Mapping[str, str]] = None,
    host: Optional[Host] = None,
) -> Plan:
    """The plan for the scanned facts; `env` defaults to this process's environment. With the host,
    a framework whose import failed in the frameworks' own enumeration there (framework-devices.json,
    where the capture has it) wins no tie."""
    from .plan.planner import build_plan

    return build_plan(facts, framework=framework, python=python, index_urls=index_urls,
                      env=os.environ if env is None else env, failing=failing_frameworks(host))


def failing_frameworks(host: Optional[Host]) -> Tuple[str, ...]:
    """The frameworks the capture's own enumeration (framework-devices.json) could not start: an
    import error or a crashed child. Nothing on a live host that did not take that capture (it is
    not taken for a plan: it imports every framework)."""
    if host is None:
        return ()
    from .doctor.parse import parse_framework_devices

    cap = host.get("framework-devices.json")
    if not cap.ok:
        return ()
    found = parse_framework_devices(cap.text())
    return tuple(f.name for f in found.frameworks if f.error) if found is not None else ()


def plan_section(facts: Facts, env: Optional[Mapping[str, str]] = None) -> "PlanSection":
    """The plan of a report, or a note saying why there is none (a planner bug, a bad mirror URL in the
    environment, ...): the report still carries the rest."""
    from .model.report import PlanSection, Unavailable

    try:
        return PlanSection(plan=plan(facts, framework="any", env=env))
    except Exception as exc:  # a planner failure must not cost the whole report
        return PlanSection(missing=Unavailable(f"no plan: make_plan failed ({type(exc).__name__}: {exc})"))


def verify_section(host: Host, python: Optional[str] = None) -> "VerifySection":
    from .model.report import Unavailable, VerifySection

    if host.kind == "replay":
        return VerifySection(missing=Unavailable("verify runs on this machine, so it is skipped for a replayed bundle"))
    from .verify.runner import verify

    try:
        return VerifySection(result=verify(python=python) if python else verify())
    except Exception as exc:  # a StageError or anything else: the report still carries the rest
        return VerifySection(missing=Unavailable(f"verify failed: {error_text(exc)}"))


def _plan_or_nothing(env: Optional[Mapping[str, str]]) -> Callable[[Facts, Optional[str]], Optional[Plan]]:
    def plan_fn(facts: Facts, python: Optional[str]) -> Optional[Plan]:
        try:
            return plan(facts, framework="any", python=python, env=env)
        except Exception:  # a planner failure costs the rules that read the plan, not the diagnosis
            return None

    return plan_fn


def doctor(host: Host, python: Optional[str] = None, report: Optional[ScanReport] = None,
           source: Optional[Mapping[str, str]] = None, env: Optional[Mapping[str, str]] = None) -> "DoctorResult":
    """`mlprobe doctor`: the scan (unless given), the plan, the frameworks' own enumeration (in `python`
    when named, else the `framework-devices.json` capture) and every rule over them: a DoctorResult."""
    from .doctor.rules import diagnose

    rep = report if report is not None else scan_report(host, source)
    enumeration = starts = loaded = None
    if python is not None:
        from .doctor import libraries
        from .doctor import starts as starts_mod
        from .doctor.enumerate import enumerate_devices, importable

        enumeration = enumerate_devices(python)
        starts = starts_mod.capture(python, env)
        loaded = libraries.capture(python, importable(enumeration))
    return diagnose(host, rep, _plan_or_nothing(env), python=python, enumeration_doc=enumeration, source=source,
                    starts_doc=starts, libraries_doc=loaded)


def doctor_section(host: Host, report: ScanReport) -> "DoctorSection":
    """Doctor's findings for a report, or a note saying why there are none."""
    from .model.report import DoctorSection, Unavailable

    try:
        return DoctorSection(result=doctor(host, report=report))
    except Exception as exc:  # the report still carries the rest
        return DoctorSection(missing=Unavailable(f"no doctor findings: {error_text(exc)}"))


def build_report(
    host: Host,
    options: "Optional[ReportOptions]" = None,
    source: Optional[Mapping[str, str]] = None,
    now: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
) -> "ReportEnvelope":
    """`mlprobe report`: scan, plan, verify when asked, doctor, then the redacted envelope."""
    from .report.envelope import ReportOptions, assemble

    options = options or ReportOptions()
    report = scan_report(host, source)
    planned = plan_section(report)
    verified = verify_section(host, options.python) if (options.verify or options.python) else None
    diagnosed = doctor_section(host, report)
    return assemble(host, report, planned, verified, options, now=now, env=env, doctor=diagnosed)


def node_report(replay: Optional[str] = None, verify: bool = False, via: Optional[str] = None,
                env: Optional[Mapping[str, str]] = None) -> "ReportEnvelope":
    """`mlprobe report` where no command line chose the host (a fleet node, fleet/task.py): this
    machine, its slow tools started at once, or the capture bundle `replay` (asked for by `via`, the
    variable that named it), with the MLPROBE_OVERRIDE_* variables of `env` (default: this process's)
    over the bundle's own facts, as for a live scan. BundleError when `replay` is not a bundle."""
    from .report.envelope import ReportOptions
    from .scan.capture import PREFETCH
    from .scan.host import OVERRIDE_PREFIX, open_replay, shared_live_host
    from .ui import display_path

    host: Host
    if replay:
        bundle = open_replay(replay)
        environ = os.environ if env is None else env
        bundle.extra_overrides = {k: v for k, v in environ.items() if k.startswith(OVERRIDE_PREFIX)}
        host = bundle
        source = {"kind": "replay", "bundle": display_path(replay), **({"via": via} if via else {})}
    else:
        live = shared_live_host()
        live.prefetch(PREFETCH)
        host, source = live, {"kind": "live"}
    return build_report(host, ReportOptions(verify=verify), source=source)


def _scan_bundle(path: Path) -> ScanReport:
    from .report.diff import DiffInputError
    from .scan.host import open_replay
    from .ui import display_path

    try:
        host = open_replay(path)
    except BundleError as exc:
        raise DiffInputError(str(exc)) from None
    return scan_report(host, {"kind": "replay", "bundle": display_path(path)})


def _plan_or_none(facts: Facts) -> Optional[Plan]:
    return plan_section(facts).plan


def diff_side(path: str) -> "Side":
    """One side of `mlprobe diff`: a report, a scan JSON (planned here) or a bundle (scanned and planned)."""
    from .report.diff import load_side

    return load_side(path, _scan_bundle, _plan_or_none)


__all__ = ["build_report", "diff_side", "doctor", "doctor_section", "node_report", "plan", "plan_section",
           "scan_report", "verify_section"]
