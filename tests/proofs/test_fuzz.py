"""Fuzzing the API from its own OpenAPI document (issue #12), with schemathesis: every operation, with bodies,
parameters and paths that fit the schema and ones that don't, sent with a secret key and with a publishable key to
a project holding an object of every kind (half of the generated paths name those objects).

Each answer: never a 5xx; an error is SPEC §4's error JSON with a 4xx the document declares; a success has a status,
a content type and a body that the document declares for that operation.

Deterministic (Hypothesis derandomized, no example database), bounded: `KAGENT_FUZZ_EXAMPLES` examples per
operation, generation mode and key (default 3: about a minute on 2 cores; the long form is a larger number, e.g.
100).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter, defaultdict
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.urls import Resolver404, resolve
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from jsonschema import Draft202012Validator
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from kagent.ids import new_id
from tests.proofs.conftest import World

pytestmark = pytest.mark.django_db
EXAMPLES = int(os.environ.get("KAGENT_FUZZ_EXAMPLES", "3"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
ERROR_JSON = Draft202012Validator(
    {
        "type": "object",
        "additionalProperties": False,
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "additionalProperties": False,
                "required": ["code", "message", "details"],
                "properties": {
                    "code": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"},
                    "message": {"type": "string", "minLength": 1},
                    "details": {},
                },
            }
        },
    }
)


def real_path_parameters(world: World) -> dict[str, Any]:
    return {
        "agent_id": world.agent,
        "number": 1,
        "other": 2,
        "source_id": world.source,
        "name": world.tool,
        "run_id": world.paused_run,
        "session_id": world.session,
        "ticket_id": world.ticket,
        "handoff_id": world.handoff,
        "endpoint_id": world.endpoint,
        "delivery_id": world.delivery,
    }


def order(operation: Any) -> tuple[int, str]:
    # Reads first and deletes last, so the objects the paths name are there for most of the operations.
    return ({"GET": 0, "DELETE": 2}.get(operation.method.upper(), 1), operation.label)


@pytest.fixture
def wsgi_keeps_the_test_connection() -> Any:
    """Django's WSGI handler closes the database connection after each request (`close_old_connections`), which
    would end the test's transaction; Django's test client unhooks it the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def fuzz(world: World, key: str, settings_: Any) -> None:
    settings_.KAGENT_API_RATE_SECRET = settings_.KAGENT_API_RATE_PUBLISHABLE = 10**6
    settings_.KAGENT_RUN_RATE_PUBLISHABLE = 10**6
    # An HTTP tool's test call goes nowhere: its host resolves to an address the outbound client refuses.
    settings_.KAGENT_EGRESS_RESOLVE = "api.example.com:443:127.0.0.1"
    schema = schemathesis.openapi.from_wsgi("/v1/openapi.json", get_wsgi_application())
    # The key is ours to send (each test sends one); query parameters the API doesn't know are ignored, as HTTP
    # APIs do, so requests with made-up ones aren't "invalid" here.
    schema.config.generation.update(allow_extra_parameters=False, with_security_parameters=False)
    auth = {"Authorization": f"Bearer {key}"}
    real = real_path_parameters(world)
    operations = sorted((result.ok() for result in schema.get_all_operations()), key=order)
    assert len(operations) >= 50
    failures: list[str] = []
    seen: dict[str, Counter[str]] = defaultdict(Counter)
    started = time.monotonic()
    for operation in operations:
        names = [parameter.name for parameter in operation.path_parameters]
        # A path parameter of an endpoint newer than this file gets an id of nowhere (and no real one below).
        path = operation.path.format(**{name: real.get(name, new_id("obj")) for name in names})
        try:
            view = resolve(path if path.startswith("/v1") else f"/v1{path}").func.view_class
            allowed = view.publishable_allowed
        except Resolver404:
            allowed = True
        # What a publishable key may never do is refused before anything else is read: one example shows it.
        examples = EXAMPLES if key.startswith("ka_sk_") or allowed else 1
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategies = [operation.as_strategy(generation_mode=mode)]
            if names and mode is GenerationMode.POSITIVE and any(name in real for name in names):
                fixed = {name: real[name] for name in names if name in real}
                strategies.append(operation.as_strategy(generation_mode=mode, path_parameters=fixed))

            label = f"{operation.label} {mode.value}"

            @given(case=st.one_of(strategies))
            @settings(
                max_examples=examples,
                derandomize=True,
                database=None,
                deadline=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def probe(case: Any) -> None:
                response = case.call(headers=auth)
                outcome = str(response.status_code)
                if response.status_code >= 400:
                    outcome += " " + str(json.loads(response.content).get("error", {}).get("code"))
                seen[label][outcome] += 1  # noqa: B023 - called right here, in this iteration
                case.validate_response(response, checks=CHECKS, headers=auth)
                if response.status_code >= 400:
                    body = json.loads(response.content)
                    problems = [error.message for error in ERROR_JSON.iter_errors(body)]
                    assert not problems, f"{response.status_code} not the error JSON: {problems} {body}"

            try:
                probe()
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE, operation.label  # nothing of it can be made invalid
            except BaseException as exc:  # every operation is fuzzed; the failures are reported together
                if isinstance(exc, KeyboardInterrupt):
                    raise
                failures.append(f"{operation.label} ({mode.value}): {str(exc)[:1500]}")
    print(f"\nfuzzed {sum(sum(c.values()) for c in seen.values())} requests in {time.monotonic() - started:.0f} s")
    for label, statuses in sorted(seen.items()):
        print(f"  {label}: {dict(sorted(statuses.items()))}")
    assert failures == [], "\n\n".join(failures)


def test_fuzz_with_a_secret_key(world, settings, wsgi_keeps_the_test_connection):
    fuzz(world, world.tenant.secret_key, settings)


def test_fuzz_with_a_publishable_key(world, settings, wsgi_keeps_the_test_connection):
    fuzz(world, world.tenant.publishable_key, settings)
