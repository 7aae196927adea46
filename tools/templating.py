"""Render an HTTP tool definition into one request (seed "Templating rules", SPEC §6 "Bodies").

Fail-closed: any placeholder that is unresolved or blank aborts before anything is sent. Every value is escaped for
where it lands, so no value can change the scheme, host or port, add a path segment, a query parameter, a header or
a JSON key:

- URL path: one path segment, percent-encoded with nothing left unescaped but A-Z a-z 0-9 `-._~`, so `/`, `?`, `#`
  and `%` in a value stay inside the segment. After substitution no segment may be `.` or `..`, encoded or not.
- Query: values only (a placeholder in a query key is a template error), encoded the same way.
- Header: the value must be printable ASCII; CR/LF can never start a new header.
- JSON body: keys are literal; a string that is exactly one placeholder takes the value's JSON value; other strings
  are text with the values inside, JSON-escaped by the encoder.

Arguments from the model: Arabic-Indic and extended Arabic-Indic digits become ASCII before any check. `token`
format (the default, and the only one allowed in the URL or headers): letters, digits, spaces and `._@:+-`, at most
64 characters. `text` format (body only): at most 1,000 characters, control/bidi/zero-width characters stripped.
A secret is only sent to the hosts in its `allowed_hosts`. `{{end_user.*}}` comes only from the verified identity
the caller passes in, never from the model. Those values and their checks are tools/template_values.py's; this
module puts them where they land.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import jsonschema

from kagent.egress import EgressError, is_tenant_forbidden_header, url_check
from kagent.masking import mask_secrets
from tools.arguments import UncheckableArguments, argument_errors
from tools.placeholders import Placeholder, PlaceholderError, split
from tools.template_values import EndUserIdentity, Resolver, SecretLookup, TemplateError, normalize_arguments

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
BODY_METHODS = ("POST", "PUT", "PATCH")
DEFAULT_TIMEOUT_MS = 10_000
# linear: anchored, one class, bounded
_HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}(?!\n)$")
# linear: anchored, one class
_HEADER_VALUE_RE = re.compile(r"^[\x20-\x7e]*(?!\n)$")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


@dataclass(frozen=True)
class RenderedRequest:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None
    timeout_ms: int
    host: str
    port: int
    path: str  # without the query
    secret_values: tuple[str, ...]  # to mask in anything shown or stored


# --- rendering ---------------------------------------------------------------------------------------------------


def _split(template: str, where: str) -> list[str | Placeholder]:
    try:
        return split(template)
    except PlaceholderError as exc:
        raise TemplateError(exc.code, f"{where}: {exc.message}") from exc


def _has_lone_percent(literal: str) -> bool:
    """A `%` not followed by two hex digits in the template's own text."""
    at = literal.find("%")
    while at != -1:
        if not all(ch in _HEX_DIGITS for ch in literal[at + 1 : at + 3]) or at + 3 > len(literal):
            return True
        at = literal.find("%", at + 3)
    return False


def _render_url_part(template: str, resolver: Resolver, where: str) -> str:
    out: list[str] = []
    for piece in _split(template, where):
        if isinstance(piece, str):
            # Checked here too, not only when a tool is written: a definition stored before the rule (or copied into
            # a published version) must not let an argument finish an escape (%2{{args.a}} with a = "f" is "/").
            if _has_lone_percent(piece):
                raise TemplateError("invalid_template", "a % in the URL must start an escape like %20")
            out.append(piece)
        else:
            out.append(quote(resolver.value(piece, where), safe=""))
    return "".join(out)


def _is_dot_segment(segment: str) -> bool:
    for _ in range(4):
        if segment in (".", ".."):
            return True
        decoded = unquote(segment)
        if decoded == segment:
            break
        segment = decoded
    return segment in (".", "..")


def _render_body_node(node: Any, resolver: Resolver) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if not isinstance(key, str) or "{{" in key or "}}" in key:
                raise TemplateError("invalid_template", "body keys are literal: placeholders are not allowed in keys")
            out[key] = _render_body_node(value, resolver)
        return out
    if isinstance(node, list):
        return [_render_body_node(v, resolver) for v in node]
    if isinstance(node, str):
        pieces = _split(node, "body")
        if len(pieces) == 1 and not isinstance(pieces[0], str):
            return resolver.value(pieces[0], "body_json")
        parts: list[str] = []
        for piece in pieces:
            parts.append(piece if isinstance(piece, str) else resolver.value(piece, "body_text"))
        return "".join(parts)
    return node


