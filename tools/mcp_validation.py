"""Write-time validation of MCP servers and the tools they list (SPEC §6 "MCP servers"): a server's name, URL and
headers, checked like an HTTP tool's; an MCP tool's name as the model sees it (`<server>__<tool>`) and whether a
listed tool can be granted; and the walks over its input schema (`open_object`, `closed_schema`,
`identity_parameters`). HTTP tool definitions are tools/validation.py's, whose URL and header rules these reuse.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from kagent.egress import is_tenant_forbidden_header
from kagent.errors import Unprocessable
from tools import placeholders
from tools.builtins import BUILTIN_NAMES
from tools.mcp_client import MCP_HEADERS
from tools.schema_bounds import tenant_schema_problem
from tools.validation import HEADER_NAME_RE, is_identity_name, parse_template, refusal, split_url

# --- MCP servers (SPEC §6 "MCP servers") ------------------------------------------------------------------------
# A server's name prefixes its tools' names as the model sees them: `<server>__<tool>`.

# linear: anchored, one class, bounded
MCP_SERVER_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,19}(?!\n)$")
# linear: anchored, one class, bounded
MODEL_TOOL_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}(?!\n)$")
MCP_SERVER_NAME_MESSAGE = (
    "A server's name starts with a lower-case letter and has only lower-case letters, digits and single _ (at most "
    "20, not ending in _), like billing."
)
MCP_TOOL_SEPARATOR = "__"
TOOL_NAME_RULES = "lower-case letters, digits and _, starting with a letter, at most 64 characters in all"
MAX_MCP_HEADERS = 20
MAX_HEADER_VALUE_CHARS = 2048


def _moved(exc: Unprocessable, path: str) -> Unprocessable:
    """split_url's refusal, named at the MCP server's own `url`."""
    return refusal(exc.code, exc.message, path)


def validate_mcp_server(
    *, name: str, url: str, headers: dict[str, str], secret_hosts: Callable[[str], list[str] | None]
) -> dict[str, Any]:
    """A server's `{name, url, headers}`, checked like an HTTP tool's URL and headers: a literal https URL under the
    URL rules, headers under the header rules with only `{{secret.NAME}}` placeholders, each secret allowed to go to
    the URL's host. Raises Unprocessable."""
    if not MCP_SERVER_NAME_RE.match(name) or MCP_TOOL_SEPARATOR in name or name.endswith("_"):
        raise refusal(
            "invalid_mcp_server_name",
            MCP_SERVER_NAME_MESSAGE,
            "$.name",
        )
    if len(url) > 2048:
        raise refusal("invalid_url", "The URL is at most 2048 characters.", "$.url")
    try:
        parts = split_url(url)
    except Unprocessable as exc:
        raise _moved(exc, "$.url") from None
    if placeholders.parse(parts.path) or placeholders.parse(parts.query):
        raise refusal("placeholder_position", "An MCP server's URL is literal: no placeholders.", "$.url")
    if len(headers) > MAX_MCP_HEADERS:
        raise refusal("invalid_header", f"At most {MAX_MCP_HEADERS} headers.", "$.headers")
    for header_name, header_value in headers.items():
        jpath = f"$.headers.{header_name}"
        if "{{" in header_name or "}}" in header_name:
            raise refusal("placeholder_position", "Header names are literal; placeholders go in values.", jpath)
        if is_tenant_forbidden_header(header_name) or header_name.lower() in MCP_HEADERS:  # the transport's own
            raise refusal("forbidden_header", f"The header {header_name} can't be set for an MCP server.", jpath)
        if not HEADER_NAME_RE.match(header_name):
            raise refusal("invalid_header", "Header names are letters, digits and hyphens.", jpath)
        if not isinstance(header_value, str) or len(header_value) > MAX_HEADER_VALUE_CHARS:
            raise refusal("invalid_header", f"Header values are strings of at most {MAX_HEADER_VALUE_CHARS}.", jpath)
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in header_value):
            raise refusal("invalid_header", "Header values may not hold control characters.", jpath)
        for ph in parse_template(header_value, jpath):
            if ph.root != "secret":
                raise refusal(
                    "placeholder_position", f"{ph.raw}: an MCP server's headers take only {{{{secret.NAME}}}}.", jpath
                )
            hosts = secret_hosts(ph.name)
            if hosts is not None and parts.host not in hosts:
                raise refusal(
                    "secret_host_not_allowed",
                    f"The secret {ph.name} may not be sent to {parts.host}; add it to the secret's allowed_hosts.",
                    jpath,
                )
    return {"name": name, "url": url, "headers": dict(headers)}


