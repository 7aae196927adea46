"""Write-time validation of HTTP tool definitions: every rule of the seed's "Templating rules", one 422 code each.

A definition that fails any rule is refused whole; nothing is stored.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kagent.egress import is_tenant_forbidden_header
from kagent.errors import Unprocessable
from kagent.validation import make_validator, schema_refusal
from tools import placeholders
from tools.builtins import BUILTIN_NAMES
from tools.mcp_client import MCP_HEADERS
from tools.placeholders import Placeholder, PlaceholderError
from tools.schema_bounds import SCHEMA_TOO_COMPLEX, tenant_schema_problem

# linear: anchored, one class, bounded
HTTP_TOOL_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,29}(?!\n)$")
MAX_PARAMETERS = 8
MAX_RESPONSE_FIELDS = 12
MAX_ITEMS = 20
MAX_TIMEOUT_MS = 15_000
DEFAULT_TIMEOUT_MS = 10_000
ALLOWED_PORTS = (443, 8443)
BODY_METHODS = ("POST", "PUT", "PATCH")
FORMATS = ("token", "text")

# linear: anchored, one class, bounded
HEADER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}(?!\n)$")

# Seed: parameters named like identity are refused on tools that need a verified user.
IDENTITY_TOKENS = frozenset({"phone", "mobile", "email", "mail", "msisdn", "telephone", "tel", "login", "username"})
IDENTITY_FRAGMENTS = ("email", "phone", "mobile", "msisdn")
IDENTITY_SUFFIXES = (
    "userid",
    "customerid",
    "accountid",
    "externalid",
    "clientid",
    "memberid",
    "custid",
    "acctid",
    "phonenumber",
    "mobilenumber",
    "emailaddress",
    "accountno",
    "accountnumber",
    "acctno",
    "customerno",
    "customernumber",
    "memberno",
    "membernumber",
    "userno",
    "usernumber",
)

# linear: anchored, one class, bounded
HOST_LABEL_RE = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)(?!\n)$")
# linear: anchored; the host class excludes the ':' and '/' that end it
URL_PREFIX_RE = re.compile(r"^https://(?P<host>[^/:?#{}\s]+)(?::(?P<port>[0-9]{1,5}))?(?P<rest>/.*)?(?!\n)$", re.DOTALL)

# One entry of `response.fields` (HTTP tools and API knowledge sources): which value of a row, under which label.
RESPONSE_FIELD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["path", "label"],
    "additionalProperties": False,
    "properties": {
        "path": {
            "type": "string",
            "minLength": 1,
            "maxLength": 200,
            "x-message": "A response field's path names a value of the row, like status or order.total (at most 200 "
            "characters).",
        },
        "label": {
            "type": "string",
            "minLength": 1,
            "maxLength": 60,
            "x-message": "A response field's label is the name the model reads, at most 60 characters.",
        },
    },
    "x-messages": {
        "required": "Each response field has a path and a label.",
        "additionalProperties": "A response field has path and label.",
        "type": "A response field is a JSON object: {path, label}.",
    },
}

TOOL_DEFINITION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name", "description", "effect", "config"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "x-message": "Give the tool a name."},
        "description": {
            "type": "string",
            "minLength": 1,
            "maxLength": 1000,
            "x-message": "Describe what the tool does, in at most 1000 characters: the model reads it to know when "
            "to call it.",
        },
        "effect": {"enum": ["read", "action"], "x-message": "The effect is read or action."},
        "requires_verified_user": {"type": "boolean", "x-message": "requires_verified_user is true or false."},
        "config": {
            "type": "object",
            "required": ["method", "url"],
            "additionalProperties": False,
            "properties": {
                "method": {
                    "enum": ["GET", "POST", "PUT", "PATCH", "DELETE"],
                    "x-message": "The method is GET, POST, PUT, PATCH or DELETE.",
                },
                "url": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 2048,
                    "x-message": "Give the URL to call: https://, at most 2048 characters.",
                },
                "headers": {
                    "type": "object",
                    "maxProperties": 20,
                    "additionalProperties": {
                        "type": "string",
                        "maxLength": 2048,
                        "x-message": "A header's value is text of at most 2048 characters.",
                    },
                    "x-messages": {
                        "maxProperties": "A tool sends at most 20 headers.",
                        "type": "The headers are a JSON object of names and values.",
                    },
                },
                "body": {"type": "object", "x-message": "The body is a JSON object (a template of the request)."},
                "parameters": {"type": "object", "x-message": "The parameters are a JSON Schema object."},
                "response": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "items_path": {
                            "type": "string",
                            "maxLength": 200,
                            "x-message": "The items path is text of at most 200 characters.",
                        },
                        "fields": {
                            "type": "array",
                            "items": RESPONSE_FIELD_SCHEMA,
                            "x-message": "The response fields are a list of {path, label}.",
                        },
                        "max_items": {
                            "type": "integer",
                            "minimum": 1,
                            "x-message": f"Max items is a whole number from 1 to {MAX_ITEMS}.",
                        },
                        "empty_message": {
                            "type": "string",
                            "maxLength": 500,
                            "x-message": "The message for no results is text of at most 500 characters.",
                        },
                    },
                    "x-messages": {
                        "additionalProperties": "The response settings are items_path, fields, max_items and "
                        "empty_message.",
                        "type": "The response settings are a JSON object.",
                    },
                },
                "timeout_ms": {
                    "type": "integer",
                    "minimum": 100,
                    "x-message": f"The timeout is a whole number of milliseconds from 100 to {MAX_TIMEOUT_MS}.",
                },
            },
            "x-messages": {
                "required": "The call needs a method and a URL.",
                "additionalProperties": "The call's settings are method, url, headers, body, parameters, response and "
                "timeout_ms.",
                "type": "The call's settings (config) are a JSON object.",
            },
        },
    },
    "x-messages": {
        "required": "A tool needs a name, a description, an effect and its call's settings (config).",
        "additionalProperties": "A tool has name, description, effect, requires_verified_user and config.",
        "type": "A tool is a JSON object.",
    },
}
TOOL_SHAPE = make_validator(TOOL_DEFINITION_SCHEMA)

PARAMETER_TYPES = ("string", "integer", "number", "boolean")
MCP_SERVER_NAME_MESSAGE = (
    "A server's name starts with a lower-case letter and has only lower-case letters, digits and single _ (at most "
    "20, not ending in _), like billing."
)
TOOL_NAME_MESSAGE = (
    "A tool's name starts with a lower-case letter and has only lower-case letters, digits and _ (at most 30), "
    "like order_status."
)


def _refuse(code: str, message: str, path: str | None = None) -> Unprocessable:
    return Unprocessable(code, message, details=[{"path": path or "$", "message": message}])


def _is_identity_name(name: str) -> bool:
    tokens = set(name.lower().split("_"))
    flat = name.lower().replace("_", "")
    return (
        bool(tokens & IDENTITY_TOKENS)
        or any(fragment in flat for fragment in IDENTITY_FRAGMENTS)
        or flat.rstrip("0123456789").endswith(IDENTITY_SUFFIXES)
        or flat == "uid"
    )


def _parse_template(text: str, path: str) -> list[Placeholder]:
    try:
        return placeholders.parse(text)
    except PlaceholderError as exc:
        raise _refuse(exc.code, exc.message, path) from None


def _check_host(host: str) -> None:
    if host.endswith("."):
        host = host[:-1]
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        raise _refuse("invalid_url", "The URL must name a host, not an IP address.", "$.config.url")
    if len(host) > 253 or "." not in host or not all(HOST_LABEL_RE.match(label) for label in host.split(".")):
        raise _refuse(
            "invalid_url",
            "The host must be a fully qualified name in lower case ASCII (use punycode for international names).",
            "$.config.url",
        )
    if host.split(".")[-1].isdigit():
        raise _refuse("invalid_url", "The host must be a name, not a number.", "$.config.url")


class UrlParts:
    def __init__(self, host: str, port: int, path: str, query: str) -> None:
        self.host, self.port, self.path, self.query = host, port, path, query


def split_url(url: str) -> UrlParts:
    """The literal `https://host[:port]/` prefix, checked, and the templated path and query after it."""
    match = URL_PREFIX_RE.match(url)
    if not match or not match.group("rest"):
        raise _refuse(
            "invalid_url",
            "The URL must start with a literal https://host[:port]/ (placeholders only in the path and query).",
            "$.config.url",
        )
    host = match.group("host")
    if "@" in host or "\\" in host or "%" in host:
        raise _refuse("invalid_url", "The URL may not hold user information or escapes in its host.", "$.config.url")
    if host != host.lower():
        raise _refuse("invalid_url", "Write the host in lower case.", "$.config.url")
    _check_host(host)
    port_text = match.group("port")
    if port_text is not None and (port_text.startswith("0") or int(port_text) not in ALLOWED_PORTS):
        raise _refuse("invalid_url", "The port must be 443 or 8443.", "$.config.url")
    rest = match.group("rest")
    _parse_template(rest, "$.config.url")  # a malformed placeholder is named as such before other URL rules
    for literal in placeholders.split(rest):
        # A lone % would let an argument finish an escape: %2{{args.a}} with a = "f" is an encoded "/".
        # linear: a literal and a fixed look-ahead
        if isinstance(literal, str) and re.search(r"%(?![0-9A-Fa-f]{2})", literal):
            raise _refuse("invalid_url", "A % in the URL must start an escape like %20.", "$.config.url")
    if "#" in rest:
        raise _refuse("invalid_url", "The URL may not hold a fragment (#).", "$.config.url")
    if any(ch.isspace() or ord(ch) < 0x20 or ch == "\\" for ch in rest):
        raise _refuse("invalid_url", "The URL may not hold spaces, control characters or backslashes.", "$.config.url")
    path, _, query = rest.partition("?")
    return UrlParts(host, int(port_text or 443), path, query)


def _check_path(path: str) -> list[Placeholder]:
    found = _parse_template(path, "$.config.url")
    literal = placeholders.split(path)
    for segment in "".join(p if isinstance(p, str) else "x" for p in literal).split("/"):
        if segment.lower().replace("%2e", ".") in (".", ".."):
            raise _refuse("invalid_url", "The path may not hold '.' or '..' segments.", "$.config.url")
    return found


def _check_query(query: str) -> list[Placeholder]:
    found: list[Placeholder] = []
    if not query:
        return found
    for pair in query.split("&"):
        key, eq, value = pair.partition("=")
        key_placeholders = _parse_template(key, "$.config.url")
        if key_placeholders:
            raise _refuse(
                "placeholder_position",
                "Placeholders may stand only in query values, not in query names.",
                "$.config.url",
            )
        if not key:
            raise _refuse("invalid_url", "Every query parameter needs a name.", "$.config.url")
        found += _parse_template(value, "$.config.url")
    return found


def _walk_body(value: Any, path: str) -> Iterator[tuple[str, str, bool]]:
    """(json path, string, is_key) for every string in the body template."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield f"{path}.{key}", key, True
            yield from _walk_body(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk_body(item, f"{path}[{index}]")
    elif isinstance(value, str):
        yield path, value, False


def validate_http_tool(
    data: dict[str, Any], *, secret_hosts: Callable[[str], list[str] | None] = lambda name: None
) -> dict[str, Any]:
    """Checks a whole definition and returns it normalized (defaults filled). Raises Unprocessable on any rule.

    `secret_hosts(name)` gives an existing secret's allowed_hosts (None if there is no such secret yet).
    """
    refused = schema_refusal(TOOL_SHAPE, data)
    if refused is not None:
        raise Unprocessable("invalid_tool", refused[0], details=refused[1])

    name = data["name"]
    if not HTTP_TOOL_NAME_RE.match(name):
        raise _refuse("invalid_tool_name", TOOL_NAME_MESSAGE, "$.name")
    if name in BUILTIN_NAMES:
        raise _refuse("tool_name_conflict", f"{name} is the name of a built-in tool.", "$.name")

    config = data["config"]
    method = config["method"]
    requires_verified_user = bool(data.get("requires_verified_user", False))
    url = split_url(config["url"])

    # Where each placeholder stands: "url" (path or query), "header", "body".
    uses: list[tuple[Placeholder, str, str]] = []
    uses += [(p, "url", "$.config.url") for p in _check_path(url.path)]
    uses += [(p, "url", "$.config.url") for p in _check_query(url.query)]

    headers = config.get("headers") or {}
    for header_name, header_value in headers.items():
        jpath = f"$.config.headers.{header_name}"
        if "{{" in header_name or "}}" in header_name:
            raise _refuse("placeholder_position", "Header names are literal; placeholders go in values.", jpath)
        if is_tenant_forbidden_header(header_name):  # one list for write time and call time
            raise _refuse("forbidden_header", f"The header {header_name} can't be set by a tool.", jpath)
        if not HEADER_NAME_RE.match(header_name):
            raise _refuse("invalid_header", "Header names are letters, digits and hyphens.", jpath)
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in header_value):
            raise _refuse("invalid_header", "Header values may not hold control characters.", jpath)
        uses += [(p, "header", jpath) for p in _parse_template(header_value, jpath)]

    body = config.get("body")
    if body is not None:
        if method not in BODY_METHODS:
            raise _refuse("invalid_body", f"A {method} request has no body; use POST, PUT or PATCH.", "$.config.body")
        for jpath, text, is_key in _walk_body(body, "$.config.body"):
            found = _parse_template(text, jpath)
            if is_key and found:
                raise _refuse("placeholder_position", "JSON keys are literal; placeholders go in values.", jpath)
            uses += [(p, "body", jpath) for p in found]

    parameters = _check_parameters(config.get("parameters"), requires_verified_user)
    formats = {pname: (schema.get("x-kagent-format") or "token") for pname, schema in parameters["properties"].items()}

    for ph, where, jpath in uses:
        if ph.root == "end_user" and not requires_verified_user:
            raise _refuse(
                "end_user_requires_verified_user",
                f"{ph.raw} needs requires_verified_user: true: identity comes only from a verified credential.",
                jpath,
            )
        if ph.root == "args":
            if ph.name not in formats:
                raise _refuse("unknown_parameter", f"{ph.raw} names no declared parameter.", jpath)
            if where != "body" and formats[ph.name] != "token":
                raise _refuse(
                    "invalid_format",
                    f"{ph.raw} is used in the {where}; only x-kagent-format token may go there (text is body only).",
                    jpath,
                )
        if ph.root == "secret":
            hosts = secret_hosts(ph.name)
            if hosts is not None and url.host not in hosts:
                raise _refuse(
                    "secret_host_not_allowed",
                    f"The secret {ph.name} may not be sent to {url.host}; add it to the secret's allowed_hosts.",
                    jpath,
                )

    response = dict(config.get("response") or {})
    if len(response.get("fields", [])) > MAX_RESPONSE_FIELDS:
        raise _refuse("too_many_fields", f"At most {MAX_RESPONSE_FIELDS} response fields.", "$.config.response.fields")
    if response.get("max_items", 1) > MAX_ITEMS:
        raise _refuse(
            "too_many_items", f"Max items is a whole number from 1 to {MAX_ITEMS}.", "$.config.response.max_items"
        )
    timeout_ms = config.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    if timeout_ms > MAX_TIMEOUT_MS:
        raise _refuse(
            "invalid_timeout",
            f"The timeout is a whole number of milliseconds from 100 to {MAX_TIMEOUT_MS}.",
            "$.config.timeout_ms",
        )

    normalized_config: dict[str, Any] = {
        "method": method,
        "url": config["url"],
        "headers": dict(headers),
        "parameters": parameters,
        "response": response,
        "timeout_ms": timeout_ms,
    }
    if body is not None:
        normalized_config["body"] = body
    return {
        "name": name,
        "description": data["description"],
        "effect": data["effect"],
        "requires_verified_user": requires_verified_user,
        "config": normalized_config,
    }


