"""Write-time validation of HTTP tool definitions: every rule of the seed's "Templating rules", one 422 code each.

A definition that fails any rule is refused whole; nothing is stored. Its JSON shape, checked first, is
tools/definition_shape.py's; the rules of MCP servers and the tools they list are tools/mcp_validation.py's.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator
from typing import Any

from kagent.egress import is_tenant_forbidden_header
from kagent.errors import Unprocessable
from kagent.validation import schema_refusal
from tools import placeholders
from tools.builtins import BUILTIN_NAMES
from tools.definition_shape import MAX_ITEMS, MAX_TIMEOUT_MS, TOOL_SHAPE
from tools.placeholders import Placeholder, PlaceholderError
from tools.schema_bounds import SCHEMA_TOO_COMPLEX, tenant_schema_problem

# linear: anchored, one class, bounded
HTTP_TOOL_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,29}(?!\n)$")
MAX_PARAMETERS = 8
MAX_RESPONSE_FIELDS = 12
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

PARAMETER_TYPES = ("string", "integer", "number", "boolean")
TOOL_NAME_MESSAGE = (
    "A tool's name starts with a lower-case letter and has only lower-case letters, digits and _ (at most 30), "
    "like order_status."
)


def refusal(code: str, message: str, path: str | None = None) -> Unprocessable:
    return Unprocessable(code, message, details=[{"path": path or "$", "message": message}])


def is_identity_name(name: str) -> bool:
    tokens = set(name.lower().split("_"))
    flat = name.lower().replace("_", "")
    return (
        bool(tokens & IDENTITY_TOKENS)
        or any(fragment in flat for fragment in IDENTITY_FRAGMENTS)
        or flat.rstrip("0123456789").endswith(IDENTITY_SUFFIXES)
        or flat == "uid"
    )


def parse_template(text: str, path: str) -> list[Placeholder]:
    try:
        return placeholders.parse(text)
    except PlaceholderError as exc:
        raise refusal(exc.code, exc.message, path) from None


def _check_host(host: str) -> None:
    if host.endswith("."):
        host = host[:-1]
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        raise refusal("invalid_url", "The URL must name a host, not an IP address.", "$.config.url")
    if len(host) > 253 or "." not in host or not all(HOST_LABEL_RE.match(label) for label in host.split(".")):
        raise refusal(
            "invalid_url",
            "The host must be a fully qualified name in lower case ASCII (use punycode for international names).",
            "$.config.url",
        )
    if host.split(".")[-1].isdigit():
        raise refusal("invalid_url", "The host must be a name, not a number.", "$.config.url")


class UrlParts:
    def __init__(self, host: str, port: int, path: str, query: str) -> None:
        self.host, self.port, self.path, self.query = host, port, path, query


def split_url(url: str) -> UrlParts:
    """The literal `https://host[:port]/` prefix, checked, and the templated path and query after it."""
    match = URL_PREFIX_RE.match(url)
    if not match or not match.group("rest"):
        raise refusal(
            "invalid_url",
            "The URL must start with a literal https://host[:port]/ (placeholders only in the path and query).",
            "$.config.url",
        )
    host = match.group("host")
    if "@" in host or "\\" in host or "%" in host:
        raise refusal("invalid_url", "The URL may not hold user information or escapes in its host.", "$.config.url")
    if host != host.lower():
        raise refusal("invalid_url", "Write the host in lower case.", "$.config.url")
    _check_host(host)
    port_text = match.group("port")
    if port_text is not None and (port_text.startswith("0") or int(port_text) not in ALLOWED_PORTS):
        raise refusal("invalid_url", "The port must be 443 or 8443.", "$.config.url")
    rest = match.group("rest")
    parse_template(rest, "$.config.url")  # a malformed placeholder is named as such before other URL rules
    for literal in placeholders.split(rest):
        # A lone % would let an argument finish an escape: %2{{args.a}} with a = "f" is an encoded "/".
        # linear: a literal and a fixed look-ahead
        if isinstance(literal, str) and re.search(r"%(?![0-9A-Fa-f]{2})", literal):
            raise refusal("invalid_url", "A % in the URL must start an escape like %20.", "$.config.url")
    if "#" in rest:
        raise refusal("invalid_url", "The URL may not hold a fragment (#).", "$.config.url")
    if any(ch.isspace() or ord(ch) < 0x20 or ch == "\\" for ch in rest):
        raise refusal("invalid_url", "The URL may not hold spaces, control characters or backslashes.", "$.config.url")
    path, _, query = rest.partition("?")
    return UrlParts(host, int(port_text or 443), path, query)


def _check_path(path: str) -> list[Placeholder]:
    found = parse_template(path, "$.config.url")
    literal = placeholders.split(path)
    for segment in "".join(p if isinstance(p, str) else "x" for p in literal).split("/"):
        if segment.lower().replace("%2e", ".") in (".", ".."):
            raise refusal("invalid_url", "The path may not hold '.' or '..' segments.", "$.config.url")
    return found


def _check_query(query: str) -> list[Placeholder]:
    found: list[Placeholder] = []
    if not query:
        return found
    for pair in query.split("&"):
        key, eq, value = pair.partition("=")
        key_placeholders = parse_template(key, "$.config.url")
        if key_placeholders:
            raise refusal(
                "placeholder_position",
                "Placeholders may stand only in query values, not in query names.",
                "$.config.url",
            )
        if not key:
            raise refusal("invalid_url", "Every query parameter needs a name.", "$.config.url")
        found += parse_template(value, "$.config.url")
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
        raise refusal("invalid_tool_name", TOOL_NAME_MESSAGE, "$.name")
    if name in BUILTIN_NAMES:
        raise refusal("tool_name_conflict", f"{name} is the name of a built-in tool.", "$.name")

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
            raise refusal("placeholder_position", "Header names are literal; placeholders go in values.", jpath)
        if is_tenant_forbidden_header(header_name):  # one list for write time and call time
            raise refusal("forbidden_header", f"The header {header_name} can't be set by a tool.", jpath)
        if not HEADER_NAME_RE.match(header_name):
            raise refusal("invalid_header", "Header names are letters, digits and hyphens.", jpath)
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in header_value):
            raise refusal("invalid_header", "Header values may not hold control characters.", jpath)
        uses += [(p, "header", jpath) for p in parse_template(header_value, jpath)]

    body = config.get("body")
    if body is not None:
        if method not in BODY_METHODS:
            raise refusal("invalid_body", f"A {method} request has no body; use POST, PUT or PATCH.", "$.config.body")
        for jpath, text, is_key in _walk_body(body, "$.config.body"):
            found = parse_template(text, jpath)
            if is_key and found:
                raise refusal("placeholder_position", "JSON keys are literal; placeholders go in values.", jpath)
            uses += [(p, "body", jpath) for p in found]

    parameters = _check_parameters(config.get("parameters"), requires_verified_user)
    formats = {pname: (schema.get("x-kagent-format") or "token") for pname, schema in parameters["properties"].items()}

    for ph, where, jpath in uses:
        if ph.root == "end_user" and not requires_verified_user:
            raise refusal(
                "end_user_requires_verified_user",
                f"{ph.raw} needs requires_verified_user: true: identity comes only from a verified credential.",
                jpath,
            )
        if ph.root == "args":
            if ph.name not in formats:
                raise refusal("unknown_parameter", f"{ph.raw} names no declared parameter.", jpath)
            if where != "body" and formats[ph.name] != "token":
                raise refusal(
                    "invalid_format",
                    f"{ph.raw} is used in the {where}; only x-kagent-format token may go there (text is body only).",
                    jpath,
                )
        if ph.root == "secret":
            hosts = secret_hosts(ph.name)
            if hosts is not None and url.host not in hosts:
                raise refusal(
                    "secret_host_not_allowed",
                    f"The secret {ph.name} may not be sent to {url.host}; add it to the secret's allowed_hosts.",
                    jpath,
                )

    response = dict(config.get("response") or {})
    if len(response.get("fields", [])) > MAX_RESPONSE_FIELDS:
        raise refusal("too_many_fields", f"At most {MAX_RESPONSE_FIELDS} response fields.", "$.config.response.fields")
    if response.get("max_items", 1) > MAX_ITEMS:
        raise refusal(
            "too_many_items", f"Max items is a whole number from 1 to {MAX_ITEMS}.", "$.config.response.max_items"
        )
    timeout_ms = config.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    if timeout_ms > MAX_TIMEOUT_MS:
        raise refusal(
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
        raise refusal("invalid_parameters", "parameters is a JSON Schema of type object.", path)
    problem = tenant_schema_problem(schema, at=path)
    if problem is not None:
        code = SCHEMA_TOO_COMPLEX if problem.too_complex else "invalid_parameters"
        raise refusal(code, f"{problem.text}.", problem.path)
    unknown = set(schema) - {"type", "properties", "required", "additionalProperties", "description"}
    if unknown:
        raise refusal(
            "invalid_parameters", f"Unsupported keyword(s) in parameters: {', '.join(sorted(unknown))}.", path
        )
    if schema.get("additionalProperties", False) is not False:
        raise refusal("invalid_parameters", "Tool arguments are strict: additionalProperties must be false.", path)
    properties = schema.get("properties") or {}
    if len(properties) > MAX_PARAMETERS:
        raise refusal("too_many_parameters", f"At most {MAX_PARAMETERS} parameters.", f"{path}.properties")
    for pname, pschema in properties.items():
        ppath = f"{path}.properties.{pname}"
        if pname in placeholders.RESERVED_NAMES:
            raise refusal("reserved_name", f"{pname} is a reserved name (args, end_user, secret, var, sys).", ppath)
        if not placeholders.PARAMETER_NAME_RE.match(pname):
            raise refusal(
                "invalid_parameters",
                "A parameter's name starts with a lower-case letter and has only lower-case letters, digits and _ "
                "(at most 64), like order_id.",
                ppath,
            )
        if requires_verified_user and is_identity_name(pname):
            raise refusal(
                "identity_as_parameter",
                f"{pname} looks like identity. On a tool that needs a verified user, identity comes from the "
                "credential ({{end_user.external_id}}, {{end_user.traits.*}}), never from the model.",
                ppath,
            )
        if not isinstance(pschema, dict) or pschema.get("type") not in PARAMETER_TYPES:
            raise refusal("invalid_parameters", f"{pname} must have a type: {', '.join(PARAMETER_TYPES)}.", ppath)
        fmt = pschema.get("x-kagent-format", "token")
        if fmt not in FORMATS:
            raise refusal("invalid_format", f"x-kagent-format is token or text, not {str(fmt)[:40]!r}.", ppath)
        if fmt == "text" and pschema["type"] != "string":
            raise refusal("invalid_format", "x-kagent-format text is for string parameters.", ppath)
    required = schema.get("required") or []
    missing = [name for name in required if name not in properties]
    if missing:
        raise refusal("invalid_parameters", f"required names undeclared parameter(s): {', '.join(missing)}.", path)
    out = dict(schema)
    out["additionalProperties"] = False
    out.setdefault("properties", {})
    return out
