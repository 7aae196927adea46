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
the caller passes in, never from the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote, unquote

import jsonschema

from kagent.egress import EgressError, is_tenant_forbidden_header, url_check
from kagent.masking import mask_secrets
from tools.arguments import UncheckableArguments, argument_errors
from tools.placeholders import Placeholder, PlaceholderError, split
from tools.shaping import ascii_digits, clean_text

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
BODY_METHODS = ("POST", "PUT", "PATCH")
TOKEN_MAX = 64
TEXT_MAX = 1000
DEFAULT_TIMEOUT_MS = 10_000
# linear: anchored, one class, bounded
_HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}(?!\n)$")
# linear: anchored, one class
_HEADER_VALUE_RE = re.compile(r"^[\x20-\x7e]*(?!\n)$")
_TOKEN_PUNCT = frozenset(" ._@:+-")
_ASCII_DIGITS = frozenset("0123456789")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class TemplateError(ValueError):
    """Rendering refused; nothing was sent. Stable codes:

    invalid_template, unknown_placeholder, invalid_arguments, unresolved_placeholder, blank_placeholder,
    verified_user_required, secret_host_not_allowed, unsafe_path, forbidden_header, invalid_header_value.
    `placeholder` is the offending `{{…}}` when there is one; `parameter` the argument name when it is one.
    """

    def __init__(self, code: str, message: str, *, placeholder: str = "", parameter: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.placeholder = placeholder
        self.parameter = parameter


@dataclass(frozen=True)
class EndUserIdentity:
    """A verified end user, from the credential (secret-key call or end_user_token), never from the model."""

    external_id: str
    traits: Mapping[str, Any] = field(default_factory=dict)


class SecretLike(Protocol):
    """What a secret lookup returns (kagent.secrets.SecretValue is one)."""

    @property
    def value(self) -> str: ...

    @property
    def allowed_hosts(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class SecretValue:
    value: str
    allowed_hosts: tuple[str, ...]


SecretLookup = Callable[[str], SecretLike | None]


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


# --- argument checks ---------------------------------------------------------------------------------------------


def normalize_arguments(value: Any) -> Any:
    """Arabic-Indic digits in every string of the model's arguments as ASCII (do this before schema validation)."""
    if isinstance(value, str):
        return ascii_digits(value)
    if isinstance(value, list):
        return [normalize_arguments(v) for v in value]
    if isinstance(value, dict):
        return {k: normalize_arguments(v) for k, v in value.items()}
    return value


def is_token(text: str) -> bool:
    return 0 < len(text) <= TOKEN_MAX and all(ch.isalpha() or ch in _ASCII_DIGITS or ch in _TOKEN_PUNCT for ch in text)


def _scalar_text(value: Any, *, what: str, placeholder: str, parameter: str = "") -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise TemplateError(
                "invalid_arguments", f"{what} is not a finite number", placeholder=placeholder, parameter=parameter
            )
        return json.dumps(value)
    if isinstance(value, str):
        return value
    raise TemplateError(
        "invalid_arguments",
        f"{what} must be a single value here, not a list or object",
        placeholder=placeholder,
        parameter=parameter,
    )


# --- placeholder resolution --------------------------------------------------------------------------------------


class _Resolver:
    def __init__(
        self,
        *,
        properties: Mapping[str, Any],
        arguments: Mapping[str, Any],
        end_user: EndUserIdentity | None,
        variables: Mapping[str, str],
        secret_lookup: SecretLookup,
        host: str,
    ) -> None:
        self.properties = properties
        self.arguments = arguments
        self.end_user = end_user
        self.variables = variables
        self.secret_lookup = secret_lookup
        self.host = host
        self.secret_values: list[str] = []

    def _blank(self, ph: Placeholder) -> TemplateError:
        return TemplateError(
            "blank_placeholder",
            f"{ph.raw} is blank",
            placeholder=ph.raw,
            parameter=ph.name if ph.root == "args" else "",
        )

    def _format(self, ph: Placeholder) -> str:
        prop = self.properties.get(ph.name)
        if not isinstance(prop, dict):
            raise TemplateError("invalid_template", f"{ph.raw} is not a declared parameter", placeholder=ph.raw)
        fmt = prop.get("x-kagent-format", "token")
        if fmt not in ("token", "text"):
            raise TemplateError("invalid_template", f"{ph.raw} has an unknown x-kagent-format", placeholder=ph.raw)
        return str(fmt)

    def _argument_text(self, ph: Placeholder, text: str, fmt: str) -> str:
        text = ascii_digits(text)
        if fmt == "token":
            if not text.strip():
                raise self._blank(ph)
            if not is_token(text):
                raise TemplateError(
                    "invalid_arguments",
                    f"{ph.name} must be at most {TOKEN_MAX} letters, digits, spaces or . _ @ : + -",
                    placeholder=ph.raw,
                    parameter=ph.name,
                )
            return text
        text = clean_text(text, keep_joiners=False)
        if not text.strip():
            raise self._blank(ph)
        if len(text) > TEXT_MAX:
            raise TemplateError(
                "invalid_arguments",
                f"{ph.name} is longer than {TEXT_MAX} characters",
                placeholder=ph.raw,
                parameter=ph.name,
            )
        return text

    def _argument_json(self, ph: Placeholder, value: Any, fmt: str) -> Any:
        """An argument's JSON value for a body string that is exactly this placeholder."""
        if isinstance(value, str):
            return self._argument_text(ph, value, fmt)
        if isinstance(value, list):
            return [self._argument_json(ph, v, fmt) for v in value]
        if isinstance(value, dict):
            return {k: self._argument_json(ph, v, fmt) for k, v in value.items()}
        if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
            raise TemplateError(
                "invalid_arguments", f"{ph.name} is not a finite number", placeholder=ph.raw, parameter=ph.name
            )
        return value

    def value(self, ph: Placeholder, where: str) -> Any:
        """The value of `ph` for location `where` (path, query, header, body_text, body_json)."""
        if ph.root == "args":
            return self._argument_value(ph, where)
        if ph.root == "end_user":
            raw = self._end_user_raw(ph)
        elif ph.root == "var":
            if ph.name not in self.variables:
                raise TemplateError("unresolved_placeholder", f"the variable {ph.name} is not set", placeholder=ph.raw)
            raw = self.variables[ph.name]
        elif ph.root == "secret":
            raw = self._secret_raw(ph)
        else:  # pragma: no cover - placeholders.parse admits no other root
            raise TemplateError("invalid_template", f"{ph.raw} is not a known placeholder", placeholder=ph.raw)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            raise self._blank(ph)
        if where == "body_json":
            return raw
        text = _scalar_text(raw, what=ph.raw, placeholder=ph.raw)
        if not text.strip():
            raise self._blank(ph)
        return text

    def _argument_value(self, ph: Placeholder, where: str) -> Any:
        fmt = self._format(ph)
        if ph.name not in self.arguments:
            raise TemplateError(
                "unresolved_placeholder",
                f"the argument {ph.name} is missing",
                placeholder=ph.raw,
                parameter=ph.name,
            )
        raw = self.arguments[ph.name]
        if raw is None:
            raise self._blank(ph)
        if where in ("path", "query", "header") and fmt != "token":
            raise TemplateError(
                "invalid_template", f"{ph.raw}: text parameters may only be used in the body", placeholder=ph.raw
            )
        if where == "body_json":
            return self._argument_json(ph, raw, fmt)
        text = _scalar_text(raw, what=ph.name, placeholder=ph.raw, parameter=ph.name)
        text = self._argument_text(ph, text, fmt if where == "body_text" else "token")
        if where == "header" and not text.isascii():
            raise TemplateError(
                "invalid_arguments",
                f"{ph.name} may only hold ASCII characters here",
                placeholder=ph.raw,
                parameter=ph.name,
            )
        return text

    def _end_user_raw(self, ph: Placeholder) -> Any:
        if self.end_user is None:
            raise TemplateError("verified_user_required", f"{ph.raw} needs a verified end user", placeholder=ph.raw)
        if not ph.is_trait:
            return self.end_user.external_id
        if isinstance(self.end_user.traits, Mapping) and ph.name in self.end_user.traits:
            return self.end_user.traits[ph.name]
        raise TemplateError("unresolved_placeholder", f"the end user has no trait {ph.name}", placeholder=ph.raw)

    def _secret_raw(self, ph: Placeholder) -> Any:
        secret = self.secret_lookup(ph.name)
        if secret is None:
            raise TemplateError("unresolved_placeholder", f"the secret {ph.name} does not exist", placeholder=ph.raw)
        allowed = {h.strip().lower().rstrip(".") for h in secret.allowed_hosts}
        if self.host not in allowed:
            raise TemplateError(
                "secret_host_not_allowed",
                f"the secret {ph.name} may not be sent to {self.host}",
                placeholder=ph.raw,
            )
        raw = secret.value
        if isinstance(raw, str) and raw.strip():
            self.secret_values.append(raw)
        return raw


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


def _render_url_part(template: str, resolver: _Resolver, where: str) -> str:
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


def _render_body_node(node: Any, resolver: _Resolver) -> Any:
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


def _render_query(query_template: str, resolver: _Resolver) -> str:
    query_parts: list[str] = []
    for pair in query_template.split("&"):
        key, eq, value_template = pair.partition("=")
        if "{{" in key or "}}" in key:
            raise TemplateError("invalid_template", "placeholders may only be query values, not keys")
        query_parts.append(key + eq + _render_url_part(value_template, resolver, "query"))
    return "&".join(query_parts)


def _render_url(origin: _Origin, resolver: _Resolver) -> str:
    """Values only in the path (one segment each, no `.` or `..` after substitution) and in query values."""
    path_template, has_query, query_template = origin.rest.partition("?")
    if "#" in path_template or "#" in query_template:
        raise TemplateError("invalid_template", "URL fragments are not allowed")
    path = _render_url_part(path_template, resolver, "path")
    if any(_is_dot_segment(segment) for segment in path.split("/")):
        raise TemplateError("unsafe_path", "after substitution the path may not contain . or .. segments")
    query = ("?" + _render_query(query_template, resolver)) if has_query else ""
    return f"https://{origin.authority}{path}{query}"


def _render_header(name: Any, template: Any, resolver: _Resolver, earlier: Mapping[str, str]) -> str:
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


def _render_headers(config: Mapping[str, Any], resolver: _Resolver) -> dict[str, str]:
    raw_headers = config.get("headers") or {}
    if not isinstance(raw_headers, Mapping):
        raise TemplateError("invalid_template", "headers must be an object")
    headers: dict[str, str] = {}
    for name, template in raw_headers.items():
        headers[name] = _render_header(name, template, resolver, headers)
    return headers


def _render_body(config: Mapping[str, Any], method: str, resolver: _Resolver) -> bytes | None:
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
    resolver = _Resolver(
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
