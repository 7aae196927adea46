"""Every operation of the live `/v1/openapi.json` is a method of the client, sync and async, and each method sends
the request its operation describes: called against a loopback server that records what arrives, every request
must be an operation of the document, and every operation must be reached by some method. The query parameters an
operation documents are keyword arguments of its method, and so are the fields of a POST or PUT body."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from kagent_client import AsyncClient, Client
from kagent_client._resources import Resource

from tests.client.loopback import Answer, Loopback, Seen

pytestmark = pytest.mark.django_db(transaction=True)

# Built on the methods below (they send several requests): checked by the live tests instead.
COMPOSITES = {"create_and_wait", "create_and_run", "create_and_stream", "wait"}
# Documented parameters a method doesn't take, with the reason.
NOT_ARGUMENTS = {
    ("GET", "/v1/runs/{run_id}/events", "format"): "DRF's renderer switch; the client asks for text/event-stream",
    ("GET", "/v1/sessions/{session_id}/events", "format"): "the same",
    ("POST", "/v1/runs", "stream"): "runs.create_and_stream sends it",
}


def operations(schema: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method.upper(), path): operation
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    }


def template_regex(template: str) -> re.Pattern[str]:
    # linear: literal segments and [^/]+ placeholders, anchored
    return re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$")


def recorder(seen: Seen) -> Answer:
    if seen.path.split("?")[0].endswith("/events"):
        closing = b'id: 1\nevent: run.completed\ndata: {"id": "run_1", "status": "completed"}\n\n'
        return Answer(200, [closing], {"Content-Type": "text/event-stream"})
    return Answer(200, json.dumps({"data": [], "next": None, "id": "x_1", "status": "completed"}).encode())


def placeholder(parameter: inspect.Parameter) -> Any:
    annotation = str(parameter.annotation)
    if annotation.startswith("int"):
        return 2
    if annotation.startswith("bool"):
        return True
    if annotation.startswith("dict") or annotation.startswith("Mapping"):
        return {}
    if annotation.startswith("Sequence") or annotation.startswith("list"):
        return []
    return f"{parameter.name}_1"


def required_arguments(method: Callable[..., Any]) -> tuple[list[Any], dict[str, Any]]:
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for parameter in inspect.signature(method).parameters.values():
        if parameter.default is not inspect.Parameter.empty or parameter.kind in (
            inspect.Parameter.VAR_KEYWORD,
            inspect.Parameter.VAR_POSITIONAL,
        ):
            continue
        if parameter.kind == inspect.Parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = placeholder(parameter)
        else:
            args.append(placeholder(parameter))
    return args, kwargs


def methods(client: Client | AsyncClient) -> dict[str, Callable[..., Any]]:
    found = {}
    for resource_name, resource in vars(client).items():
        if not isinstance(resource, Resource):
            continue
        for name in dir(resource):
            if name.startswith("_") or name in COMPOSITES:
                continue
            method = getattr(resource, name)
            if callable(method):
                found[f"{resource_name}.{name}"] = method
    return found


async def call_async(method: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> None:
    result = method(*args, **kwargs)
    if inspect.isawaitable(result):
        await result
    else:
        async for _ in result:
            pass


def reach(loopback: Loopback, client: Client) -> dict[str, tuple[str, str]]:
    """Each method called once: the request (method, path) it sent."""
    sent: dict[str, tuple[str, str]] = {}
    for qualified, method in sorted(methods(client).items()):
        before = len(loopback.seen)
        args, kwargs = required_arguments(method)
        result = method(*args, **kwargs)
        if inspect.isgenerator(result):
            list(result)
        sent[qualified] = only_request(qualified, loopback.seen[before:])
    return sent


async def reach_async(loopback: Loopback, client: AsyncClient) -> dict[str, tuple[str, str]]:
    sent: dict[str, tuple[str, str]] = {}
    async with client:
        for qualified, method in sorted(methods(client).items()):
            before = len(loopback.seen)
            args, kwargs = required_arguments(method)
            await call_async(method, args, kwargs)
            sent[qualified] = only_request(qualified, loopback.seen[before:])
    return sent


def only_request(qualified: str, requests: list[Seen]) -> tuple[str, str]:
    assert len(requests) == 1, f"{qualified} sent {len(requests)} requests"
    return requests[0].method, requests[0].path.split("?")[0]


def test_every_operation_is_a_client_method_that_sends_it(live_server, loopback):
    schema = httpx.get(f"{live_server.url}/v1/openapi.json", timeout=30).json()
    documented = operations(schema)
    patterns = {key: template_regex(key[1]) for key in documented}
    webhooks_documented = any(path.startswith("/v1/webhook_endpoints") for _, path in documented)
    loopback.answer(recorder)

    with Client(api_key="ka_sk_test", base_url=loopback.url, max_retries=0) as client:
        sync_sent = reach(loopback, client)
    async_sent = asyncio.run(reach_async(loopback, AsyncClient(api_key="ka_sk_test", base_url=loopback.url)))
    assert async_sent == sync_sent, "AsyncClient has the same methods, sending the same requests"

    method_of: dict[tuple[str, str], list[str]] = {}
    unknown = []
    for qualified, (verb, path) in sync_sent.items():
        matches = [key for key, pattern in patterns.items() if key[0] == verb and pattern.match(path)]
        if not matches:
            if path.startswith("/v1/webhook_endpoints") and not webhooks_documented:
                continue  # built in parallel: checked once the server documents it
            unknown.append(f"{qualified} -> {verb} {path}")
        for key in matches:
            method_of.setdefault(key, []).append(qualified)
    assert unknown == [], f"client methods sending requests no operation describes: {unknown}"
    missing = sorted(f"{verb} {path}" for verb, path in documented if (verb, path) not in method_of)
    assert missing == [], f"operations of /v1/openapi.json without a client method: {missing}"

    # What an operation takes is what its method takes.
    methods_by_name = methods(Client(api_key="ka_sk_test", base_url=loopback.url))
    untyped = []
    for key, operation in documented.items():
        names = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]
        body = (operation.get("requestBody") or {}).get("content", {}).get("application/json", {}).get("schema", {})
        if key[0] in ("POST", "PUT") and body:
            if "$ref" in body:
                body = schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[-1]]
            names += list(body.get("properties", {}))
        for qualified in method_of[key]:
            taken = inspect.signature(methods_by_name[qualified]).parameters
            untyped += [
                f"{qualified}: {name}" for name in names if name not in taken and (*key, name) not in NOT_ARGUMENTS
            ]
    assert untyped == [], f"documented parameters that aren't keyword arguments: {untyped}"
