"""Hand-written OpenAPI components: the API's objects are rendered by plain functions, not serializers, so their
schemas are declared here beside them (and the agent config's JSON Schema is published as is)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema

from kagent.validation import strip_extensions


class ApiSchema(AutoSchema):
    """An operation's description in the document is what its `extend_schema(description=…)` says, or nothing:
    drf-spectacular's default falls back to the view's docstring or a base class's, which are written for the
    code's readers (ProjectApi's was on most operations of `/v1/docs`)."""

    def get_description(self) -> str:  # type: ignore[override]  # AutoSchema's own signature, not DRF's
        return ""


_COMPONENTS: dict[str, dict[str, Any]] = {}
_EMPTY_IS_UNSET: set[str] = set()


def component(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Registers a schema under components/schemas and returns a $ref to it."""
    _COMPONENTS[name] = {key: value for key, value in strip_extensions(schema).items() if key != "$schema"}
    return {"$ref": f"#/components/schemas/{name}"}


def registered_components() -> dict[str, dict[str, Any]]:
    return dict(_COMPONENTS)


_WEBHOOKS: dict[str, dict[str, Any]] = {}


def webhook(name: str, ref: dict[str, Any], description: str) -> None:
    """An event the API POSTs to the business's endpoints, in the document's `webhooks` (OpenAPI 3.1): its body
    is `ref`, and any 2xx answer is success."""
    _WEBHOOKS[name] = {
        "post": {
            "operationId": f"webhook_{name.replace('.', '_')}",
            "description": description,
            "requestBody": {"required": True, "content": {"application/json": {"schema": ref}}},
            "responses": {"2XX": {"description": "received (any other answer is retried)"}},
        }
    }


def empty_is_unset(*operation_ids: str) -> None:
    """These operations read their filters with `kagent.api.param_*`, where an empty value (`?status=`, as a filter
    form sends "any") is no filter: their documented parameters say so (the fuzzer found the document refusing
    what the API accepts)."""
    _EMPTY_IS_UNSET.update(operation_ids)


def list_of(ref: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {
        200: {
            "type": "object",
            "required": ["data", "next"],
            "properties": {"data": {"type": "array", "items": ref}, "next": {"type": ["string", "null"]}},
        }
    }


def json_body(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {"application/json": schema}


ERROR = component(
    "Error",
    {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "details": {}},
            }
        },
    },
)

TIMESTAMP = {"type": "integer", "description": "Unix seconds"}
NULLABLE_TIMESTAMP = {"type": ["integer", "null"], "description": "Unix seconds"}


ERROR_RESPONSE = {
    "description": "SPEC §4's error JSON: a stable `code`, a `message` for people, `details` (null or a list of "
    "{path, message})",
    "content": {"application/json": {"schema": ERROR}},
}


UNAVAILABLE_RESPONSE = {
    "description": "PostgreSQL or Redis is briefly out of reach: `service_unavailable` in the error JSON, nothing was "
    "done; try again after Retry-After",
    "headers": {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}},
    "content": {"application/json": {"schema": ERROR}},
}


def add_components(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: our components and webhooks, and every operation's errors (any 4xx, in the
    error JSON: an unknown id, a body or parameter that isn't valid, a missing key, a limit reached…)."""
    result.setdefault("components", {}).setdefault("schemas", {}).update(_COMPONENTS)
    if _WEBHOOKS:
        result["webhooks"] = dict(_WEBHOOKS)
    for item in result.get("paths", {}).values():
        for method, operation in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                operation.setdefault("responses", {}).setdefault("4XX", ERROR_RESPONSE)
                operation["responses"].setdefault("503", UNAVAILABLE_RESPONSE)
            if method == "get" and operation.get("operationId") in _EMPTY_IS_UNSET:
                for parameter in operation.get("parameters", []):
                    if parameter.get("in") == "query" and "schema" in parameter:
                        empty = {"type": "string", "maxLength": 0, "description": "empty: no filter"}
                        parameter["schema"] = {"anyOf": [parameter["schema"], empty]}
    return result


# drf-spectacular registers extensions in an unannotated __init_subclass__.
class ApiKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "kagent.auth.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A secret key (ka_sk_…) or, for sessions and runs only, a publishable key (ka_pk_…).",
        }
