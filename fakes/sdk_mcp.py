"""A business's MCP server built with the official MCP Python SDK (`mcp`, the reference implementation), served over
Streamable HTTP with TLS on loopback by uvicorn in a thread: what K-Agent's MCP client (tools/mcp_client.py) must
work with beyond our own fake (fakes/mcp.py). Every request's method, path, headers and body are recorded, so a test
can check the Standard Webhooks signature the SDK itself ignores.

Its tools stand for a shop: `order_status(order)` answers structured content, `cancel_order(order, reason)` text,
`refund(order, amount)` fails (`isError`)."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel


class OrderStatus(BaseModel):
    order: str
    status: str
    eta: str


def shop() -> MCPServer:
    server = MCPServer("shop", instructions="The shop's orders.")

    @server.tool(description="Look up an order's status by its number.")
    def order_status(order: str) -> OrderStatus:
        return OrderStatus(order=order, status="shipped", eta="Tuesday")

    @server.tool(description="Cancel an order.")
    def cancel_order(order: str, reason: str = "") -> str:
        return f"Order {order} is cancelled."

    @server.tool(description="Refund an order.")
    def refund(order: str, amount: float) -> str:
        raise ToolError(f"Refunds for {order} need a manager.")  # the SDK's way to answer isError with a message

    return server


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class SdkServer:
    host: str
    port: int
    received: list[Recorded] = field(default_factory=list)
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None

    def _recording(self, app: Any) -> Any:
        async def recorded(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            chunks: list[bytes] = []

            async def receive_recorded() -> Any:
                message = await receive()
                if message["type"] == "http.request":
                    chunks.append(message.get("body", b""))
                    if not message.get("more_body"):
                        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
                        self.received.append(Recorded(scope["method"], scope["path"], headers, b"".join(chunks)))
                return message

            await app(scope, receive_recorded, send)

        return recorded

    def start(self, *, name: str, certfile: str, keyfile: str) -> SdkServer:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=[f"{name}:{self.port}"]
        )
        app = shop().streamable_http_app(transport_security=security)
        config = uvicorn.Config(
            self._recording(app),
            host=self.host,
            port=self.port,
            ssl_certfile=certfile,
            ssl_keyfile=keyfile,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="sdk-mcp", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the SDK's MCP server did not start on {self.host}:{self.port}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)


def free_loopback(port: int, hosts: tuple[str, ...]) -> str:
    """The first of `hosts` where `port` can be bound now."""
    for host in hosts:
        with socket.socket() as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return host
    raise RuntimeError(f"no loopback address among {hosts} has port {port} free")
