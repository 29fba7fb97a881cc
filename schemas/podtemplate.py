"""A Run's pod template (§3): the seeds' short form, or a full Kubernetes PodTemplateSpec checked against core/v1.

Shape, as every model: the full form's `spec` against kube-apiserver's own PodSpec schema (vendored
in schemas/vendor/ by `make corev1`), each problem at its own line. `findings` are the rules across
its fields (the GPU container, names, mounts, and the fields jobtree overwrites); rendering the pod is
`planner.manifests`'. Reads one committed file, once.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import jsonschema_rs
from pydantic import AfterValidator, Discriminator, Field, Tag, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from schemas import GROUP
from schemas.common import Model
from schemas.kubenames import Annotations, DnsLabel, Labels
from schemas.messages import shown

CORE_V1_FILE = Path(__file__).parent / "vendor" / "core-v1-podspec.schema.json"
CORE_V1_MARK = "x-jobtree-core-v1"  # where the published schema refers to the vendored PodSpec (`publish`)
POD_SPEC = "io.k8s.api.core.v1.PodSpec"
DEFAULT_IMAGE = "registry.k8s.io/pause:3.9"
GPU_RESOURCE = "nvidia.com/gpu"
ENV_PREFIX = "JOBTREE_"  # every environment variable jobtree sets in the GPU container starts so
OWNED_SPEC = ("nodeName", "hostname", "subdomain", "restartPolicy")  # set on every pod by jobtree
OWNED_LABELS = (f"{GROUP}/", "app.kubernetes.io/managed-by")  # keys (or key prefixes) jobtree sets


def owned_key(key: str) -> bool:
    """A label or annotation key jobtree sets on the pods (and objects) it renders."""
    return key.startswith(OWNED_LABELS[0]) or key == OWNED_LABELS[1]


@functools.cache
def core_v1() -> dict[str, Any]:
    """The vendored core/v1 PodSpec schema (a Draft 2020-12 document with its closure in $defs)."""
    schema: dict[str, Any] = json.loads(CORE_V1_FILE.read_text(encoding="utf-8"))
    return schema


@functools.cache
def _validator() -> Any:
    """jsonschema-rs (Rust: regexes mean what ECMA-262, editors and the published schema say; some
    hundred times faster than the pure-Python validator, which matters at thousands of templates)."""
    return jsonschema_rs.validator_for(core_v1())


# --- core/v1 problems as sentences ------------------------------------------------------------------

SubPath = tuple[str | int, ...]
_WANT = {
    "string": 'text (quote it, like "{value}")',
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "object": "a mapping of fields (name: value, indented below it)",
    "array": "a list: [a, b], or one '- item' per line",
}


def _node(path: Sequence[str | int]) -> dict[str, Any]:
    """The vendored schema's node at `path` (a jsonschema-rs schema_path)."""
    node: Any = core_v1()
    for part in path:
        node = node[part]
    return node if isinstance(node, dict) else {}


def _problems(err: Any) -> list[tuple[SubPath, str]]:
    """One jsonschema-rs error as (path below spec, sentence with `{where}` for the field's full path)."""
    at: SubPath = tuple(err.instance_path)
    kind, value = err.kind, err.instance
    keyword = kind.name
    schema_path = list(err.schema_path)
    if keyword == "additionalProperties":
        known = sorted(_node(schema_path[:-1]).get("properties", {}))
        out = []
        for extra in sorted(kind.unexpected):
            close = difflib.get_close_matches(str(extra), known, n=1, cutoff=0.6)
            hint = (
                f"did you mean {close[0]}? rename it (or remove it)"
                if close
                else "remove it or fix its spelling"
            )
            out.append(((*at, extra), f"unknown field {{where}} (core/v1 has no such field here); {hint}"))
        return out
    if keyword == "required":
        return [((*at, kind.property), "{where} is required; add it")]
    if keyword == "type" and value is None:
        return [(at, "{where} is empty; give it a value, or remove the line")]
    if keyword == "type":
        want = _WANT.get(str(kind.types[0]), f"a {kind.types[0]}").format(value=value)
        return [(at, f"{{where}} is {shown(value)}; set {want}")]
    if keyword in ("minimum", "maximum"):
        bound = "or more" if keyword == "minimum" else "or less"
        return [(at, f"{{where}} is {shown(value)}; set {kind.limit} {bound}")]
    if keyword == "anyOf" and _node(schema_path[:-1]).get("title") == "quantity":
        return [(at, f"{{where}} is {shown(value)}; write a quantity such as 4, 500m, 1.5, 64Gi or 1e3")]
    if keyword == "anyOf" and _node(schema_path[:-1]).get("title") == "int-or-string":
        return [(at, f"{{where}} is {shown(value)}; set a whole number or a name")]
    if keyword in ("pattern", "maxLength"):
        return [(at, f"{{where}} is {shown(value)}; use lowercase letters, digits and '-', at most 63, "
                     "starting and ending with a letter or digit")]  # fmt: skip
    return [(at, f"{{where}}: {err.message}")]


