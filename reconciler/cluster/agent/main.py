"""The agent process (§7.4): connect, find the fleet, campaign for the lead, watch, act, serve health, stop cleanly.

Composes the room's parts: `connect` for the API, `leader.Elector` (a coordination.k8s.io Lease
per fleet and cluster), `loop.Agent` (the watches and the worker, which acts only while this
replica leads; every write it sends is fenced by the elector's renew deadline), `health` (metrics,
`/metrics`, `/healthz`, `/readyz`, JSON log lines). `serve` returns when `stop` is set (the verb
sets it on SIGTERM), after giving up the lead so the other replica takes over at once; a replica
whose lead ran out (a renewal failed, or a write met its renew deadline) raises `AgentError`
instead, so its process exits and restarts as a follower. Raises `AgentError` for what an
operator must fix (no cluster configuration, no FleetConfig mirror to work from); decides nothing
itself.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import prometheus_client

from reconciler.cluster import connect, informer, kinds, stamp
from reconciler.cluster.agent import health, leader
from reconciler.cluster.agent.loop import LOG, Agent
from reconciler.cluster.api import AGENT_FIELD_MANAGER, Api
from reconciler.cluster.errors import ClusterError

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_NAMESPACE = "jobtree-system"


class AgentError(Exception):
    """Something an operator must fix before the agent can run (the message says what)."""


class NotYet(AgentError):
    """What the first apply of the fleet to this cluster brings (its CRDs, its FleetConfig): waited for."""


@dataclass(frozen=True, slots=True)
class Options:
    cluster: str
    context: str | None = None
    fleet: str | None = None
    namespace: str | None = None  # of the leader-election Lease
    identity: str | None = None
    host: str = "0.0.0.0"
    port: int = 8080
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class Reporter:
    """The loop's observer: Prometheus metrics and heartbeats."""

    def __init__(self, metrics: health.Metrics, beats: health.Health, cluster: str) -> None:
        self.metrics, self.beats, self.cluster = metrics, beats, cluster

    def swapped(self, seconds: float) -> None:
        self.metrics.swapped(self.cluster, seconds)

    def declined(self, reason: str) -> None:
        self.metrics.decline(self.cluster, reason)

    def finished_intent(self) -> None:
        self.metrics.intent_finished.inc()

    def awaiting_fold(self, count: int) -> None:
        self.metrics.awaiting_fold.set(count)

    def beat(self, loop: str) -> None:
        # a watch beats each time its stream (at most WATCH_SECONDS long) ends; the worker at least
        # every second (its wait is capped at 1 s), so it keeps the default limit
        self.beats.beat(loop, within=None if loop == "worker" else informer.WATCH_SECONDS + 100.0)


def fleet_name(api: Api, wanted: str | None) -> str:
    """The fleet this agent serves: `wanted`, or the only one whose FleetConfig mirror the cluster holds."""
    if not api.serves(kinds.FLEET):
        raise NotYet(
            f"{api.cluster}: no FleetConfig kind on this cluster; apply the fleet first (jobtree apply)"
        )
    items, _ = api.list_all(kinds.FLEET, f"{stamp.MANAGED_BY}={stamp.MANAGER}")
    names = sorted(str(o["metadata"]["name"]) for o in items)
    if wanted is not None:
        if wanted not in names:
            raise NotYet(
                f"{api.cluster}: no FleetConfig {wanted} (the cluster holds: {', '.join(names) or 'none'})"
            )
        return wanted
    if not names:
        raise NotYet(f"{api.cluster}: no fleet's FleetConfig yet; apply the fleet first (jobtree apply)")
    if len(names) != 1:
        raise AgentError(
            f"{api.cluster}: {len(names)} fleets' FleetConfigs ({', '.join(names) or 'none'}); name one with --fleet"
        )
    return names[0]


def lease_namespace(given: str | None, context: str | None) -> str:
    """Where the leader-election Lease lives: `--namespace`; in a pod (no context), the pod's own
    namespace; with a kubeconfig context, that context's namespace, else `default`, as kubectl reads it."""
    if given:
        return given
    if context is not None:
        return connect.context_namespace(context) or "default"
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or DEFAULT_NAMESPACE
    except OSError:
        return DEFAULT_NAMESPACE


def serve(options: Options, stop: threading.Event) -> None:
    """Run the agent until `stop` is set. Until the fleet has been applied to this cluster (its
    FleetConfig mirror) it serves its probes, not ready, and waits."""
    target = connect.Target(options.cluster, options.context, options.fleet or "")
    try:
        api = connect.api(target, manager=AGENT_FIELD_MANAGER)
    except ClusterError as err:
        raise AgentError(str(err)) from None
    metrics = health.Metrics.create(prometheus_client.REGISTRY)  # with the process collectors: RSS, CPU
    beats = health.Health(metrics.registry)
    server, _ = beats.serve(options.host, options.port)
    try:
        fleet = await_fleet(api, options.fleet, beats, stop)
        if fleet is not None:
            run(api, options, fleet, metrics, beats, server.server_address[1], stop)
    finally:
        server.shutdown()


