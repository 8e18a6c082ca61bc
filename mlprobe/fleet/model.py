"""The fleet report as typed, frozen contracts (model/contract.py): what one node's report boils down
to (NodeSummary, the `facts` of a node), the groups and drift made from those, and the document
around them. A report is read once, at the fleet's edge (summary.summarize), into a NodeSummary;
grouping, rendering and the HTML page work on these values. JSON out through `to_json` (what `fleet
merge|scan --json` and `-o` write), and in through `FleetDocument.from_json` (`fleet show FILE`). The
published schema is fleet.schema.json; tests/test_fleet_merge.py validates what these write against
it."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Mapping, Optional, Tuple

from ..model.contract import contract, from_json, OPTIONAL_KEY, Record, to_json
from ..model.jsontypes import JsonObject, JsonValue

@contract
class NodeCpu(Record):
    """A node's CPU, as far as the fleet compares it."""

    vendor: Optional[str] = None
    model: Optional[str] = None
    arch: Optional[str] = None
    x86_64_level: Optional[int] = None
    threads: Optional[int] = None


@contract
class NodeGpu(Record):
    """One GPU of a node: what tells it apart (vendor, name, CUDA compute capability or AMD gfx target)
    and its driver."""

    vendor: Optional[str] = None
    name: Optional[str] = None
    compute_capability: Optional[str] = None
    gfx_target: Optional[str] = None
    driver_version: Optional[str] = None
    memory_bytes: Optional[int] = None


@contract
class PlanChoice(Record):
    """The recipe a node's plan puts first for one framework, and what installing it takes."""

    recipe: str
    backend: Optional[str] = None
    index_url: Optional[str] = None
    packages: Tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


# framework -> its first recipe, or None where nothing fits
PlanChoices = Mapping[str, Optional[PlanChoice]]


@contract
class InstalledBuild(Record):
    """A finding of the plan on an installed build (`plan.installed`)."""

    package: Optional[str] = None
    version: Optional[str] = None
    build: Optional[str] = None
    status: Optional[str] = None
    message: Optional[str] = None


@contract
class VerifySpeed(Record):
    """One verify result of a node: the device and its speed (the Keras-MNIST CNN's images/s)."""

    framework: Optional[str] = None
    framework_version: Optional[str] = None
    device: Optional[str] = None
    name: Optional[str] = None
    kind: Optional[str] = None
    verdict: Optional[str] = None
    images_per_s: Optional[float] = None


@contract
class NodeSummary(Record):
    """A node's report boiled down to what a fleet compares (a node's `facts` in the fleet report):
    hardware, driver and runtime versions, framework builds, the plan's choice per framework,
    installed-build findings and verify speeds; `capped` says what of the report was cut."""

    cpu: NodeCpu = NodeCpu()
    gpus: Tuple[NodeGpu, ...] = ()
    driver: Optional[str] = None
    cuda: Optional[str] = None
    rocm: Optional[str] = None
    frameworks: Tuple[str, ...] = ()  # `torch 2.11.0 cu130`: name, version and flavour
    os: Optional[str] = None
    python: Optional[str] = None
    mlprobe_version: Optional[str] = None
    source: Optional[Mapping[str, str]] = None  # the scan's source: kind, bundle, via
    plan: Optional[PlanChoices] = None
    installed: Tuple[InstalledBuild, ...] = ()
    verify: Tuple[VerifySpeed, ...] = ()
    capped: Optional[Tuple[str, ...]] = field(default=None, metadata=OPTIONAL_KEY)

    def software(self) -> Tuple[Tuple[str, Optional[str]], ...]:
        """The driver and runtime versions the fleet compares within a group, in the order shown."""
        return (("driver", self.driver), ("cuda", self.cuda), ("rocm", self.rocm))


# The fields of NodeSummary.software(), in its order.
SOFTWARE_FIELDS = tuple(name for name, _ in NodeSummary().software())


@contract
class AgentInfo(Record):
    """`fleet scan --keep-agents`: the node's kept scan worker."""

    scans: int
    pid: int


