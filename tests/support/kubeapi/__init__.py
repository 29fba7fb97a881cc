"""kubeapi: an in-process Kubernetes API server for tests (test support only; product code never imports it).

WHAT IT IS
    A real HTTP/1.1 server on 127.0.0.1 (stdlib `http.server`, a thread per connection,
    keep-alive, Nagle off) that speaks the Kubernetes REST API closely enough that the official
    `kubernetes` Python client (typed APIs, CustomObjectsApi, DynamicClient, watch, LeaseLock)
    and kubectl v1.32 behave as against a kube-apiserver for what jobtree does: server-side
    apply with a field manager, prune by label, watches of nodes and pods, a coordination
    Lease, CRDs and their custom resources. Where a client can tell, it behaves like v1.32.
    It runs on a thread inside the test process, so tests reach into it directly.

WHAT IT IMPLEMENTS
    Discovery   /version, /api, /api/v1, /apis, /apis/<g>, /apis/<g>/<v> (verbs, namespaced,
                kind, shortNames, categories, subresources); a CRD's group appears when the
                CRD is stored and vanishes when it is deleted; /healthz, /readyz, /livez; an
                OpenAPI v3 index and per-group-version documents with paths and query
                parameters only (what kubectl reads to choose server-side field validation).
    Kinds       v1 namespaces (+status, finalize), nodes (+status), pods (+status), services
                (+status), configmaps, events; coordination.k8s.io/v1 leases;
                apiextensions.k8s.io/v1 customresourcedefinitions (+status) and every served
                version of every CRD (conversion strategy None), namespaced or cluster-scoped,
                with a status subresource when declared.
    Reads       get; list with label selectors (=, ==, !=, in, notin, exists, !, >, <) and
                field selectors (metadata.name, metadata.namespace, the pod, node, namespace
                and event labels Kubernetes supports, a CRD's selectableFields; others are
                400); limit/continue on a consistent snapshot; resourceVersion and
                resourceVersionMatch=Exact|NotOlderThan; watch with ADDED, MODIFIED, DELETED,
                BOOKMARK and ERROR events, resume from a resourceVersion, 410 Expired beyond
                the history window, allowWatchBookmarks, sendInitialEvents, timeoutSeconds,
                selector transitions (leaving a selection is DELETED).
    Writes      create (generateName; 409 AlreadyExists); update (409 Conflict on a stale
                resourceVersion, required for custom resources); JSON merge patch; JSON patch
                (a failing `test` is 422); strategic merge patch for built-in kinds (the
                subset in `patches`; 415 for custom resources, as on a real server);
                server-side apply (fieldManager required, force, managedFields in FieldsV1
                per manager/operation/subresource, 409 with FieldManagerConflict causes
                worded as the real server words them, removal of fields an applier stopped
                applying that nobody else owns, create on apply, fields a CRD does not
                declare are a 500 as in v1.32, also for built-in kinds); delete (uid/resourceVersion preconditions,
                gracePeriodSeconds, propagationPolicy Background/Foreground/Orphan with an
                emulated garbage collector, finalizers keep the object with deletionTimestamp
                set); deletecollection; dryRun=All; fieldValidation Ignore, Warn (Warning
                headers, the default) and Strict.
    Semantics   one global resourceVersion counter bumped per change, as etcd's revision; a
                write that changes nothing keeps it and sends no event; uid,
                creationTimestamp; generation for custom resources and CRDs, bumped on spec
                changes only; status subresources split writes both ways; structural schemas
                prune, default and validate (see `schema`); undeclared fields of built-in
                kinds are dropped with a warning (`declared`); built-in rules in `strategies`
                (pod defaults and QoS class, pod spec immutability with the real 422,
                namespace termination, service cluster IPs, ...); CRD deletion removes its
                custom resources; metav1.Time and MicroTime decoded as Go decodes them.
    Errors      Status bodies with the real reason and code: NotFound 404, AlreadyExists 409,
                Conflict 409, Invalid 422 (a cause per field), BadRequest 400, Forbidden 403,
                MethodNotAllowed 405, NotAcceptable 406, Expired 410, UnsupportedMediaType
                415, InternalError 500, Timeout 504; faults add Gone 410, TooManyRequests 429
                (Retry-After) and any other code.
    Tables      `Accept: application/json;as=Table;...` gives a meta.k8s.io/v1 Table: NAME and
                a CRD's additionalPrinterColumns (AGE when it has none), kubectl-like columns
                for pods, nodes, namespaces, ConfigMaps, Leases and CRDs; watch events as
                one-row Tables. `kubectl get runs -A` and `kubectl get runs -w` work.

WHAT IT DELIBERATELY DOES NOT
    No authentication or authorization (any token is accepted), admission webhooks,
    scheduler (a pod runs where its spec.nodeName says) or controllers beyond the emulated
    garbage collector, namespace and CRD cleanup, which act at once instead of eventually.
    No protobuf or CBOR bodies: kubectl create/run of built-in kinds, which send protobuf, get
    415 (kubectl apply --server-side, patch, label, cordon, taint, delete and get work). No
    aggregated discovery (clients fall back to legacy discovery), no /openapi/v2 and no
    OpenAPI schemas (no `kubectl explain` fields), no CEL validation, no conversion
    webhooks, no legacy /api/v1/watch paths, no pods/log, exec, binding or eviction. Built-in
    kinds are checked for undeclared fields (`declared`, from the client's models) and by the
    rules in `strategies`, but their value types are not checked (a string where a pod wants
    an integer is stored as sent).

HOW A TEST USES IT
    from kubernetes import client, config
    from tests.support.kubeapi import Fault, KubeApiServer, write_kubeconfig

    with KubeApiServer("east") as east:                          # or clusters(["east", "west"], path)
        path = write_kubeconfig(tmp_path / "kubeconfig", {"east": east})
        core = client.CoreV1Api(config.new_client_from_config(str(path), context="east"))
        east.seed({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        east.faults.add(Fault.respond(429, method="PATCH", retry_after=1))  # the next PATCH is refused
        mark = east.requests.mark()
        ...                                                      # run the code under test
        assert east.requests.writes(since=mark) == []            # it wrote nothing

    Hooks: `seed(*manifests)`, `get()`/`list()` of stored objects, `requests` (the request
    log: method, path, query, content type, code, fault), `faults` (`Fault.respond`, `.slow`,
    `.disconnect_request`, `.drop_watch`; by count, or by seeded chance), `kubelet`
    (`set_phase(ns, name, "Running")`, `set_node_ready(node, False)`; with
    `kubelet_emulation=True` a pod deleted with a grace period lingers until
    `kubelet.finish_termination(ns, name)`), `set_history_window(n)` (older watches and
    continue tokens get 410), `bookmark_interval=`, `errors` (tracebacks of server bugs).
    DynamicClient caches discovery in a file named after the host: give it
    `cache_file=tmp_path / "discovery.json"` so a reused port never serves a stale cache.
    Latency through the official client: `python -m tests.support.kubeapi.latency`.
"""

from tests.support.kubeapi.faults import Fault
from tests.support.kubeapi.kubeconfig import kubeconfig, write_kubeconfig
from tests.support.kubeapi.requestlog import Request, RequestLog
from tests.support.kubeapi.server import KubeApiServer, clusters

__all__ = ["Fault", "KubeApiServer", "Request", "RequestLog", "clusters", "kubeconfig", "write_kubeconfig"]
