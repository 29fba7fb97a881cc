"""FleetConfig (`jobtree.yaml`) and the inventory shape shared by `inventory/nodes.yaml` and scenarios."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from schemas.common import ClusterMetadata, Duration, Fraction, Model, NonNegInt, Owner, integral
from schemas.kubenames import DNS_SUBDOMAIN_PATTERN, DnsLabel, QualifiedName

TEAM_PATTERN = r"^@?[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)?$"
# Bounds that keep a typo from expanding into billions of nodes or slots (validation itself walks
# every node name): far above any real machine or fabric domain.
MAX_GPUS_PER_NODE = 1_024
MAX_NODES_PER_BLOCK = 100_000
MAX_INVENTORY_NODES = 1_000_000
DnsSubdomain = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")]


class Tenant(Model):
    namespace: DnsLabel
    owner: Owner
    team: str | None = Field(default=None, pattern=TEAM_PATTERN)


class TopologyLabels(Model):
    """The node label key each topology key is read from (default: the key itself), e.g. gpu.flavor: nvidia.com/gpu.product."""

    region: QualifiedName = "region"
    cluster: QualifiedName = "cluster"
    fabric_domain: QualifiedName = Field(default="fabric.domain", alias="fabric.domain")
    gpu_flavor: QualifiedName = Field(default="gpu.flavor", alias="gpu.flavor")
    rack: QualifiedName = "rack"

    def keys(self) -> dict[str, str]:
        """Topology key -> the node label key it is read from."""
        return {
            "region": self.region,
            "cluster": self.cluster,
            "fabric.domain": self.fabric_domain,
            "gpu.flavor": self.gpu_flavor,
            "rack": self.rack,
        }


class Cluster(Model):
    """A Kubernetes cluster: name = its nodes' cluster value and rendered/<name>/; context = a kubeconfig context (absent: in-cluster)."""

    name: DnsSubdomain
    context: str | None = Field(default=None, min_length=1)
    topologyLabels: TopologyLabels = Field(default_factory=TopologyLabels)


class Accounting(Model):
    spareRate: Fraction = 0.5
    admissionLookahead: Duration = 3600


class Reservations(Model):
    noticePeriod: Duration = 900
    minRuntime: Duration = 0
    retention: Duration = 86400
    # false: activations clear a deficit only by structural cuts (reclaim unfunded groups, drop
    # spares, shrink malleable runs); a reservation they cannot clear waits for capacity to free up
    lottery: bool = True


class Failure(Model):
    notReadyGraceSeconds: NonNegInt | None = None


class Fill(Model):
    """Opportunistic fill (§4.8, §7.6): a filler pod's termination grace, in seconds. Its GPUs are
    free only once its containers stopped, so a spare's swap waits for it this long at most."""

    gracePeriodSeconds: NonNegInt = 5


class GitAuthor(Model):
    name: str = "jobtree"
    email: str = "jobtree@localhost"


class GitSettings(Model):
    branch: str = "main"
    author: GitAuthor = Field(default_factory=GitAuthor)


class FleetSpec(Model):
    tenants: list[Tenant] = Field(default_factory=list)
    # Git-host team (`@org/platform`) that owns everything but tenants' runs/<namespace>/ folders
    # in the CODEOWNERS rendered by `jobtree codeowners`; absent means no default owner line.
    platformTeam: str | None = Field(default=None, pattern=TEAM_PATTERN)
    clusters: list[Cluster] = Field(default_factory=list)
    accounting: Accounting = Field(default_factory=Accounting)
    reservations: Reservations = Field(default_factory=Reservations)
    failure: Failure = Field(default_factory=Failure)
    fill: Fill = Field(default_factory=Fill)
    git: GitSettings = Field(default_factory=GitSettings)


class FleetMetadata(ClusterMetadata):
    """The fleet's name is also the value of the fleet label on every object it applies (§7.1): at most 63."""

    name: Annotated[str, Field(pattern=DNS_SUBDOMAIN_PATTERN, max_length=63)]


class FleetConfig(Model):
    apiVersion: Literal["rq.davidlangworthy.io/v1"]
    kind: Literal["FleetConfig"]
    metadata: FleetMetadata
    spec: FleetSpec = Field(default_factory=FleetSpec)


NodeState = Literal["Ready", "NotReady", "Failed", "Deleted"]


class DomainBlock(Model):
    """A run of identical nodes named `<name>-n<NN>`, NN from 00; `states` and `cordoned` mark some of
    them by name (a failed node inside a block, without writing the block out as explicit nodes)."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
    region: str = Field(min_length=1)
    cluster: str = Field(min_length=1)
    flavor: str = Field(min_length=1)
    nodes: Annotated[int, Field(ge=1, le=MAX_NODES_PER_BLOCK, strict=True), BeforeValidator(integral)]
    gpusPerNode: Annotated[int, Field(ge=1, le=MAX_GPUS_PER_NODE, strict=True), BeforeValidator(integral)]
    rack: str | None = None
    states: dict[str, NodeState] = Field(default_factory=dict)  # node name -> its state when not Ready
    cordoned: list[str] = Field(default_factory=list)  # node names cordoned


class NodeEntry(Model):
    name: str = Field(min_length=1, max_length=253)
    gpus: Annotated[int, Field(ge=0, le=MAX_GPUS_PER_NODE, strict=True), BeforeValidator(integral)]
    labels: dict[str, str] = Field(default_factory=dict)
    cordoned: bool = False
    state: NodeState = "Ready"


class Inventory(Model):
    domains: list[DomainBlock] = Field(default_factory=list)
    nodes: list[NodeEntry] = Field(default_factory=list)
