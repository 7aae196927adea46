"""The hardened outbound client: the one way K-Agent reaches a URL a tenant configured (SPEC §6, seed "Network limits").

HTTP tools, API knowledge sources, webhooks and tenant model `base_url`s all go through `get_client().request(...)`.

How a call is guarded, in order:
1. The URL string is checked before anything else (`url_check`): `https://` only, an authority that is exactly
   `host`, `host:443` or `host:8443` written plainly (no userinfo, no backslash, no percent-encoding, no zone id, no
   non-ASCII such as unicode dots, no alternate IPv4 spellings), no fragment, no `.`/`..` path segments; then the
   parsed `httpx.URL` must agree with what was read. The service's own hosts (`KAGENT_OWN_HOSTS`) are refused.
   (`destination_check` is that much, and a denied address literal, for a URL saved now and called later.)
2. The name is resolved ONCE, when a new connection is made (`transport._GuardedBackend.connect`). If any answer is
   denied (or there is none) the call is refused. The socket connects to exactly an address that was checked; TLS
   is then done with `server_hostname` = the URL's host, and the request's `Host` is the URL's, so SNI, certificate
   verification and Host keep the hostname. No second lookup exists that could be rebound. The exchange itself is
   written and read by `kagent.http1` (strict HTTP/1.1 framing, nothing kept between calls but the connection: no
   cookie, no credential, no redirect followed).
3. One deadline (`timeout_ms`, at most 15 s) covers the whole exchange: every socket operation of the connection
   (connect at most 3 s, TLS handshake, writes, each read) gets only the time left, so a server trickling bytes
   cannot stretch it; each read checks it again when it returns.
4. The response: a 3xx is refused (`redirect_not_followed`), Content-Length over 1 MiB is refused before the body is
   read, a body is read only up to 1 MiB as sent, then decoded with a bounded decompressor and refused as soon as
   the decoded size passes 1 MiB (a gzip bomb never inflates past the limit in memory).

Connection reuse and rebinding. Connections are kept per origin (host, port; at most 4 a process, closed after 30 s
idle; the 16 most recent origins only), so a connection made for one name never carries another name's request. A kept
connection stays connected to the address that was checked when it was opened; a later, different DNS answer only
matters to new connections, which resolve and check again. What could change a decision for the same address is the
policy (allowed networks, own hosts, --resolve entries, CA): each policy gets its own connections
(`EgressClient._policy_transport`), and every request re-checks the address of the connection it is written on against
the policy of the request (`before_write` in `transport.EgressTransport.send`) before a byte is sent, so a connection
opened under one decision can never serve a request under another.

Test-only settings (SPEC §2): KAGENT_EGRESS_ALLOW_NETWORKS exempts exactly the CIDRs it names from the deny list;
KAGENT_EGRESS_CA_BUNDLE adds a CA to certifi's; KAGENT_EGRESS_RESOLVE (`host:port:addr[,addr…]` entries, IPv6 in
brackets) replaces DNS for that host:port only, and its addresses still pass the deny list.

Every attempt, made or refused, is recorded as an EgressEvent: host, port, path without the query, resolved
address, decision, code, status, bytes, duration. Never query strings, headers, bodies or secret values.

Where each part lives, from the bottom up (a module imports only modules above it in this list):
`limits` the seed's numbers; `errors` EgressError, REFUSAL_CODES and what a tenant is told of a failure; `headers`
which headers callers and tenants may set; `resolver` DNS on threads admitted per process, project and host, and
the --resolve overrides; `addresses` the deny list and EgressPolicy; `urls` url_check; `decoding` the bounded body
decoder; `log` the egress log; `transport` the guarded backend, TLS and EgressTransport (over `kagent.http1`);
`client` EgressClient and get_client. Import from `kagent.egress`, not the modules.
"""

from kagent.egress.addresses import EgressPolicy, IPAddress, IPNetwork, address_denial
from kagent.egress.client import EgressClient, EgressResponse, destination_check, get_client
from kagent.egress.errors import (
    REFUSAL_CODES,
    TENANT_MESSAGES,
    EgressError,
    shown_code,
    tenant_code,
    tenant_message,
)
from kagent.egress.headers import (
    FORBIDDEN_HEADER_PREFIXES,
    SIGNING_HEADERS,
    TENANT_FORBIDDEN_HEADERS,
    TRANSPORT_HEADERS,
    USER_AGENT,
    is_tenant_forbidden_header,
    joined_headers,
)
from kagent.egress.limits import (
    ALLOWED_METHODS,
    ALLOWED_PORTS,
    CONNECT_TIMEOUT_S,
    MAX_REQUEST_BODY_BYTES,
    MAX_RESPONSE_BYTES,
    MAX_TIMEOUT_MS,
    MAX_URL_LENGTH,
)
from kagent.egress.log import Recorder, record_in_log
from kagent.egress.resolver import DNS_BACKLOG, DNS_PER_HOST, DNS_PER_PROJECT, Resolver, system_resolver
from kagent.egress.transport import EgressTransport
from kagent.egress.urls import TargetUrl, url_check

__all__ = [
    "joined_headers",
    "ALLOWED_METHODS",
    "ALLOWED_PORTS",
    "CONNECT_TIMEOUT_S",
    "DNS_BACKLOG",
    "DNS_PER_HOST",
    "DNS_PER_PROJECT",
    "FORBIDDEN_HEADER_PREFIXES",
    "MAX_REQUEST_BODY_BYTES",
    "MAX_RESPONSE_BYTES",
    "MAX_TIMEOUT_MS",
    "MAX_URL_LENGTH",
    "REFUSAL_CODES",
    "SIGNING_HEADERS",
    "TENANT_MESSAGES",
    "TENANT_FORBIDDEN_HEADERS",
    "TRANSPORT_HEADERS",
    "USER_AGENT",
    "EgressClient",
    "EgressError",
    "EgressPolicy",
    "EgressResponse",
    "EgressTransport",
    "IPAddress",
    "IPNetwork",
    "Recorder",
    "Resolver",
    "TargetUrl",
    "address_denial",
    "destination_check",
    "get_client",
    "is_tenant_forbidden_header",
    "record_in_log",
    "system_resolver",
    "shown_code",
    "tenant_code",
    "tenant_message",
    "url_check",
]
