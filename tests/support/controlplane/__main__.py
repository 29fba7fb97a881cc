"""`python -m tests.support.controlplane --kubeconfig PATH [--nodes N] [--inventory FILE [--cluster NAME]]`: a control plane for a person.

Starts etcd, kube-apiserver (RBAC on) and kwok on free loopback ports with their data in a
temporary folder, installs what deploy/ gives the cluster (the jobtree-system namespace, the
reconcile and agent ServiceAccounts and their RBAC, jobtree's CRDs), writes an admin kubeconfig
to PATH (context `--context`, default `local`), creates the GPU nodes asked for, prints `ready`,
and stops everything on SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from tests.support.controlplane import nodes
from tests.support.controlplane.cluster import Admin, install
from tests.support.controlplane.plane import ControlPlane, ControlPlaneMissing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.controlplane", description=__doc__)
    parser.add_argument("--kubeconfig", required=True, type=Path, help="write the admin kubeconfig here")
    parser.add_argument("--context", default="local", help="the kubeconfig context's name (default: local)")
    parser.add_argument(
        "--nodes", type=int, default=0, help="create N 8-GPU H100 nodes gpu-000, gpu-001, ..."
    )
    parser.add_argument(
        "--cluster", default=None,
        help="the --nodes' cluster label (default: local); with --inventory, only that cluster's nodes",
    )  # fmt: skip
    parser.add_argument("--inventory", type=Path, help="create the nodes this inventory/nodes.yaml lists")
    args = parser.parse_args(argv)
    stop = threading.Event()

    def ending(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, ending)
    signal.signal(signal.SIGINT, ending)
    try:
        plane = ControlPlane(args.context).start()
    except ControlPlaneMissing as err:
        print(err, file=sys.stderr)
        return 1
    try:
        admin = Admin(plane)
        install(admin)
        made = nodes.numbered(args.nodes, args.cluster or "local") if args.nodes else []
        if args.inventory is not None:
            listed = nodes.from_inventory(args.inventory)
            made += [n for n in listed if args.cluster in (None, n["metadata"]["labels"]["cluster"])]
        admin.seed(*made)
        plane.write_kubeconfig(args.kubeconfig, context=args.context)
        print(f"control plane at {plane.url} (started in {plane.started_in:.1f} s; {len(made)} GPU nodes); "
              f"kubeconfig {args.kubeconfig}, context {args.context}", file=sys.stderr)  # fmt: skip
        print("ready", flush=True)
        while not stop.wait(1.0):
            pass
    finally:
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
