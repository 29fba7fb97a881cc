"""kubeapi: an in-process Kubernetes API server for tests (test support only; product code never imports it).

WHAT IT IS
    A real HTTP/1.1 server on 127.0.0.1 (stdlib `http.server`, a thread per connection,
    keep-alive, Nagle off) speaking the Kubernetes REST API well enough that the official
    `kubernetes` Python client (typed APIs, CustomObjectsApi, DynamicClient, watch) and kubectl
    cannot tell it from a kube-apiserver for what jobtree does: server-side apply with a field
    manager, prune by label, watches of nodes and pods, a coordination Lease, CRDs and their
    custom resources. Where a client can tell, it behaves like Kubernetes v1.32.

WHAT IT IMPLEMENTS
    Discovery   /version, /api, /api/v1, /apis, /apis/<g>, /apis/<g>/<v> (verbs, namespaced,
                kind, shortNames, categories, subresources); CRD groups appear when the CRD is
                stored and vanish when it is deleted. /healthz, /readyz, /livez.
    Kinds       v1 namespaces (+status, finalize), nodes (+status), pods (+status), services
                (+status), configmaps, events; coordination.k8s.io/v1 leases;
                apiextensions.k8s.io/v1 customresourcedefinitions (+status) and every served
                version of every CRD, namespaced or cluster-scoped, with `status` when declared.
    Verbs       get; list with label selectors (=, ==, !=, in, notin, exists, !, >, <), field
                selectors (metadata.name, metadata.namespace, the pod/node/namespace/event
                labels Kubernetes supports, a CRD's selectableFields; others are 400),
                limit/continue on a consistent snapshot, resourceVersion/resourceVersionMatch;
                watch (ADDED/MODIFIED/DELETED/BOOKMARK/ERROR, resume from a resourceVersion, 410
                Expired beyond the history window, allowWatchBookmarks, sendInitialEvents,
                timeoutSeconds, selector transitions); create (generateName, 409 AlreadyExists);
                update (409 Conflict on a stale resourceVersion, custom resources require one);
                patch as JSON merge, JSON patch (a failing `test` is 422) and strategic merge
                (built-in kinds only; see `patches` for the subset); server-side apply
                (fieldManager required, force, managedFields with FieldsV1 per manager/operation/
                subresource, 409 with FieldManagerConflict causes, removal of fields an applier
                stopped applying, create on apply); delete (preconditions, gracePeriodSeconds,
                propagationPolicy Background/Foreground/Orphan with an emulated garbage
                collector, finalizers keep an object with deletionTimestamp); deletecollection;
                dryRun=All; fieldValidation Ignore/Warn (Warning headers)/Strict.
    Semantics   one global resourceVersion counter bumped per change; no-op writes keep it;
                uid, creationTimestamp, generation (custom resources and CRDs; bumped on spec
                changes only); status subresources split writes; structural schemas prune
                unknown fields, default, and validate (see `schema`); pod spec immutability
                (422 naming what may change), pod defaults and QoS; namespace termination;
                CRD deletion removes its resources; metav1.Time/MicroTime decoding as Go does.
    Errors      Status bodies with the real reason/code: NotFound 404, AlreadyExists 409,
                Conflict 409, Invalid 422 (causes per field), BadRequest 400, Forbidden 403,
                MethodNotAllowed 405, NotAcceptable 406, Expired/Gone 410, UnsupportedMediaType
                415, TooManyRequests 429 (Retry-After), InternalError 500, Timeout 504.
    Tables      `Accept: application/json;as=Table;...` gives meta.k8s.io/v1 Table: NAME plus a
                CRD's additionalPrinterColumns (AGE when none), so `kubectl get runs -A` works.

WHAT IT DELIBERATELY DOES NOT
    No authentication or authorization (any token is accepted), no admission webhooks, no
    scheduler (a pod runs where its spec.nodeName says), no controllers beyond the emulated
    garbage collector, namespace and CRD cleanup, no protobuf/CBOR bodies (so kubectl create/run
    of built-in kinds, which send protobuf, get 415; `kubectl apply --server-side` works), no
    aggregated discovery (clients fall back to legacy discovery), OpenAPI v3 only as far as
    kubectl needs to choose server-side field validation (no schemas: no `kubectl explain`
    fields), no /openapi/v2, no CEL validation, no conversion
    webhooks, no legacy /api/v1/watch paths, no pods/log, exec, binding or
    eviction. Built-in kinds are not schema-validated beyond the rules in `strategies`, so an
    unknown field in a pod is kept (a real server drops it with a warning).

HOW A TEST USES IT
    from kubernetes import client, config
    from tests.support.kubeapi import Fault, KubeApiServer, write_kubeconfig

    with KubeApiServer("east") as east:
        path = write_kubeconfig(tmp_path / "kubeconfig", {"east": east})
        api = client.CoreV1Api(config.new_client_from_config(config_file=str(path), context="east"))
        east.seed({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        east.faults.add(Fault.respond(429, method="PATCH", retry_after=1))    # next PATCH is refused
        mark = east.requests.mark()
        ... run the code under test ...
        assert east.requests.writes(since=mark) == []                          # it wrote nothing

    Several clusters: `with clusters(["east", "west"], tmp_path / "kubeconfig") as servers:`.
    The kubelet: `server.kubelet.set_phase(ns, name, "Running")`, `.set_node_ready(node, False)`;
    with `kubelet_emulation=True` a pod deleted with a grace period lingers (deletionTimestamp
    set) until `server.kubelet.finish_termination(ns, name)`. Watch expiry: `history_window=`
    or `server.set_history_window(n)`. Bookmarks: `bookmark_interval=`.
    DynamicClient caches discovery in a file named after the host; give it
    `cache_file=tmp_path / "discovery.json"` so a reused port never serves a stale cache.
"""

from tests.support.kubeapi.faults import Fault
from tests.support.kubeapi.kubeconfig import kubeconfig, write_kubeconfig
from tests.support.kubeapi.requestlog import Request, RequestLog
from tests.support.kubeapi.server import KubeApiServer, clusters

__all__ = ["Fault", "KubeApiServer", "Request", "RequestLog", "clusters", "kubeconfig", "write_kubeconfig"]
