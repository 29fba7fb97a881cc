"""The vendored core/v1 PodSpec schema (schemas/vendor/) is what `make corev1` derives from Kubernetes' own OpenAPI document."""

from __future__ import annotations

import json
from typing import Any

from schemas import podtemplate
from tests.support.controlplane import plane
from tools import corev1

REF = "#/components/schemas/"
FRAGMENT: dict[str, Any] = {
    "components": {
        "schemas": {
            "io.k8s.api.core.v1.PodSpec": {
                "description": "prose",
                "type": "object",
                "required": ["containers"],
                "properties": {
                    "containers": {"type": "array", "items": {"$ref": REF + "io.k8s.api.core.v1.Container"},
                                   "x-kubernetes-list-type": "map"},
                    "priority": {"type": "integer", "format": "int32"},
                    "overhead": {"type": "object", "additionalProperties": {"$ref": REF + "io.k8s.apimachinery.pkg.api.resource.Quantity"}},
                },
            },
            "io.k8s.api.core.v1.Container": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "default": ""},
                    "port": {"allOf": [{"$ref": REF + "io.k8s.apimachinery.pkg.util.intstr.IntOrString"}], "default": {}},
                },
            },
            "io.k8s.apimachinery.pkg.api.resource.Quantity": {"oneOf": [{"type": "string"}, {"type": "number"}]},
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]},
            "io.k8s.api.core.v1.Unrelated": {"type": "object", "properties": {"x": {"type": "string"}}},
        }
    }
}  # fmt: skip


def test_conversion_closes_objects_bounds_int32_and_keeps_only_what_a_pod_spec_refers_to() -> None:
    schema = corev1.convert(FRAGMENT)
    defs = schema["$defs"]
    assert schema["$ref"] == "#/$defs/io.k8s.api.core.v1.PodSpec"
    assert "io.k8s.api.core.v1.Unrelated" not in defs
    pod = defs["io.k8s.api.core.v1.PodSpec"]
    assert pod["additionalProperties"] is False and "description" not in pod
    assert pod["properties"]["containers"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/io.k8s.api.core.v1.Container"},
    }
    assert pod["properties"]["priority"] == {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
    container = defs["io.k8s.api.core.v1.Container"]
    assert container["required"] == ["image", "name"]  # a pod's container names its image (pod validation)
    assert container["properties"]["name"]["pattern"] == "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    assert container["properties"]["port"] == {
        "$ref": "#/$defs/io.k8s.apimachinery.pkg.util.intstr.IntOrString"
    }
    quantity = defs["io.k8s.apimachinery.pkg.api.resource.Quantity"]
    assert quantity["anyOf"][0]["pattern"] == corev1.QUANTITY_PATTERN and quantity["anyOf"][1] == {
        "type": "number"
    }


def test_the_committed_schema_is_what_make_corev1_derives_from_the_kubernetes_module() -> None:
    # the document of the kube-apiserver the cluster tests run (`make controlplane` keeps it beside
    # the binaries, from the same k8s.io/kubernetes module): no network, no Go module cache, no skip
    assert corev1.VERSION == plane.versions()["KUBERNETES"], "tools/corev1.py and the control plane differ"
    source = plane.core_v1_openapi().read_bytes()
    want = corev1.text(corev1.published(json.loads(source), source, corev1.VERSION))
    assert podtemplate.CORE_V1_FILE.read_text(encoding="utf-8") == want, (
        "run `make corev1` and commit the file"
    )


def test_the_committed_schema_names_its_source() -> None:
    schema = podtemplate.core_v1()
    assert schema["title"] == f"core/v1 PodSpec of Kubernetes {corev1.VERSION}"
    assert f"{corev1.MODULE}@{corev1.VERSION} {corev1.SPEC_FILE} (sha256 " in schema["$comment"]
    assert len(schema["$defs"]) > 100 and "io.k8s.api.core.v1.Toleration" in schema["$defs"]