def _odd_keys(node: Any, at: SubPath) -> list[tuple[SubPath, str]]:
    """Keys YAML read as something other than text (`1:`, `true:`, `null:`), which no JSON object holds."""
    out: list[tuple[SubPath, str]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(key, str):
                out.append(((*at, str(key)), f"{{where}} has the key {shown(key)}; quote it (keys are text)"))
            else:
                out += _odd_keys(value, (*at, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _odd_keys(value, (*at, i))
    return out


def spec_problems(spec: Any) -> list[tuple[SubPath, str]]:
    """Every way `spec` is not a core/v1 PodSpec kube-apiserver would take, sorted by place."""
    validator = _validator()
    try:
        if validator.is_valid(spec):
            return []
        found = {p for err in validator.iter_errors(spec) for p in _problems(err)}
    except ValueError:  # a key that is not text, which no JSON object (and so no Kubernetes object) holds
        odd = _odd_keys(spec, ())
        if not odd:
            raise
        return odd
    return sorted(found, key=lambda p: ([str(x) for x in p[0]], p[1]))


def _core_v1(spec: dict[str, Any]) -> dict[str, Any]:
    problems = spec_problems(spec)
    if problems:
        raise PydanticCustomError(
            "core_v1",
            "{count} problem(s) against core/v1 PodSpec",
            {"count": len(problems), "problems": tuple(problems)},
        )
    return spec


PodSpec = Annotated[
    dict[str, Any],
    AfterValidator(_core_v1),
    WithJsonSchema({"type": "object", CORE_V1_MARK: POD_SPEC, "description": "a core/v1 PodSpec"}),
]


# --- the two forms ----------------------------------------------------------------------------------


class EnvVar(Model):
    name: str = Field(pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
    value: str = ""


class ShortTemplate(Model):
    """The seeds' form: one container, its image, command, args and env."""

    image: str = Field(default=DEFAULT_IMAGE, min_length=1)
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)


class TemplateMetadata(Model):
    """Labels and annotations for every pod; jobtree names the pods and puts them in the run's namespace."""

    labels: Labels = Field(default_factory=dict)
    annotations: Annotations = Field(default_factory=dict)


SHORT_FIELDS = ("image", "command", "args", "env")
FULL_FIELDS = ("gpuContainer", "metadata", "spec")


class PodTemplate(Model):
    """A Kubernetes PodTemplateSpec (`metadata`, `spec`), and which container gets the GPUs."""

    gpuContainer: DnsLabel | None = None
    metadata: TemplateMetadata = Field(default_factory=TemplateMetadata)
    spec: PodSpec

    @model_validator(mode="before")
    @classmethod
    def _one_form(cls, data: Any) -> Any:
        if isinstance(data, dict) and (mixed := [k for k in SHORT_FIELDS if k in data]):
            why = (
                "{where} belongs to the short form, and this template has spec (the full form): set it on "
                "the container in spec.containers instead"
            )
            raise PydanticCustomError("template_form", why, {"problems": tuple(((k,), why) for k in mixed)})
        return data


def _form(data: Any) -> str:
    """A template with any of spec, metadata or gpuContainer is read as the full form (and told so)."""
    full = isinstance(data, PodTemplate) or isinstance(data, dict) and any(k in data for k in FULL_FIELDS)
    return "full-form" if full else "short-form"


Template = Annotated[
    Annotated[ShortTemplate, Tag("short-form")] | Annotated[PodTemplate, Tag("full-form")],
    Discriminator(_form),
]
FORM_TAGS = ("short-form", "full-form")  # how a validation error's location names the form it was read as


# --- rules across the fields of a full template ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Finding:
    """One rule a template breaks: where (below `spec.template`), what to do, and whether the run is refused."""

    at: SubPath
    message: str
    severity: str  # "error" (the run is left out) or "warning" (jobtree overwrites what was set)


def gpu_container(template: PodTemplate) -> int:
    """Index in spec.containers of the container that gets the GPUs: the named one, else the first."""
    names = [c.get("name") for c in template.spec.get("containers", [])]
    return names.index(template.gpuContainer) if template.gpuContainer in names else 0


def findings(template: ShortTemplate | PodTemplate) -> list[Finding]:
    """The rules across a template's fields; a short form has only its env to check."""
    if isinstance(template, ShortTemplate):
        return [
            _env_owned(("env", i, "name"), e.name)
            for i, e in enumerate(template.env)
            if e.name.startswith(ENV_PREFIX)
        ]
    spec = template.spec
    containers: list[dict[str, Any]] = spec.get("containers", [])
    out: list[Finding] = []
    names = [c.get("name") for c in containers]
    if template.gpuContainer is not None and template.gpuContainer not in names:
        out.append(
            Finding(
                ("gpuContainer",),
                f"gpuContainer {template.gpuContainer} names no container of spec.containers ({', '.join(map(str, names))}); "
                "name the container that runs the workload",
                "error",
            )
        )
    gpu = gpu_container(template)
    out += _names(spec, "initContainers", "containers", what="container")
    out += _names(spec, "volumes", what="volume")
    out += _mounts(spec)
    out += _placement(spec)
    for kind in ("labels", "annotations"):
        for key in getattr(template.metadata, kind):
            if owned_key(key):
                out.append(
                    Finding(
                        ("metadata", kind, key),
                        f"jobtree sets the pod {kind[:-1]} {key}; remove it here",
                        "warning",
                    )
                )
    for group in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(group, [])):
            out += _container(container, ("spec", group, i), group == "containers" and i == gpu)
    return sorted(out, key=lambda f: ([str(x) for x in f.at], f.message))


def _placement(spec: dict[str, Any]) -> list[Finding]:
    """Fields that decide where and how a pod runs, which jobtree decides (warnings: what is set is
    overwritten, or keeps the pod off the node jobtree chose)."""
    out = [
        Finding(("spec", f), f"jobtree sets spec.{f} of every pod ({_WHY[f]}); remove it here", "warning")
        for f in OWNED_SPEC
        if f in spec
    ]
    selecting = [
        f
        for f in ("nodeSelector", "affinity")
        if spec.get(f) and (f == "nodeSelector" or "nodeAffinity" in spec[f])
    ]
    out += [
        Finding(
            ("spec", f),
            f"jobtree places each pod on a node itself (nodeName); a kubelet refuses a pod whose {f} its "
            "node does not match, so select nodes with the run's gpuType and its budgets' selectors instead",
            "warning",
        )
        for f in selecting
    ]
    return out


_WHY = {
    "nodeName": "each pod runs on the node its lease holds",
    "hostname": "each pod's name in the run's headless Service",
    "subdomain": "the run's headless Service",
    "restartPolicy": "Never: a failed pod is a lease decision, not a restart",
}


def _env_owned(at: SubPath, name: str) -> Finding:
    return Finding(at, f"jobtree sets the {ENV_PREFIX}* variables ({name} among them) in the GPU container; "
                       "rename this variable or remove it", "warning")  # fmt: skip


def _container(container: dict[str, Any], at: SubPath, is_gpu: bool) -> list[Finding]:
    out = []
    resources = container.get("resources") or {}
    for part in ("limits", "requests"):
        if GPU_RESOURCE in (resources.get(part) or {}):
            where = (*at, "resources", part, GPU_RESOURCE)
            if is_gpu:
                out.append(Finding(where, f"jobtree sets {GPU_RESOURCE} of the GPU container to the GPUs each pod's "
                                          "leases hold; remove it here", "warning"))  # fmt: skip
            else:
                out.append(Finding(where, f"only the GPU container gets GPUs, from the run's leases; remove {GPU_RESOURCE} "
                                          "here (or name this container in gpuContainer)", "error"))  # fmt: skip
    if is_gpu:
        for i, env in enumerate(container.get("env") or []):
            name = env.get("name", "") if isinstance(env, dict) else ""
            if name.startswith(ENV_PREFIX):
                out.append(_env_owned((*at, "env", i, "name"), name))
    return out


def _names(spec: dict[str, Any], *groups: str, what: str) -> list[Finding]:
    seen: dict[str, SubPath] = {}
    out = []
    for group in groups:
        for i, item in enumerate(spec.get(group) or []):
            name = item.get("name")
            where: SubPath = ("spec", group, i, "name")
            if name in seen:
                first = ".".join(str(x) for x in seen[name][1:3])
                out.append(
                    Finding(where, f"{what} name {name} is already used by spec.{first}; rename one", "error")
                )
            seen.setdefault(name, where)
    return out


def _mounts(spec: dict[str, Any]) -> list[Finding]:
    volumes = sorted({v.get("name") for v in spec.get("volumes") or []})
    out = []
    for group in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(group) or []):
            for j, mount in enumerate(container.get("volumeMounts") or []):
                if mount.get("name") not in volumes:
                    have = ", ".join(volumes) or "none"
                    out.append(
                        Finding(
                            ("spec", group, i, "volumeMounts", j, "name"),
                            f"volumeMounts names volume {mount.get('name')}, which spec.volumes does not declare "
                            f"(declared: {have}); add it to spec.volumes or fix the name",
                            "error",
                        )
                    )
    return out


def published(schema: dict[str, Any]) -> dict[str, Any]:
    """A published schema whose PodSpec fields refer to the vendored core/v1 definitions (in $defs)."""
    vendored = core_v1()
    found = False

    def walk(node: Any) -> Any:
        nonlocal found
        if isinstance(node, dict):
            if node.get(CORE_V1_MARK):
                found = True
                return {"$ref": f"#/$defs/{node[CORE_V1_MARK]}"}
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out: dict[str, Any] = walk(schema)
    if found:
        out["$defs"] = {**out.get("$defs", {}), **vendored["$defs"]}
    return out