def mcp_tool_name(server: str, tool: str) -> str:
    """An MCP tool's name as the model sees it: `<server>__<tool>`."""
    return f"{server}{MCP_TOOL_SEPARATOR}{tool}"


def mcp_tool_problem(*, server: str, tool: Mapping[str, Any]) -> str | None:
    """Why a listed tool can't be granted (None: it can): its name as the model sees it, or its input schema."""
    full = mcp_tool_name(server, tool["name"])
    if not MODEL_TOOL_NAME_RE.match(full):
        return f"{full[:80]} doesn't fit the tool-name rules: {TOOL_NAME_RULES}."
    if full in BUILTIN_NAMES or tool["name"] in BUILTIN_NAMES:
        # Prefixed or not, a tool named like a built-in could pass for it (a "transfer_to_human" that isn't one).
        return f"{tool['name']} is named like a built-in tool."
    schema = tool.get("input_schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "The input schema is not a JSON Schema of type object."
    problem = tenant_schema_problem(schema, at="$.input_schema")
    if problem is not None:
        return f"The input schema is outside the bounds for tenant schemas: {problem.text}."
    open_at = open_object(schema, "$.input_schema")
    if open_at is not None:
        return (
            f"The input schema lets the model add arguments it doesn't name ({open_at}): tool arguments are strict, "
            "every object closed."
        )
    return None


# The keywords under which a JSON Schema holds other schemas: one schema, a list of them, or a name -> schema map.
_ONE_SCHEMA = ("items", "not", "if", "then", "else", "contains", "additionalItems")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems", "items")
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "dependentSchemas")


def _subschemas(schema: Mapping[str, Any], path: str) -> list[tuple[Any, str]]:
    found: list[tuple[Any, str]] = []
    for key in _ONE_SCHEMA:
        if isinstance(schema.get(key), Mapping):
            found.append((schema[key], f"{path}.{key}"))
    for key in _SCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            found.extend((item, f"{path}.{key}[{index}]") for index, item in enumerate(schema[key]))
    for key in _SCHEMA_MAPS:
        if isinstance(schema.get(key), Mapping):
            found.extend((item, f"{path}.{key}.{name}") for name, item in schema[key].items())
    return [(item, where) for item, where in found if isinstance(item, Mapping)]


def _is_object_schema(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in schema


def open_object(schema: Mapping[str, Any], path: str = "$") -> str | None:
    """Where `schema` lets an object hold members it doesn't name (`additionalProperties` true or a schema,
    `patternProperties`, `unevaluatedProperties` true or a schema), or None: every object can be closed. Bounded by
    the tenant schema bounds checked before it (depth and size)."""
    for key in ("additionalProperties", "unevaluatedProperties"):
        if key in schema and schema[key] is not False:
            return f"{path}.{key}"
    if "patternProperties" in schema:
        return f"{path}.patternProperties"
    for item, where in _subschemas(schema, path):
        found = open_object(item, where)
        if found is not None:
            return found
    return None


def closed_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` with `additionalProperties: false` on every object schema that doesn't say, at every level: what
    the model is shown of an MCP tool and what its arguments are checked against (a listing that leaves an object
    open is not grantable: `open_object`)."""
    out = dict(schema)
    for key in _ONE_SCHEMA:
        if isinstance(out.get(key), Mapping):
            out[key] = closed_schema(out[key])
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [closed_schema(item) if isinstance(item, Mapping) else item for item in out[key]]
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), Mapping):
            out[key] = {
                name: closed_schema(item) if isinstance(item, Mapping) else item for name, item in out[key].items()
            }
    if _is_object_schema(out) and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def identity_parameters(schema: Mapping[str, Any], path: str = "$.input_schema") -> list[str]:
    """The paths of the members of `schema`'s objects, at any level, whose names look like identity (an email, a
    phone, a customer id…): on a tool that needs a verified user the model must not fill them."""
    found: list[str] = []
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        found.extend(f"{path}.properties.{name}" for name in properties if is_identity_name(str(name)))
    for item, where in _subschemas(schema, path):
        found.extend(identity_parameters(item, where))
    return found
