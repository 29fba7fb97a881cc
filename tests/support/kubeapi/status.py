"""Errors as the API server reports them: `meta/v1 Status` bodies with the real reason and code.

Every refusal in the server is an `ApiError` raised where the decision is made and rendered by the
HTTP layer; nothing here decides *whether* to refuse, only how Kubernetes words and codes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Cause:
    """One `StatusCause`: a machine-readable reason, the field it concerns, and a message."""

    reason: str
    message: str
    field: str = ""

    def as_dict(self) -> dict[str, str]:
        out = {"reason": self.reason, "message": self.message}
        if self.field:
            out["field"] = self.field
        return out


@dataclass(frozen=True, slots=True)
class Target:
    """What a Status names in `details`: the resource (plural, for most reasons) or the kind."""

    group: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""


class ApiError(Exception):
    """A request the server refuses; `status()` is the body a real kube-apiserver would send."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        target: Target | None = None,
        causes: tuple[Cause, ...] = (),
        retry_after: int | None = None,
        extra_metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.target = target
        self.causes = causes
        self.retry_after = retry_after
        self.extra_metadata = extra_metadata or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.extra_metadata),
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:
            del body["reason"]
        details: dict[str, Any] = {}
        if self.target is not None:
            for key in ("name", "group", "kind", "uid"):
                value = getattr(self.target, key)
                if value:
                    details[key] = value
        if self.causes:
            details["causes"] = [cause.as_dict() for cause in self.causes]
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        if details or self.target is not None:
            body["details"] = details
        return body


@dataclass(frozen=True, slots=True)
class Resource:
    """The qualified resource an error is about: `runs.rq.davidlangworthy.io`, or `pods` for core."""

    group: str
    plural: str
    kind: str = field(default="")

    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def qualified_kind(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind


def not_found(resource: Resource, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{resource.qualified()} "{name}" not found',
        Target(resource.group, resource.plural, name),
    )


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", Target())


def already_exists(resource: Resource, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{resource.qualified()} "{name}" already exists',
        Target(resource.group, resource.plural, name),
    )


def conflict(resource: Resource, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource.qualified()} "{name}": {why}',
        Target(resource.group, resource.plural, name),
    )


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def stale(resource: Resource, name: str) -> ApiError:
    return conflict(resource, name, STALE)


def invalid(resource: Resource, name: str, causes: list[Cause]) -> ApiError:
    """422 Invalid, worded as `Kind.group "name" is invalid: field: message[, ...]`."""
    rendered = [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
    summary = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    return ApiError(
        422,
        "Invalid",
        f'{resource.qualified_kind()} "{name}" is invalid: {summary}',
        Target(resource.group, resource.kind, name),
        tuple(causes),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(resource: Resource, name: str, why: str) -> ApiError:
    return ApiError(
        403,
        "Forbidden",
        f'{resource.qualified()} "{name}" is forbidden: {why}',
        Target(resource.group, resource.plural, name),
    )


def expired(message: str, extra_metadata: dict[str, Any] | None = None) -> ApiError:
    return ApiError(410, "Expired", message, extra_metadata=extra_metadata)


def method_not_allowed() -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def unsupported_media_type(content_type: str, accepted: tuple[str, ...]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: {', '.join(accepted)}",
        Target(),
    )


def not_acceptable() -> ApiError:
    return ApiError(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json, application/yaml",
        Target(),
    )


def timeout(message: str) -> ApiError:
    return ApiError(504, "Timeout", message, Target(), retry_after=1)


def canned(code: int, message: str = "", retry_after: int | None = None) -> ApiError:
    """The Status a fault injects for `code`, with the reason the real server pairs with it."""
    reason = REASONS.get(code, "Unknown")
    text = message or DEFAULT_MESSAGES.get(code, f"the server responded with the status code {code}")
    causes = (Cause("UnexpectedServerResponse", text),) if code == 500 else ()
    return ApiError(code, reason, text, Target(), causes, retry_after)


REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Gone",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}

DEFAULT_MESSAGES = {
    409: "the object has been modified; please apply your changes to the latest version and try again",
    410: "the resource is gone",
    429: "the server has received too many requests and has asked us to try again later",
    500: 'an error on the server ("injected") has prevented the request from succeeding',
    503: "the server is currently unable to handle the request",
}
