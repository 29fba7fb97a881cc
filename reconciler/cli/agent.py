"""`jobtree agent --cluster NAME [--context CTX]`: the in-cluster agent that swaps failed groups onto hot spares (§7.4).

A thin shell over `reconciler.cluster.agent.main`: parses the options, writes JSON log lines to
standard error, runs until SIGTERM or Ctrl-C (then gives up the lead, so the other replica takes
over at once), and exits 4 with one line when the cluster or its fleet cannot be worked with.
"""

from __future__ import annotations

import sys
import threading

import click

from reconciler.cli import exitcodes


@click.command("agent")
@click.option("--cluster", required=True, help="The clusters[].name of jobtree.yaml this agent runs in.")
@click.option("--context", default=None, help="A kubeconfig context (default: the pod's service account).")
@click.option(
    "--fleet", default=None, help="The FleetConfig to serve (default: the only one on the cluster)."
)
@click.option(
    "--namespace",
    default=None,
    help="Namespace of the leader-election Lease (default: the pod's; with --context, the context's, else default).",
)
@click.option(
    "--identity",
    default=None,
    help="This replica's name in the election, before a random suffix (default: $POD_NAME).",
)
@click.option(
    "--listen", default="0.0.0.0:8080", show_default=True, help="HOST:PORT of /metrics, /healthz, /readyz."
)
@click.option(
    "--lease-duration", default=15.0, show_default=True, help="Seconds a leader's lease lasts unrenewed."
)
def command(
    cluster: str, context: str | None, fleet: str | None, namespace: str | None, identity: str | None,
    listen: str, lease_duration: float,
) -> None:  # fmt: skip
    """Watch this cluster's nodes and this fleet's pods; when a node is fenced (deleted, tainted
    out of service, or NotReady past failure.notReadyGraceSeconds; a cordon never), swap its groups
    onto their hot spares at once, as the next reconcile would, and journal each swap for that
    reconcile to fold into Git. Two replicas run; one leads (a coordination.k8s.io Lease)."""
    from reconciler.cluster.agent import health
    from reconciler.cluster.agent.main import AgentError, Options, serve

    host, _, port = listen.rpartition(":")
    if not port.isdigit() or not host:
        raise click.UsageError(f"--listen {listen}: give HOST:PORT, e.g. 0.0.0.0:8080")
    if lease_duration < 3:
        raise click.UsageError("--lease-duration must be at least 3 seconds")
    renew = lease_duration * 2 / 3
    options = Options(cluster, context, fleet, namespace, identity, host, int(port), lease_duration, renew,
                      min(2.0, renew / 3))  # fmt: skip
    health.logger("jobtree.agent")
    stop = threading.Event()
    try:
        serve(options, stop)
    except AgentError as err:
        click.echo(f"jobtree agent: {err}", err=True)
        sys.exit(exitcodes.OTHER)
    except KeyboardInterrupt:  # SIGTERM or Ctrl-C (reconciler.cli.signals): give the lead up and leave
        stop.set()