def _config(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    config = tool.get("config") if isinstance(tool, Mapping) else None
    if not isinstance(config, Mapping):
        raise TemplateError("invalid_template", "the tool has no config")
    return config


def _validate_arguments(schema: Any, arguments: Mapping[str, Any]) -> None:
    if not isinstance(schema, dict):
        raise TemplateError("invalid_template", "parameters must be a JSON Schema object")
    try:
        # Tenant patterns with a time limit, no $ref fetched: as in the policy check.
        error = jsonschema.exceptions.best_match(argument_errors(schema, dict(arguments)))
    except UncheckableArguments as exc:
        raise TemplateError("invalid_template", f"the parameters can't be checked: {exc.message}") from exc
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "arguments"
        raise TemplateError(
            "invalid_arguments",
            f"{where}: {error.message}"[:300],
            parameter=str(error.absolute_path[0]) if error.absolute_path else "",
        )


def _method(config: Mapping[str, Any]) -> str:
    method = config.get("method")
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise TemplateError("invalid_template", "method must be GET, POST, PUT, PATCH or DELETE")
    return method.upper()


def _checked_arguments(config: Mapping[str, Any], arguments: Any) -> tuple[Mapping[str, Any], dict[str, Any]]:
    """The arguments with ASCII digits, validated against the tool's parameters; and the parameters' properties."""
    if not isinstance(arguments, Mapping):
        raise TemplateError("invalid_arguments", "arguments must be an object")
    schema = config.get("parameters") or {"type": "object", "properties": {}}
    normalized = normalize_arguments(dict(arguments))
    _validate_arguments(schema, normalized)
    properties = schema.get("properties") or {}
    return normalized, properties if isinstance(properties, dict) else {}


@dataclass(frozen=True)
class _Origin:
    authority: str  # host[:port], literal in the template
    host: str  # as checked by the outbound client (where secrets may go)
    rest: str  # the path and query template after the authority, from its "/"


def _origin(config: Mapping[str, Any]) -> _Origin:
    """Seed: the URL must start with a literal `https://host[:port]/`."""
    url_template = config.get("url")
    if not isinstance(url_template, str) or not url_template[:8].lower() == "https://":
        raise TemplateError("invalid_template", "the URL must start with https://")
    rest = url_template[8:]
    slash = rest.find("/")
    if slash <= 0 or any(c in rest[:slash] for c in "{}?#"):
        raise TemplateError("invalid_template", "the URL must start with a literal https://host[:port]/")
    authority = rest[:slash]
    try:
        checked = url_check(f"https://{authority}/")
    except EgressError as exc:
        raise TemplateError("invalid_template", f"the URL's host is not allowed: {exc.message}") from exc
    return _Origin(authority=authority, host=checked.host, rest=rest[slash:])


def _render_query(query_template: str, resolver: Resolver) -> str:
    query_parts: list[str] = []
    for pair in query_template.split("&"):
        key, eq, value_template = pair.partition("=")
        if "{{" in key or "}}" in key:
            raise TemplateError("invalid_template", "placeholders may only be query values, not keys")
        query_parts.append(key + eq + _render_url_part(value_template, resolver, "query"))
    return "&".join(query_parts)


def _render_url(origin: _Origin, resolver: Resolver) -> str:
    """Values only in the path (one segment each, no `.` or `..` after substitution) and in query values."""
    path_template, has_query, query_template = origin.rest.partition("?")
    if "#" in path_template or "#" in query_template:
        raise TemplateError("invalid_template", "URL fragments are not allowed")
    path = _render_url_part(path_template, resolver, "path")
    if any(_is_dot_segment(segment) for segment in path.split("/")):
        raise TemplateError("unsafe_path", "after substitution the path may not contain . or .. segments")
    query = ("?" + _render_query(query_template, resolver)) if has_query else ""
    return f"https://{origin.authority}{path}{query}"


def _render_header(name: Any, template: Any, resolver: Resolver, earlier: Mapping[str, str]) -> str:
    if not isinstance(name, str) or not _HEADER_NAME_RE.fullmatch(name) or not isinstance(template, str):
        raise TemplateError("invalid_template", "header names must be tokens and values strings")
    if is_tenant_forbidden_header(name):
        raise TemplateError("forbidden_header", f"the {name} header cannot be set by a tool")
    if name.lower() in (h.lower() for h in earlier):
        raise TemplateError("invalid_template", f"the {name} header is given twice")
    value = "".join(
        piece if isinstance(piece, str) else resolver.value(piece, "header") for piece in _split(template, name)
    )
    if not _HEADER_VALUE_RE.fullmatch(value):
        raise TemplateError("invalid_header_value", f"the {name} header value holds characters not allowed there")
    return value


def _render_headers(config: Mapping[str, Any], resolver: Resolver) -> dict[str, str]:
    raw_headers = config.get("headers") or {}
    if not isinstance(raw_headers, Mapping):
        raise TemplateError("invalid_template", "headers must be an object")
    headers: dict[str, str] = {}
    for name, template in raw_headers.items():
        headers[name] = _render_header(name, template, resolver, headers)
    return headers


def _render_body(config: Mapping[str, Any], method: str, resolver: Resolver) -> bytes | None:
    """SPEC §6 "Bodies": a JSON object template, for POST, PUT and PATCH only."""
    if "body" not in config or config["body"] is None:
        return None
    if method not in BODY_METHODS:
        raise TemplateError("invalid_template", "only POST, PUT and PATCH tools have a body")
    if not isinstance(config["body"], dict):
        raise TemplateError("invalid_template", "the body template must be a JSON object")
    rendered = _render_body_node(config["body"], resolver)
    return json.dumps(rendered, ensure_ascii=False, separators=(",", ":")).encode()


def _timeout_ms(config: Mapping[str, Any]) -> int:
    timeout_ms = config.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or not 1 <= timeout_ms <= 15_000:
        raise TemplateError("invalid_template", "timeout_ms must be an integer from 1 to 15000")
    return timeout_ms


def render_request(
    *,
    tool: Mapping[str, Any],
    arguments: Mapping[str, Any],
    end_user: EndUserIdentity | None,
    variables: Mapping[str, str],
    secret_lookup: SecretLookup,
) -> RenderedRequest:
    """The request an HTTP tool call makes, or TemplateError. Nothing is sent here.

    The steps run in a fixed order (method, arguments, origin, URL, headers, body, timeout), so the first problem
    reported for a given definition and arguments is always the same one.
    """
    config = _config(tool)
    method = _method(config)
    arguments, properties = _checked_arguments(config, arguments)
    origin = _origin(config)
    resolver = Resolver(
        properties=properties,
        arguments=arguments,
        end_user=end_user,
        variables=variables,
        secret_lookup=secret_lookup,
        host=origin.host,
    )
    url = _render_url(origin, resolver)
    headers = _render_headers(config, resolver)
    body = _render_body(config, method, resolver)
    if body is not None and not any(h.lower() == "content-type" for h in headers):
        headers["Content-Type"] = "application/json"
    timeout_ms = _timeout_ms(config)
    try:
        target = url_check(url)
    except EgressError as exc:  # the literal parts of the template were not a valid URL
        raise TemplateError("invalid_template", f"the rendered URL is not allowed: {exc.message}") from exc
    return RenderedRequest(
        method=method,
        url=url,
        headers=headers,
        body=body,
        timeout_ms=timeout_ms,
        host=target.host,
        port=target.port,
        path=target.path,
        secret_values=tuple(dict.fromkeys(resolver.secret_values)),
    )


# --- masking and the editor's preview ---------------------------------------------------------------------------


def render_preview(
    *,
    tool: Mapping[str, Any],
    arguments: Mapping[str, Any],
    end_user: EndUserIdentity | None,
    variables: Mapping[str, str],
    secret_lookup: SecretLookup,
) -> dict[str, Any]:
    """The rendered request for the dashboard's tool editor, secrets masked. Raises TemplateError like a call."""
    rendered = render_request(
        tool=tool, arguments=arguments, end_user=end_user, variables=variables, secret_lookup=secret_lookup
    )
    secrets = rendered.secret_values
    return {
        "method": rendered.method,
        "url": mask_secrets(rendered.url, secrets),
        "headers": {name: mask_secrets(value, secrets) for name, value in rendered.headers.items()},
        "body": mask_secrets(rendered.body.decode(), secrets) if rendered.body is not None else None,
        "timeout_ms": rendered.timeout_ms,
    }