@contract
class FleetNode(Record):
    """One node of the fleet: its name, how its scan ended (document.STATUSES), its group and the
    summary of its report; where it came from (a file, or a Ray node) and, on request, the whole
    report."""

    name: str
    status: str
    error: Optional[str] = None
    group: Optional[str] = None
    facts: Optional[NodeSummary] = None
    file: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)  # fleet merge: the report file
    ray_node_id: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)  # fleet scan
    address: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)  # fleet scan: the raylet's address
    seconds: Optional[float] = field(default=None, metadata=OPTIONAL_KEY)  # fleet scan
    # the node's redacted `mlprobe report`, embedded as it came (`fleet merge --embed-reports`, fleet scan)
    report: Optional[Mapping[str, Any]] = field(default=None, metadata=OPTIONAL_KEY)
    agent: Optional[AgentInfo] = field(default=None, metadata=OPTIONAL_KEY)

    # the key order of the fleet report: where the node came from first, its report last
    KEY_ORDER = ("name", "file", "ray_node_id", "address", "status", "error", "seconds", "group", "facts",
                 "report", "agent")

    def to_json(self) -> JsonObject:
        doc: JsonObject = to_json(self)
        if self.ray_node_id is not None and self.address is None:
            doc["address"] = None  # a Ray node's address is always written, null when its table has none
        return {k: doc[k] for k in self.KEY_ORDER if k in doc}


@contract
class SoftwareField(Record):
    """A group's majority value of one software field, how many nodes have it, how many values there
    are, and whether the majority is a tie (no value has more than half of the group)."""

    majority: Optional[str]
    nodes: int
    variants: int
    contested: bool


@contract
class GroupBuild(InstalledBuild):
    """A distinct finding on an installed build within a group, with the nodes that have it."""

    count: int = 0
    nodes: Tuple[str, ...] = ()


@contract
class Hardware(Record):
    """What the nodes of a group share."""

    cpu: NodeCpu
    gpus: Tuple[NodeGpu, ...]


@contract
class Group(Record):
    """Nodes of the same hardware: the group's majority software (field: driver, cuda, rocm,
    `framework:NAME`), the plan of a node that has it, installed-build findings, and the nodes that
    drifted from it."""

    id: str
    label: str
    hardware: Hardware
    count: int
    nodes: Tuple[str, ...]
    software: Mapping[str, SoftwareField]
    representative: str = ""
    plan: Optional[PlanChoices] = None
    installed: Tuple[GroupBuild, ...] = ()
    drift_nodes: Tuple[str, ...] = ()


@contract
class Drift(Record):
    """A node whose value of a software field differs from its group's majority."""

    node: str
    group: str
    field: str
    value: Optional[str]
    majority: Optional[str]
    majority_nodes: int
    group_nodes: int
    contested: bool = False


@contract
class FleetSource(Record):
    """Where the fleet report came from: a Ray cluster (`ray`) or report files (`merge`)."""

    kind: str
    address: Optional[str] = field(default=None, metadata=OPTIONAL_KEY)
    timeout_s: Optional[float] = field(default=None, metadata=OPTIONAL_KEY)
    files: Optional[int] = field(default=None, metadata=OPTIONAL_KEY)
    seconds: Optional[float] = field(default=None, metadata=OPTIONAL_KEY)
    keep_agents_s: Optional[float] = field(default=None, metadata=OPTIONAL_KEY)


@contract
class FleetSummary(Record):
    """How many nodes, by status; how many groups and nodes that drifted."""

    nodes: int
    by_status: Mapping[str, int]
    groups: int
    drift_nodes: int


@contract
class FleetDocument(Record):
    """The fleet report (`"schema": "mlprobe.fleet/2"`, fleet.schema.json)."""

    schema: str
    kind: str
    mlprobe_version: str
    generated_at: str
    source: FleetSource
    summary: FleetSummary
    nodes: Tuple[FleetNode, ...]
    groups: Tuple[Group, ...]
    drift: Tuple[Drift, ...]
    warnings: Tuple[str, ...] = ()

    def to_json(self) -> JsonObject:
        """The document `fleet merge|scan` write (--json, -o)."""
        doc: JsonObject = to_json(self)
        return doc

    @classmethod
    def from_json(cls, doc: JsonValue) -> "FleetDocument":
        """A fleet report read back (`fleet show FILE`); a field of the wrong shape is a ContractError
        (a ValueError) naming it; an old one (`fleet_version: 1`) too."""
        from ..model.docversion import upgraded

        return from_json(cls, upgraded(doc, "fleet"))


__all__ = ["AgentInfo", "Drift", "FleetDocument", "FleetNode", "FleetSource",
           "FleetSummary", "Group", "GroupBuild", "Hardware", "InstalledBuild", "NodeCpu", "NodeGpu", "NodeSummary",
           "PlanChoice", "PlanChoices", "SOFTWARE_FIELDS", "SoftwareField", "VerifySpeed"]