def _check_parameters(schema: Any, requires_verified_user: bool) -> dict[str, Any]:
    if schema is None:
        return {"type": "object", "properties": {}, "additionalProperties": False}
    path = "$.config.parameters"
    if schema.get("type") != "object":
        raise _refuse("invalid_parameters", "parameters is a JSON Schema of type object.", path)
    problem = tenant_schema_problem(schema, at=path)
    if problem is not None:
        code = SCHEMA_TOO_COMPLEX if problem.too_complex else "invalid_parameters"
        raise _refuse(code, f"{problem.text}.", problem.path)
    unknown = set(schema) - {"type", "properties", "required", "additionalProperties", "description"}
    if unknown:
        raise _refuse(
            "invalid_parameters", f"Unsupported keyword(s) in parameters: {', '.join(sorted(unknown))}.", path
        )
    if schema.get("additionalProperties", False) is not False:
        raise _refuse("invalid_parameters", "Tool arguments are strict: additionalProperties must be false.", path)
    properties = schema.get("properties") or {}
    if len(properties) > MAX_PARAMETERS:
        raise _refuse("too_many_parameters", f"At most {MAX_PARAMETERS} parameters.", f"{path}.properties")
    for pname, pschema in properties.items():
        ppath = f"{path}.properties.{pname}"
        if pname in placeholders.RESERVED_NAMES:
            raise _refuse("reserved_name", f"{pname} is a reserved name (args, end_user, secret, var, sys).", ppath)
        if not placeholders.PARAMETER_NAME_RE.match(pname):
            raise _refuse(
                "invalid_parameters",
                "A parameter's name starts with a lower-case letter and has only lower-case letters, digits and _ "
                "(at most 64), like order_id.",
                ppath,
            )
        if requires_verified_user and _is_identity_name(pname):
            raise _refuse(
                "identity_as_parameter",
                f"{pname} looks like identity. On a tool that needs a verified user, identity comes from the "
                "credential ({{end_user.external_id}}, {{end_user.traits.*}}), never from the model.",
                ppath,
            )
        if not isinstance(pschema, dict) or pschema.get("type") not in PARAMETER_TYPES:
            raise _refuse("invalid_parameters", f"{pname} must have a type: {', '.join(PARAMETER_TYPES)}.", ppath)
        fmt = pschema.get("x-kagent-format", "token")
        if fmt not in FORMATS:
            raise _refuse("invalid_format", f"x-kagent-format is token or text, not {str(fmt)[:40]!r}.", ppath)
        if fmt == "text" and pschema["type"] != "string":
            raise _refuse("invalid_format", "x-kagent-format text is for string parameters.", ppath)
    required = schema.get("required") or []
    missing = [name for name in required if name not in properties]
    if missing:
        raise _refuse("invalid_parameters", f"required names undeclared parameter(s): {', '.join(missing)}.", path)
    out = dict(schema)
    out["additionalProperties"] = False
    out.setdefault("properties", {})
    return out


