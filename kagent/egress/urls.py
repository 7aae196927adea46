"""The URL check (`url_check`): a tenant URL read as text, refused unless it is plain https to an allowed port, and
parsed by httpx to exactly what was read. No network access."""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import unquote

import httpx

from kagent.egress.addresses import IPAddress
from kagent.egress.errors import EgressError
from kagent.egress.limits import ALLOWED_PORTS, MAX_URL_LENGTH


@dataclass(frozen=True)
class TargetUrl:
    url: httpx.URL
    host: str  # lower case; an IPv6 literal without brackets
    port: int
    path: str  # without the query

    @property
    def request_target(self) -> str:
        """The path and query as they go on the request line (printable ASCII: the URL was checked for it)."""
        return self.url.raw_path.decode("ascii")

    @property
    def host_header(self) -> str:
        """The Host header: the name (an IPv6 literal in brackets), and the port unless 443."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == 443 else f"{host}:{self.port}"


# linear: anchored, at most 63 characters
_LABEL_RE = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?!\n)$")
# linear: anchored, one class per branch
_NUMERIC_LABEL_RE = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)(?!\n)$")
# linear: anchored, at most 3 characters
_CANONICAL_OCTET_RE = re.compile(r"^(?:0|[1-9][0-9]{0,2})(?!\n)$")
# linear: anchored, one class
_URL_CHARS_RE = re.compile(r"^[\x21-\x7e]+(?!\n)$")  # printable ASCII, no space
_SCHEME = "https://"


def _refuse_url(message: str) -> EgressError:
    return EgressError("url_not_allowed", message)


def _check_host(host: str) -> tuple[str, IPAddress | None]:
    """The host as written in the authority -> (normalised host, IP literal or None)."""
    if host.startswith("["):
        if not host.endswith("]"):
            raise _refuse_url("malformed IPv6 literal")
        try:
            ip6 = ipaddress.IPv6Address(host[1:-1])
        except ValueError as exc:
            raise _refuse_url("malformed IPv6 literal") from exc
        if ip6.scope_id:
            raise _refuse_url("IPv6 zone ids are not allowed")
        return str(ip6), ip6
    host = host.lower()
    if not host or len(host) > 253:
        raise _refuse_url("missing or over-long host")
    if host.endswith("."):
        raise _refuse_url("a host may not end with a dot")
    labels = host.split(".")
    if _NUMERIC_LABEL_RE.match(labels[-1]):
        # Looks like an IPv4 address: only the canonical dotted quad is accepted. 127.1, 0x7f.1, 2130706433,
        # 0177.0.0.1 and 127.000.0.1 all mean 127.0.0.1 to some resolver; refusing them leaves nothing to argue.
        if len(labels) != 4 or not all(_CANONICAL_OCTET_RE.match(p) and int(p) <= 255 for p in labels):
            raise _refuse_url("IPv4 addresses must be written as four plain decimal numbers")
        return host, ipaddress.IPv4Address(host)
    if not all(_LABEL_RE.match(label) for label in labels):
        raise _refuse_url("the host is not a valid DNS name (use punycode for international names)")
    return host, None


def _has_dot_segment(path: str) -> bool:
    for segment in path.split("/"):
        decoded = segment
        for _ in range(3):  # %252e: decode a few times, nothing legitimate needs it
            decoded = unquote(decoded)
        if decoded in (".", ".."):
            return True
    return False


def url_check(url: str) -> TargetUrl:
    """Parse and check a tenant URL without any network access. Raises EgressError(url_not_allowed)."""
    if not isinstance(url, str) or not url:
        raise _refuse_url("the URL must be a non-empty string")
    return _checked(url)


# The check is a function of the string alone (no DNS, no settings): an HTTP tool's call checks its URL three times
# (the origin at render, the rendered URL, the client's own check), half a millisecond per run. Only accepted URLs
# are kept (a refusal raises, and lru_cache keeps no exception); 256 of at most MAX_URL_LENGTH characters each.
@functools.lru_cache(maxsize=256)
def _checked(url: str) -> TargetUrl:
    if len(url) > MAX_URL_LENGTH:
        raise _refuse_url("the URL is too long")
    if not _URL_CHARS_RE.match(url):
        raise _refuse_url("the URL may only hold printable ASCII without spaces (unicode dots, controls...)")
    if "\\" in url:
        raise _refuse_url("backslashes are not allowed in URLs")
    if url[: len(_SCHEME)].lower() != _SCHEME:
        raise _refuse_url("only https:// URLs are allowed")
    rest = url[len(_SCHEME) :]
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    if "@" in authority:
        raise _refuse_url("user information in URLs is not allowed")
    if "%" in authority:
        raise _refuse_url("percent-encoding and zone ids are not allowed in the host")
    if "#" in tail:
        raise _refuse_url("URL fragments are not allowed")
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise _refuse_url("malformed IPv6 literal")
        raw_host, after = authority[: end + 1], authority[end + 1 :]
    else:
        raw_host, sep, port_text = authority.partition(":")
        after = sep + port_text
    if after:
        if not after.startswith(":") or after[1:] not in ALLOWED_PORTS:
            raise _refuse_url("only ports 443 and 8443 are allowed, written plainly")
        port = ALLOWED_PORTS[after[1:]]
    else:
        port = 443
    host, literal = _check_host(raw_host)
    path = tail.split("?", 1)[0] or "/"
    if not path.startswith("/"):
        raise _refuse_url("malformed path")
    if _has_dot_segment(path):
        raise _refuse_url("the path may not contain . or .. segments")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, UnicodeError) as exc:
        raise _refuse_url("the URL does not parse") from exc
    # What goes on the wire (the request target is the parsed URL's) must be exactly what was checked above.
    # `raw_host` is the name as it was written; `host` is decoded for display (xn--bcher-kva.test reads
    # bücher.test), so an internationalised name would never match its own ASCII form.
    expected_port = None if port == 443 else port
    try:
        if literal is None or literal.version == 4:
            same_host = parsed.raw_host.decode("ascii") == host
        else:
            same_host = ipaddress.ip_address(parsed.raw_host.decode("ascii").strip("[]")) == literal
    except (ValueError, UnicodeError):
        same_host = False
    if parsed.scheme != "https" or not same_host or parsed.port != expected_port or parsed.userinfo or parsed.fragment:
        raise _refuse_url("the URL is ambiguous")
    return TargetUrl(url=parsed, host=host, port=port, path=path)