def await_fleet(api: Api, wanted: str | None, beats: health.Health, stop: threading.Event) -> str | None:
    """The fleet's name once its FleetConfig mirror is on the cluster (None: stopped first)."""
    said = ""
    while not stop.is_set():
        beats.beat("fleet")
        try:
            return fleet_name(api, wanted)
        except (NotYet, ClusterError) as err:
            if str(err) != said:
                said = str(err)
                LOG.warning("waiting", extra=dict(why=said))
            beats.not_ready(said)
        stop.wait(5.0)
    return None


def candidate(given: str | None) -> str:
    """This process's name in the election: `--identity` (the pod's name), else $POD_NAME, else the
    host's name, each followed by `_` and a random suffix as client-go's leader election does, so a
    restarted container never takes its previous self's record for its own."""
    base = given or os.environ.get("POD_NAME") or socket.gethostname()
    return f"{base}_{uuid.uuid4().hex[:10]}"


def run(
    api: Api, options: Options, fleet: str, metrics: health.Metrics, beats: health.Health, port: int,
    stop: threading.Event,
) -> None:  # fmt: skip
    """Campaign, watch and act for `fleet` until `stop` is set; give the lead up on the way out."""
    beats.forget("fleet")
    identity = candidate(options.identity)
    elector = leader.Elector(
        api, lease_namespace(options.namespace, options.context), f"jobtree-agent-{fleet}-{options.cluster}"[:253], identity,
        options.lease_duration, options.renew_deadline, options.retry_period,
    )  # fmt: skip
    lost = threading.Event()

    def lose() -> None:  # the lead ran out (a write met the renew deadline, or a renewal failed): end
        lost.set()
        stop.set()

    agent = Agent(fenced(api, elector), options.cluster, fleet, leading=lambda: elector.is_leader,
                  observer=Reporter(metrics, beats, options.cluster), clock=time.time, on_lost=lose)  # fmt: skip
    metrics.leading(identity, False)

    def started() -> None:
        metrics.leading(identity, True)
        LOG.info("leading", extra=dict(identity=identity, fleet=fleet, cluster=options.cluster))
        agent.wake.put(time.monotonic())

    def stopped() -> None:
        metrics.leading(identity, False)
        agent.led = False
        if stop.is_set():  # a normal stop (SIGTERM): the lead is given up, not lost
            LOG.info("stopping", extra=dict(identity=identity, why="asked to stop: giving the lead up"))
        else:  # the lead lost: end the process, as controller-runtime does (it restarts as a follower)
            LOG.warning(
                "lost the lead",
                extra=dict(identity=identity, why=elector.why or "the lease was not renewed in time"),
            )
            lose()

    agent.start(stop)
    campaign = threading.Thread(target=elector.run, args=(stop, started, stopped), name="leader", daemon=True)
    campaign.start()
    LOG.info("started", extra=dict(identity=identity, fleet=fleet, cluster=options.cluster,
                                   listen=f"{options.host}:{port}"))  # fmt: skip
    try:
        while not stop.is_set():
            if agent.synced(stop, 1.0):
                beats.ready()
                break
            errors = "; ".join(c.error for c in agent.caches.values() if c.error)
            beats.not_ready(errors or health.NOT_SYNCED)
        said = ""
        while not stop.wait(5.0):  # say once why this replica does not lead (another holds it, a 404, ...)
            why = "" if elector.is_leader else elector.why
            if why and why != said and not why.startswith("held by"):
                LOG.warning("not leading", extra=dict(identity=identity, why=why))
            said = why
    finally:  # SIGTERM lands here too: give the lead up so the other replica takes over at once
        stop.set()
        agent.wake.put(time.monotonic())
        campaign.join(timeout=options.renew_deadline)
    if lost.is_set():
        raise AgentError(
            f"{options.cluster}: {identity} lost the lead (no write after its renew deadline); "
            "exiting to start again as a follower"
        )


def fenced(api: Api, elector: leader.Elector) -> Api:
    """`api`, each of whose writes asks first how long this replica still leads (§7.6). The
    elector's own writes are not (its `_view` is an Api of its own, bounded by the same deadline)."""
    api.fence = lambda: time_left(elector)
    return api


def time_left(elector: leader.Elector) -> float:
    """Seconds until this replica's term ends by its own clock (0 when it has none)."""
    end = elector.deadline
    return 0.0 if end is None else end - elector.clock()
