"""Request latency of the test server through the official client: `python -m tests.support.kubeapi.latency`.

A measuring tool, not a test: it starts one server, then times N sequential calls each of a typed
GET, a server-side apply that changes the object, a no-op re-apply, the same apply through the
DynamicClient, and (to separate the client's own cost) a raw keep-alive `http.client` GET. It
prints medians and 99th percentiles in ms.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory

from kubernetes import client, config
from kubernetes.dynamic import DynamicClient

from tests.support.kubeapi.kubeconfig import write_kubeconfig
from tests.support.kubeapi.server import KubeApiServer

APPLY = "application/apply-patch+yaml"


def timed(calls: int, call: Callable[[int], object]) -> tuple[float, float]:
    samples = []
    for i in range(calls):
        began = time.perf_counter()
        call(i)
        samples.append((time.perf_counter() - began) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    calls = parser.parse_args().calls
    with TemporaryDirectory() as scratch, KubeApiServer("latency") as server:
        path = write_kubeconfig(Path(scratch) / "kubeconfig", {"latency": server})
        api = config.new_client_from_config(str(path), context="latency")
        core = client.CoreV1Api(api)
        config_maps = DynamicClient(api, cache_file=str(Path(scratch) / "discovery.json")).resources.get(
            api_version="v1", kind="ConfigMap"
        )

        def manifest(i: int) -> dict[str, object]:
            return {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cm", "namespace": "default"},
                "data": {"i": str(i)},
            }

        core.patch_namespaced_config_map(
            "cm", "default", manifest(0), field_manager="jobtree", _content_type=APPLY
        )
        raw = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]))

        def raw_get(_: int) -> object:
            raw.request(
                "GET", "/api/v1/namespaces/default/configmaps/cm", headers={"Accept": "application/json"}
            )
            return raw.getresponse().read()

        results = {
            "typed GET (read_namespaced_config_map)": timed(
                calls, lambda i: core.read_namespaced_config_map("cm", "default")
            ),
            "server-side apply, changing": timed(
                calls,
                lambda i: core.patch_namespaced_config_map(
                    "cm", "default", manifest(i + 1), field_manager="jobtree", _content_type=APPLY
                ),
            ),
            "server-side apply, no-op": timed(
                calls,
                lambda i: core.patch_namespaced_config_map(
                    "cm", "default", manifest(calls), field_manager="jobtree", _content_type=APPLY
                ),
            ),
            "server-side apply, changing (DynamicClient)": timed(
                calls,
                lambda i: config_maps.server_side_apply(
                    body=manifest(calls + i + 1), field_manager="jobtree"
                ),
            ),
            "raw http.client GET (no client library)": timed(calls, raw_get),
        }
        for label, (median, p99) in results.items():
            print(f"{label:45} median {median:6.2f} ms   p99 {p99:6.2f} ms   (n={calls})")


if __name__ == "__main__":
    main()
