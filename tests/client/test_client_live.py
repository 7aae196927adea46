"""The Python client against the real server: `live_server` (the WSGI app, streams included), a real Celery worker
running the runs, and the scripted OpenAI-compatible model (fakes/llm.py)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import jwt
import pytest
from kagent_client import Answer, ApiError, AsyncClient, Client

from fakes.llm import Fault, calls, text
from kagent import streams
from tests.conftest import make_tenant
from tests.runs.test_lifecycle import CART
from tests.runs.test_lifecycle import SIZE as SIZE_ACTION

# Opening a screen in the app reads nothing of the business: offered to anonymous end users too.
SIZE = {**SIZE_ACTION, "effect": "read"}
HOURS = {
    "name": "get_store_hours",
    "description": "Returns the opening hours of the customer's nearest store.",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    "effect": "read",
}

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def config(script: str, **tools: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": {"provider": "openai_compatible", "name": f"script:{script}"}}
    if tools:
        body["tools"] = tools
    return body


def published_agent(client: Client, script: str, **tools: Any) -> str:
    agent = client.agents.create(name=script, config=config(script, **tools))
    version = client.agents.publish(agent.id, note="first")
    assert version.number == 1
    return str(agent.id)


def test_the_client_tool_loop_answers_two_client_tools_in_one_run(client_for, start_worker, fake_llm):
    alice = make_tenant("alice")
    client = client_for(alice.secret_key)
    fake_llm.script(
        "two-tools",
        [
            calls(("get_cart", {}), ("open_size_guide", {"item": "rain jacket"})),
            text("Two items in your cart; the size guide for the rain jacket is open."),
        ],
    )
    agent = client.agents.create(name="two-tools", config=config("two-tools", client=[CART, SIZE])).id
    client.agents.publish(agent)
    session = client.sessions.create(agent=agent)
    start_worker(fake_llm.worker_env())

    called: list[tuple[str, dict[str, Any]]] = []

    def get_cart() -> dict[str, Any]:
        called.append(("get_cart", {}))
        return {"items": [{"sku": "JK-1", "qty": 1}, {"sku": "SK-9", "qty": 2}]}

    def open_size_guide(item: str) -> dict[str, Any]:
        called.append(("open_size_guide", {"item": item}))
        return {"opened": True, "item": item}

    run = client.runs.create_and_run(
        agent=agent,
        session=session.id,
        input="what's in my cart, and show me the size guide for the rain jacket",
        client_tools={"get_cart": get_cart, "open_size_guide": open_size_guide},
    )
    assert run.status == "completed", run
    assert run.output.text == "Two items in your cart; the size guide for the rain jacket is open."
    assert run.raw["output"]["text"] == run.output.text and run.id.startswith("run_")
    assert sorted(called) == [("get_cart", {}), ("open_size_guide", {"item": "rain jacket"})]
    # The model was shown both results, answered in one submission.
    results = fake_llm.requests("two-tools")[-1].new_tool_results
    assert len(results) == 2
    shown = " ".join(str(result["content"]) for result in results)
    assert "SK-9" in shown and "rain jacket" in shown and "[TOOL FAILED]" not in shown
    calls_made = [step.tool_call for step in client.runs.steps(run.id) if step.kind == "tool_call"]
    assert sorted((c.name, c.status) for c in calls_made) == [
        ("get_cart", "succeeded"),
        ("open_size_guide", "succeeded"),
    ]


def test_a_failing_unknown_or_oversized_client_tool_is_reported_as_an_error(client_for, start_worker, fake_llm):
    alice = make_tenant("alice")
    client = client_for(alice.secret_key)
    fake_llm.script(
        "broken",
        [
            calls(("get_cart", {}), ("open_size_guide", {"item": "boots"}), ("get_store_hours", {})),
            text("Sorry, that didn't work."),
        ],
    )
    agent = client.agents.create(name="broken", config=config("broken", client=[CART, SIZE, HOURS])).id
    client.agents.publish(agent)
    session = client.sessions.create(agent=agent)
    start_worker(fake_llm.worker_env())

    def get_cart() -> dict[str, Any]:
        raise ConnectionError("cart service down")

    run = client.runs.create_and_run(
        agent=agent,
        session=session.id,
        input="cart, boots size and opening hours?",
        client_tools={"get_cart": get_cart, "get_store_hours": lambda: {"hours": "9-5 " * 5000}},
    )
    assert run.status == "completed"
    results = {r["tool_call_id"]: r["content"] for r in fake_llm.requests("broken")[-1].new_tool_results}
    assert len(results) == 3 and all(content.startswith("[TOOL FAILED]") for content in results.values())
    shown = " ".join(results.values())
    assert "get_cart failed: ConnectionError: cart service down" in shown
    assert "no client tool named 'open_size_guide'" in shown
    assert "get_store_hours returned 2" in shown and "at most 16384" in shown


def test_create_and_wait_returns_the_settled_run(client_for, start_worker, fake_llm):
    alice = make_tenant("alice")
    client = client_for(alice.secret_key)
    fake_llm.script("hello", [text("Hello! How can I help?")])
    fake_llm.script("pause", [calls(("get_cart", {})), text("Your cart is empty.")])  # a lookup: nothing "Done."
    hello = published_agent(client, "hello")
    pause = client.agents.create(name="pause", config=config("pause", client=[CART])).id
    client.agents.publish(pause)
    start_worker(fake_llm.worker_env())

    run = client.runs.create_and_wait(agent=hello, input="hi")
    assert (run.status, run.output.text) == ("completed", "Hello! How can I help?")
    assert client.runs.get(run.id).status == "completed"

    session = client.sessions.create(agent=pause)
    paused = client.runs.create_and_wait(agent=pause, session=session.id, input="cart?")
    assert paused.status == "requires_action"
    [call] = paused.required_action.tool_calls
    assert call.name == "get_cart" and call.arguments == {}
    resumed = client.runs.submit_tool_outputs(paused.id, tool_outputs=[{"call_id": call.call_id, "output": {}}])
    assert resumed.status in ("queued", "in_progress", "completed")
    assert client.runs.wait(paused.id).status == "completed"

    # A create sent again with its key (an app that lost the answer) gets the same run; the worker ran it once.
    first = client.runs.create(agent=hello, input="again?", idempotency_key="app-message-77")
    again = client.runs.create(agent=hello, input="again?", idempotency_key="app-message-77")
    assert again.id == first.id and client.runs.wait(first.id).status == "completed"
    assert len([r for r in client.runs.iterate(agent=hello) if r.input == "again?"]) == 1


EXPECTED = [
    "run.queued",
    "run.in_progress",
    "run.step.created",
    "run.step.created",
    "run.output.delta",
    "run.completed",
]


def test_stream_gives_the_events_in_order_and_resumes(client_for, start_worker, fake_llm):
    alice = make_tenant("alice")
    client = client_for(alice.secret_key)
    fake_llm.script("streamed", [calls(("get_cart", {})), text("Two items.")])
    fake_llm.script("streamed-2", [text("Hi there.")])
    agent = client.agents.create(name="streamed", config=config("streamed", client=[CART])).id
    client.agents.publish(agent)
    simple = published_agent(client, "streamed-2")
    start_worker(fake_llm.worker_env())

    # "stream": true on create: the run as it happens, up to its pause.
    session = client.sessions.create(agent=agent)
    events = list(client.runs.create_and_stream(agent=agent, session=session.id, input="cart?"))
    assert [e.event for e in events] == ["run.queued", "run.in_progress", "run.step.created", "run.requires_action"]
    run = events[-1].data
    assert run.status == "requires_action" and events[2].data.kind == "model_call"
    [call] = run.required_action.tool_calls
    client.runs.submit_tool_outputs(run.id, tool_outputs=[{"call_id": call.call_id, "output": {"items": 2}}])
    rest = list(client.runs.stream(run.id, last_event_id=events[-1].id))
    after_pause = [
        "run.step.created",
        "run.queued",
        "run.in_progress",
        "run.step.created",
        "run.output.delta",
        "run.completed",
    ]
    assert [e.event for e in rest] == after_pause
    assert rest[-1].data.output.text == "Two items."

    # Read again from the start, a stream closes at the pause as it did; from the middle it loses and repeats
    # nothing; after the pause it goes on to the end.
    whole = list(client.runs.stream(run.id))
    assert [(e.id, e.event) for e in whole] == [(e.id, e.event) for e in events]
    assert [e.id for e in client.runs.stream(run.id, last_event_id=whole[1].id)] == [e.id for e in events[2:]]
    assert [e.id for e in client.runs.stream(run.id, last_event_id=whole[-1].id)] == [e.id for e in rest]
    assert list(client.runs.stream(run.id, last_event_id=rest[-1].id)) == []  # the run ended: nothing more

    # A one-shot run streamed from the start to its end.
    done = client.runs.create_and_stream(agent=simple, input="hi")
    assert [e.event for e in done][-1] == "run.completed"


def test_a_stream_the_server_ends_early_is_resumed_with_last_event_id(client_for, start_worker, fake_llm, monkeypatch):
    # Fault: the server ends every stream as soon as it has sent what it had (as the WSGI server does after 120 s).
    monkeypatch.setattr(streams, "MAX_WSGI_STREAM_S", 0)
    resumed_after: list[int] = []
    read = streams.last_event_id
    monkeypatch.setattr(streams, "last_event_id", lambda raw: resumed_after.append(read(raw)) or read(raw))
    alice = make_tenant("alice")
    client = client_for(alice.secret_key)
    fake_llm.script("slow", [text("Hello.", faults=[Fault(delay_s=0.5)])])
    agent = published_agent(client, "slow")
    run = client.runs.create(agent=agent, input="hello")
    events = client.runs.stream(run.id)
    first = next(events)  # no worker yet: the first stream holds only this, then ends
    assert first.event == "run.queued"
    start_worker(fake_llm.worker_env())
    got = [first, *events]
    assert got[-1].event == "run.completed"
    ids = [int(e.id) for e in got]
    assert ids == sorted(set(ids)), "no event lost or repeated"
    assert [e.event for e in got] == [e.event for e in client.runs.stream(run.id)]
    assert resumed_after[0] == 0 and resumed_after[1] == int(first.id)


def test_errors_carry_the_status_and_code(client_for, bob_and_alice):
    alice, bob = bob_and_alice
    client = client_for(alice.secret_key)
    with pytest.raises(ApiError) as missing:
        client.agents.get("agt_01JZZZZZZZZZZZZZZZZZZZZZZZ")
    assert (missing.value.status, missing.value.code) == (404, "not_found")

    with pytest.raises(ApiError) as invalid:
        client.tools.create(name="lookup", description="Looks up.", effect="read", config={"method": "TELEPORT"})
    assert invalid.value.status == 422 and invalid.value.code and invalid.value.message
    assert isinstance(invalid.value.details, (list, dict)) or invalid.value.details is None

    agent = client.agents.create(name="draft only", config=config("x"))
    with pytest.raises(ApiError) as unpublished:
        client.runs.create(agent=agent.id, input="hi")
    assert (unpublished.value.status, unpublished.value.code) == (409, "not_published")

    # Someone else's project: alice's agent is a 404 to bob, never a 403.
    with pytest.raises(ApiError) as elsewhere:
        client_for(bob.secret_key).agents.get(agent.id)
    assert (elsewhere.value.status, elsewhere.value.code) == (404, "not_found")

    with pytest.raises(ApiError) as unauthorized:
        client_for("ka_sk_nonsense").agents.list()
    assert unauthorized.value.status == 401


def test_lists_page_and_iterate_through_every_page(client_for, bob_and_alice):
    alice, bob = bob_and_alice
    client = client_for(alice.secret_key)
    made = [client.agents.create(name=f"agent {n}").id for n in range(5)]
    client_for(bob.secret_key).agents.create(name="bob's")
    page = client.agents.list(limit=2)
    assert [a.id for a in page] == made[::-1][:2] and page.next is not None
    assert [a.id for a in client.agents.list(limit=2, cursor=page.next)] == made[::-1][2:4]
    assert [a.id for a in client.agents.iterate(limit=2)] == made[::-1]
    updated = client.agents.update(made[0], description="first", actions_paused=True)
    assert (updated.description, updated.actions_paused) == ("first", True)
    assert client.agents.delete(made[0]).deleted is True


def test_async_client_runs_async_client_tools_and_streams(live_server, start_worker, fake_llm):
    alice = make_tenant("alice")
    # Two lookups done nothing for the customer: the answer says what they found ("All set." would be a claim).
    fake_llm.script(
        "async",
        [calls(("get_cart", {}), ("open_size_guide", {"item": "hat"})), text("Here is your cart and the size guide.")],
    )
    start_worker(fake_llm.worker_env())

    async def scenario() -> tuple[Any, list[str], list[str]]:
        async with AsyncClient(api_key=alice.secret_key, base_url=live_server.url) as client:
            agent = await client.agents.create(name="async", config=config("async", client=[CART, SIZE]))
            await client.agents.publish(agent.id)
            session = await client.sessions.create(agent=agent.id)

            async def get_cart() -> dict[str, Any]:
                await asyncio.sleep(0)
                return {"items": 3}

            run = await client.runs.create_and_run(
                agent=agent.id,
                session=session.id,
                input="cart and hat size",
                client_tools={"get_cart": get_cart, "open_size_guide": lambda item: {"opened": item}},
            )
            names = [event.event async for event in client.runs.stream(run.id, last_event_id=0)]
            listed = [r.id async for r in client.runs.iterate(agent=agent.id)]
            return run, names, listed

    run, names, listed = asyncio.run(scenario())
    assert (run.status, run.output.text) == ("completed", "Here is your cart and the size guide.")
    assert names[:2] == ["run.queued", "run.in_progress"] and names[-1] == "run.requires_action"
    assert listed == [run.id]
    shown = json.dumps(fake_llm.requests("async")[-1].new_tool_results)
    assert "[TOOL FAILED]" not in shown and "hat" in shown


@pytest.fixture
def bob_and_alice(db: Any) -> tuple[Any, Any]:
    return make_tenant("alice"), make_tenant("bob")


def test_an_app_with_a_publishable_key_runs_the_loop_for_a_verified_end_user(client_for, start_worker, fake_llm):
    alice = make_tenant("alice")
    server = client_for(alice.secret_key)
    fake_llm.script("app", [calls(("get_cart", {})), text("One jacket in your cart.")])
    agent = server.agents.create(name="app", config=config("app", client=[CART])).id
    server.agents.publish(agent)
    secret = server.end_user_secret.get().secret
    token = jwt.encode({"sub": "cust-7", "exp": int(time.time()) + 600}, secret, "HS256")
    start_worker(fake_llm.worker_env())

    app = client_for(alice.publishable_key)
    session = app.sessions.create(agent=agent, end_user_token=token)
    run = app.runs.create_and_run(
        agent=agent,
        session=session.id,
        input="cart?",
        end_user_token=token,
        client_tools={"get_cart": lambda: {"items": 1}},
    )
    assert (run.status, run.output.text) == ("completed", "One jacket in your cart.")
    # The verified user's run is theirs: without the token a publishable key doesn't see it.
    with pytest.raises(ApiError) as hidden:
        app.runs.get(run.id)
    assert hidden.value.status == 404
    assert app.runs.get(run.id, end_user_token=token).status == "completed"
    assert client_for(alice.publishable_key, end_user_token=token).sessions.get(session.id).id == session.id


def test_streams_from_the_asgi_events_server(asgi_server, start_worker, fake_llm):
    # Production serves run events from uvicorn (kagent.asgi): the same events, read by the same client.
    alice = make_tenant("alice")
    fake_llm.script("asgi", [calls(("get_cart", {})), text("Two items.")])
    with Client(api_key=alice.secret_key, base_url=asgi_server) as client:
        agent = client.agents.create(name="asgi", config=config("asgi", client=[CART])).id
        client.agents.publish(agent)
        session = client.sessions.create(agent=agent)
        start_worker(fake_llm.worker_env())
        events = list(client.runs.create_and_stream(agent=agent, session=session.id, input="cart?"))
        assert [e.event for e in events] == ["run.queued", "run.in_progress", "run.step.created", "run.requires_action"]
        run = events[-1].data
        [call] = run.required_action.tool_calls
        client.runs.submit_tool_outputs(run.id, tool_outputs=[{"call_id": call.call_id, "output": {"items": 2}}])
        rest = list(client.runs.stream(run.id, last_event_id=events[-1].id))
    assert [e.event for e in rest][-1] == "run.completed" and rest[-1].data.output.text == "Two items."
    assert [int(e.id) for e in events + rest] == sorted({int(e.id) for e in events + rest})


def test_a_conversations_events_from_the_asgi_events_server(asgi_server, fake_llm):
    """The conversation's stream as production serves it (uvicorn, kagent.asgi): a message written while it is open
    arrives on it, woken by Redis, without a thread held."""
    import threading

    alice = make_tenant("alice")
    with Client(api_key=alice.secret_key, base_url=asgi_server) as client:
        agent = client.agents.create(name="asgi-session", config=config("asgi-session")).id
        client.agents.publish(agent)
        session = client.sessions.create(agent=agent).id
        client.sessions.write(session, role="team", content="Hello, I'm Ana.", author="Ana")
        later = threading.Timer(0.5, lambda: client.sessions.write(session, role="user", content="Hi Ana"))
        events = client.sessions.stream(session)
        seen = []
        later.start()
        for event in events:
            seen.append((event.event, event.data.get("role") or event.data.get("status")))
            if len(seen) == 3:
                break
        events.close()
        later.join()
    assert seen == [
        ("session.updated", "handed_off"),
        ("session.message.created", "team"),
        ("session.message.created", "user"),
    ]


def test_the_answer_is_read_as_it_is_written(client_for, start_worker, fake_llm):
    # "stream": true follows the run from its creation: each sentence arrives checked, before the run completes, and
    # `Answer` (what `runs.stream_text` yields) holds the text to show at each moment.
    alice = make_tenant("alice")
    client = client_for(alice.secret_key)
    written = "Hello there. Your cart has two items. Anything else?"
    fake_llm.script("written", [text(written)])
    agent = published_agent(client, "written")
    start_worker(fake_llm.worker_env())
    events = list(client.runs.create_and_stream(agent=agent, input="what's in my cart? it shows two items"))
    answer, shown = Answer(), []
    for event in events:
        if answer.add(event):
            shown.append(answer.text)
    assert shown[0] == "Hello there." and shown[-1] == written and answer.done
    assert [e.event for e in events].count("run.output.delta") >= 2
    run_id = events[0].data.id
    assert list(client.runs.stream_text(run_id))[-1] == written  # read again after the end: the whole answer


def test_a_helpdesk_relay_follows_the_conversation_and_writes_back(client_for, start_worker, fake_llm):
    """What a business's relay to its own helpdesk does with the client: follow the conversation's events, post its
    people's replies, hand the conversation back; the app's customer writes to the team with the publishable key."""
    alice = make_tenant("alice")
    server = client_for(alice.secret_key)
    fake_llm.script(
        "relay",
        [
            calls(("transfer_to_human", {"reason_type": "complaint", "summary": "asks for a person"})),
            text("A person from the team will continue here."),
            text("Happy to help again."),
        ],
    )
    agent = published_agent(server, "relay")
    start_worker(fake_llm.worker_env())
    secret = server.end_user_secret.get().secret
    token = jwt.encode({"sub": "cust-9", "exp": int(time.time()) + 600}, secret, "HS256")
    app = client_for(alice.publishable_key, end_user_token=token)  # the app's customer, signed in
    session = app.sessions.create(agent=agent, end_user_token=token).id
    first = app.runs.create_and_wait(agent=agent, session=session, input="a person please", end_user_token=token)
    assert first.status == "completed", first
    assert server.sessions.get(session).status == "handed_off"
    with pytest.raises(ApiError) as quiet:
        app.runs.create(agent=agent, session=session, input="hello?", end_user_token=token)
    assert (quiet.value.status, quiet.value.code) == (409, "session_handed_off")

    app.sessions.write(session, role="user", content="Is anyone there?", end_user_token=token)
    reply = server.sessions.write(session, role="team", content="Yes, Maya here.", author="Maya")
    assert (reply.role, reply.author) == ("team", "Maya")
    events = server.sessions.stream(session)
    seen = []
    for event in events:
        seen.append((event.event, event.data.get("role") or event.data.get("status")))
        if event.event == "session.message.created" and event.data.get("role") == "team":
            break
    events.close()
    assert seen == [
        ("session.message.created", "user"),
        ("session.updated", "handed_off"),
        ("session.message.created", "assistant"),
        ("session.message.created", "user"),
        ("session.message.created", "team"),
    ]
    assert server.sessions.update(session, status="open").status == "open"
    again = app.runs.create_and_wait(agent=agent, session=session, input="thanks!", timeout=30, end_user_token=token)
    assert again.output.text == "Happy to help again."