# --- MCP servers (SPEC §6 "MCP servers") ------------------------------------------------------------------------
# A server's name prefixes its tools' names as the model sees them: `<server>__<tool>`.

# linear: anchored, one class, bounded
MCP_SERVER_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,19}(?!\n)$")
# linear: anchored, one class, bounded
MODEL_TOOL_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}(?!\n)$")
MCP_TOOL_SEPARATOR = "__"
TOOL_NAME_RULES = "lower-case letters, digits and _, starting with a letter, at most 64 characters in all"
MAX_MCP_HEADERS = 20
MAX_HEADER_VALUE_CHARS = 2048


def _moved(exc: Unprocessable, path: str) -> Unprocessable:
    """split_url's refusal, named at the MCP server's own `url`."""
    return _refuse(exc.code, exc.message, path)


def validate_mcp_server(
    *, name: str, url: str, headers: dict[str, str], secret_hosts: Callable[[str], list[str] | None]
) -> dict[str, Any]:
    """A server's `{name, url, headers}`, checked like an HTTP tool's URL and headers: a literal https URL under the
    URL rules, headers under the header rules with only `{{secret.NAME}}` placeholders, each secret allowed to go to
    the URL's host. Raises Unprocessable."""
    if not MCP_SERVER_NAME_RE.match(name) or MCP_TOOL_SEPARATOR in name or name.endswith("_"):
        raise _refuse(
            "invalid_mcp_server_name",
            MCP_SERVER_NAME_MESSAGE,
            "$.name",
        )
    if len(url) > 2048:
        raise _refuse("invalid_url", "The URL is at most 2048 characters.", "$.url")
    try:
        parts = split_url(url)
    except Unprocessable as exc:
        raise _moved(exc, "$.url") from None
    if placeholders.parse(parts.path) or placeholders.parse(parts.query):
        raise _refuse("placeholder_position", "An MCP server's URL is literal: no placeholders.", "$.url")
    if len(headers) > MAX_MCP_HEADERS:
        raise _refuse("invalid_header", f"At most {MAX_MCP_HEADERS} headers.", "$.headers")
    for header_name, header_value in headers.items():
        jpath = f"$.headers.{header_name}"
        if "{{" in header_name or "}}" in header_name:
            raise _refuse("placeholder_position", "Header names are literal; placeholders go in values.", jpath)
        if is_tenant_forbidden_header(header_name) or header_name.lower() in MCP_HEADERS:  # the transport's own
            raise _refuse("forbidden_header", f"The header {header_name} can't be set for an MCP server.", jpath)
        if not HEADER_NAME_RE.match(header_name):
            raise _refuse("invalid_header", "Header names are letters, digits and hyphens.", jpath)
        if not isinstance(header_value, str) or len(header_value) > MAX_HEADER_VALUE_CHARS:
            raise _refuse("invalid_header", f"Header values are strings of at most {MAX_HEADER_VALUE_CHARS}.", jpath)
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in header_value):
            raise _refuse("invalid_header", "Header values may not hold control characters.", jpath)
        for ph in _parse_template(header_value, jpath):
            if ph.root != "secret":
                raise _refuse(
                    "placeholder_position", f"{ph.raw}: an MCP server's headers take only {{{{secret.NAME}}}}.", jpath
                )
            hosts = secret_hosts(ph.name)
            if hosts is not None and parts.host not in hosts:
                raise _refuse(
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
        found.extend(f"{path}.properties.{name}" for name in properties if _is_identity_name(str(name)))
    for item, where in _subschemas(schema, path):
        found.extend(identity_parameters(item, where))
    return found
