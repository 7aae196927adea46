"""Run events (SPEC §4 "Run events"): `GET /v1/runs/{id}/events` and `"stream": true` on create, as Server-Sent
Events. In-process here (the engine driven by the test, the stream read through Django's test client); through a
real worker and real servers (uvicorn's ASGI form, the threaded WSGI form) in test_run_events_live.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fakes.llm import Fault, calls, text
from runs import engine
from runs.models import Run, RunEvent
from tests.runs.test_lifecycle import CART

HANDOFF = ("transfer_to_human", {"reason_type": "complaint", "summary": "Parcel arrived damaged"})


def parse(raw: bytes) -> list[dict[str, Any]]:
    """Server-Sent Events as a browser's EventSource reads them: `id`, `event`, `data` (JSON) per event."""
    events = []
    for block in raw.decode().split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
        if "event" in fields:
            events.append({"id": int(fields["id"]), "event": fields["event"], "data": json.loads(fields["data"])})
    return events


def read(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/event-stream")
    assert response["Cache-Control"] == "no-cache"
    return parse(b"".join(response.streaming_content))


def events(client: Any, run_id: str, **headers: Any) -> list[dict[str, Any]]:
    return read(client.get(f"/v1/runs/{run_id}/events", **headers))


def test_a_completed_run_tells_its_story_in_order(h):
    agent = h.agent("ev-done", [calls(HANDOFF), text("A person from our team will continue here.")])
    run = h.run(agent, "my parcel is broken")
    got = events(h.api, run["id"])
    assert [e["event"] for e in got] == [
        "run.queued",
        "run.in_progress",
        "run.step.created",  # the model asked for the handoff
        "run.step.created",  # the handoff, done
        "run.step.created",  # the model's answer
        "run.output.delta",  # its text, checked (nobody followed while it was written: in one piece)
        "run.completed",
    ]
    delta = next(e for e in got if e["event"] == "run.output.delta")
    assert delta["data"] == {"run": run["id"], "delta": "A person from our team will continue here."}
    assert delta["data"]["delta"] == got[-1]["data"]["output"]["text"]
    ids = [e["id"] for e in got]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for event in got:
        if event["event"] not in ("run.step.created", "run.output.delta"):
            assert event["data"]["object"] == "run" and event["data"]["id"] == run["id"]
            assert event["data"]["status"] == event["event"].removeprefix("run.")
    assert got[-1]["data"]["output"]["text"] == "A person from our team will continue here."
    # The step events are the steps the steps API lists, in the same order and rendered the same way.
    assert [e["data"] for e in got if e["event"] == "run.step.created"] == h.steps(run["id"])
    handoff = got[3]["data"]
    assert handoff["kind"] == "tool_call" and handoff["tool_call"]["name"] == "transfer_to_human"
    assert handoff["tool_call"]["status"] == "succeeded"


def test_last_event_id_resumes_after_the_event_it_names(h):
    agent = h.agent("ev-resume", [text("hi")])
    run = h.run(agent)
    everything = events(h.api, run["id"])
    second = everything[1]["id"]
    assert events(h.api, run["id"], HTTP_LAST_EVENT_ID=str(second)) == everything[2:]
    # For clients that can't set headers (a browser's EventSource reconnects with the header by itself).
    assert read(h.api.get(f"/v1/runs/{run['id']}/events?last_event_id={second}")) == everything[2:]
    # An id that isn't ours starts from the beginning rather than failing.
    assert events(h.api, run["id"], HTTP_LAST_EVENT_ID="not-a-number") == everything


def test_a_paused_run_ends_its_stream_and_the_next_one_picks_up_after_the_answer(h):
    agent = h.agent("ev-pause", [calls(("get_cart", {})), text("Two items.")], tools={"client": [CART]})
    session = h.session(agent)
    run = h.run(agent, "cart?", session=session)
    first = events(h.api, run["id"])
    assert [e["event"] for e in first] == ["run.queued", "run.in_progress", "run.step.created", "run.requires_action"]
    action = first[-1]["data"]["required_action"]
    [call] = action["tool_calls"]
    assert call["name"] == "get_cart"

    answer = {"tool_outputs": [{"call_id": call["call_id"], "output": {"items": 2}}]}
    assert h.api.post(f"/v1/runs/{run['id']}/submit_tool_outputs", answer, format="json").status_code == 200
    h.drive(run["id"])
    rest = events(h.api, run["id"], HTTP_LAST_EVENT_ID=str(first[-1]["id"]))
    assert [e["event"] for e in rest] == [
        "run.step.created",  # the client tool's step, with the app's output
        "run.queued",  # answered, back in the queue
        "run.in_progress",
        "run.step.created",  # the model's answer
        "run.output.delta",
        "run.completed",
    ]
    assert rest[0]["data"]["tool_call"]["call_id"] == call["call_id"]
    assert rest[0]["data"]["tool_call"]["status"] == "succeeded"
    # Each step has one event, as it ended: the steps API lists the same steps.
    assert [e["data"] for e in first + rest if e["event"] == "run.step.created"] == h.steps(run["id"])
    assert rest[-1]["data"]["output"]["text"] == "Two items."


def test_failed_and_cancelled_runs_end_their_streams(h):
    broken = h.agent("ev-fail", [text("never", faults=[Fault(status=400)])])
    failed = h.run(broken)
    assert failed["status"] == "failed"
    got = events(h.api, failed["id"])
    assert [e["event"] for e in got] == ["run.queued", "run.in_progress", "run.failed"]
    assert got[-1]["data"]["last_error"]["code"] == failed["last_error"]["code"]

    agent = h.agent("ev-cancel", [text("never sent")])
    queued = h.start(agent)
    assert h.api.post(f"/v1/runs/{queued['id']}/cancel", {}, format="json").status_code == 200
    assert [e["event"] for e in events(h.api, queued["id"])] == ["run.queued", "run.cancelled"]

    # A paused run cancelled: its open call ends with it, and its step comes before the run's last event.
    waiting = h.agent("ev-cancel-paused", [calls(("get_cart", {}))], tools={"client": [CART]})
    paused = h.run(waiting, "cart?", session=h.session(waiting))
    assert paused["status"] == "requires_action"
    assert h.api.post(f"/v1/runs/{paused['id']}/cancel", {}, format="json").status_code == 200
    got = events(h.api, paused["id"], HTTP_LAST_EVENT_ID=str(events(h.api, paused["id"])[-1]["id"]))
    assert [e["event"] for e in got] == ["run.step.created", "run.cancelled"]
    assert got[0]["data"]["tool_call"]["status"] == "cancelled"


def test_another_project_cannot_read_a_runs_events(h, bob):
    agent = h.agent("ev-tenant", [text("mine")])
    run = h.run(agent)
    for client in (bob.client(), bob.client(bob.publishable_key)):
        response = client.get(f"/v1/runs/{run['id']}/events")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert h.tenant.client("sk_live_not_a_key").get(f"/v1/runs/{run['id']}/events").status_code == 401


def test_a_browser_sees_what_happened_not_the_businesss_data(h):
    tool = {
        **CART,
        "name": "order_status",
        "parameters": {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]},
    }
    turns = [calls(("order_status", {"order": "8812"})), text("On its way.")]
    agent = h.agent("ev-browser", turns, tools={"client": [tool]})
    browser = h.tenant.client(h.tenant.publishable_key)
    session = browser.post("/v1/sessions", {"agent": agent}, format="json").json()["id"]
    run = browser.post("/v1/runs", {"agent": agent, "session": session, "input": "where?"}, format="json").json()
    h.drive(run["id"])
    got = events(browser, run["id"])
    [model_step] = [e["data"] for e in got if e["event"] == "run.step.created"]
    assert model_step["kind"] == "model_call" and "model_call" not in model_step  # not what the model was shown
    # The run itself is the run as the browser reads it anyway (its required action names the arguments to run).
    assert got[-1]["event"] == "run.requires_action"
    [call] = got[-1]["data"]["required_action"]["tool_calls"]
    assert call["arguments"] == {"order": "8812"}
    answer = {"tool_outputs": [{"call_id": call["call_id"], "output": {"status": "shipped", "eta": "Friday"}}]}
    assert browser.post(f"/v1/runs/{run['id']}/submit_tool_outputs", answer, format="json").status_code == 200
    h.drive(run["id"])
    rest = events(browser, run["id"], HTTP_LAST_EVENT_ID=str(got[-1]["id"]))
    step = rest[0]["data"]["tool_call"]
    assert step["name"] == "order_status" and step["status"] == "succeeded" and step["policy"]["decision"] == "allowed"
    assert "arguments" not in step and "result" not in step and "Friday" not in json.dumps(rest[0])
    # The business's server (secret key) sees the steps as the steps API renders them.
    server = events(h.api, run["id"])  # up to the pause, where a stream ends
    server += events(h.api, run["id"], HTTP_LAST_EVENT_ID=str(server[-1]["id"]))
    assert [e["data"] for e in server if e["event"] == "run.step.created"] == h.steps(run["id"])


def test_stream_true_on_create_answers_with_the_events(h):
    agent = h.agent("ev-create", [text("streamed")])
    response = h.api.post("/v1/runs", {"agent": agent, "input": "hi", "stream": True}, format="json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    chunks = iter(response.streaming_content)
    assert next(chunks).startswith(b"retry: ")
    queued = parse(next(chunks))
    assert [e["event"] for e in queued] == ["run.queued"]
    run_id = queued[0]["data"]["id"]
    assert Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).exists()
    h.drive(run_id)  # the worker's part; the open stream reads on
    rest = parse(b"".join(chunks))
    assert [e["event"] for e in rest][-1] == "run.completed"
    assert rest[-1]["data"]["output"]["text"] == "streamed"


def test_create_asked_for_an_event_stream_answers_json_unless_it_streams(h):
    # The Python client sends `Accept: text/event-stream` with `"stream": true`; a run without it, or an error, is
    # still JSON and labelled so. Only the create: the list has no event stream to offer.
    agent = h.agent("ev-accept", [text("x")])
    sse = {"HTTP_ACCEPT": "text/event-stream"}
    made = h.api.post("/v1/runs", {"agent": agent, "input": "hi"}, format="json", **sse)
    assert made.status_code == 201 and made["Content-Type"] == "application/json"
    refused = h.api.post("/v1/runs", {"agent": agent}, format="json", **sse)
    assert refused.status_code == 422 and refused["Content-Type"] == "application/json"
    assert refused.json()["error"]["code"] == "invalid_request"
    assert h.api.get("/v1/runs", **sse).status_code == 406
    html = h.api.post("/v1/runs", {"agent": agent, "input": "hi"}, format="json", HTTP_ACCEPT="text/html")
    assert html.status_code == 406 and html.json()["error"]["code"] == "not_acceptable"
    assert Run.objects.count() == 1


def test_stream_and_wait_together_are_refused_and_nothing_is_created(h):
    agent = h.agent("ev-both", [text("x")])
    response = h.api.post("/v1/runs", {"agent": agent, "input": "hi", "stream": True, "wait": 5}, format="json")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"
    bad = h.api.post("/v1/runs", {"agent": agent, "input": "hi", "stream": "yes"}, format="json")
    assert bad.status_code == 422
    assert bad.json()["error"]["message"] == "stream is true or false."
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)  # closing a response ends its request, which closes a test transaction
def test_each_key_holds_a_limited_number_of_open_streams(h, settings):
    settings.KAGENT_STREAMS_PER_KEY = 2
    agent = h.agent("ev-cap", [text("x")])
    waiting = h.start(agent)["id"]  # nobody drives it: its streams stay open
    first = h.api.get(f"/v1/runs/{waiting}/events")
    second = h.api.get(f"/v1/runs/{waiting}/events")
    refused = h.api.get(f"/v1/runs/{waiting}/events")
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited"
    assert int(refused["Retry-After"]) >= 1
    # Another key of the same project has its own allowance.
    browser = h.tenant.client(h.tenant.publishable_key)
    session = browser.post("/v1/sessions", {"agent": agent}, format="json").json()["id"]
    own = browser.post("/v1/runs", {"agent": agent, "session": session, "input": "hi"}, format="json").json()["id"]
    other = browser.get(f"/v1/runs/{own}/events")
    assert other.status_code == 200
    other.close()
    first.close()  # the client went away: its place is free again
    third = h.api.get(f"/v1/runs/{waiting}/events")
    assert third.status_code == 200
    second.close()
    third.close()


def test_a_private_runs_content_goes_once_its_stream_delivered_the_end(h):
    agent = h.agent("ev-private", [text("secret answer")])
    run = h.start(agent, "private words", store=False)
    engine.run_execute(run["id"])  # completed; its result not read yet
    got = events(h.api, run["id"])
    assert got[-1]["data"]["output"]["text"] == "secret answer"
    stored = Run.objects.get(pk=run["id"])
    assert stored.purged_at is not None and stored.input == ""


def test_events_go_with_their_run(h):
    agent = h.agent("ev-gone", [text("x")])
    run = h.run(agent)
    assert RunEvent.objects.filter(run_id=run["id"]).count() == 5  # queued, in progress, step, delta, completed
    Run.objects.filter(pk=run["id"]).delete()
    assert not RunEvent.objects.filter(run_id=run["id"]).exists()


def test_resuming_after_the_end_of_a_run_that_ended_is_no_content(h):
    # 204 is what makes a browser's EventSource stop reconnecting; an empty 200 would be reopened every few seconds.
    agent = h.agent("ev-after-end", [text("hi")])
    run = h.run(agent)
    everything = events(h.api, run["id"])
    last = everything[-1]["id"]
    response = h.api.get(f"/v1/runs/{run['id']}/events", HTTP_LAST_EVENT_ID=str(last))
    assert response.status_code == 204 and response.content == b""
    # Resuming before the end still gets what is after.
    assert read(h.api.get(f"/v1/runs/{run['id']}/events?last_event_id={everything[-2]['id']}")) == everything[-1:]


def test_a_publishable_keys_streams_are_counted_per_visitor(h, settings):
    # Every visitor of the business's site uses the publishable key, and anyone can copy it from the page: one
    # address holding its allowance leaves the other visitors theirs.
    settings.KAGENT_STREAMS_PER_KEY = 1
    agent = h.agent("ev-visitors", [text("x")])
    browser = h.tenant.client(h.tenant.publishable_key)
    session = browser.post("/v1/sessions", {"agent": agent}, format="json").json()["id"]
    run = browser.post("/v1/runs", {"agent": agent, "session": session, "input": "hi"}, format="json").json()["id"]
    held = browser.get(f"/v1/runs/{run}/events", REMOTE_ADDR="198.51.100.7")
    assert held.status_code == 200
    refused = browser.get(f"/v1/runs/{run}/events", REMOTE_ADDR="198.51.100.7")
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
    other_visitor = browser.get(f"/v1/runs/{run}/events", REMOTE_ADDR="203.0.113.9")
    assert other_visitor.status_code == 200
    other_visitor.close()
    held.close()


def test_a_run_that_ends_between_two_looks_still_sends_its_last_event(h, settings, monkeypatch):
    # The stream looks for new events, then at the run's status. A cancel committed between those two looks must
    # not end the stream as "nothing more will come" before the cancel's event was sent.
    from runs import run_events

    agent = h.agent("ev-race", [text("never sent")])
    queued = h.start(agent)
    looked = run_events.after
    looks: list[int] = []

    def cancelled_right_after_the_second_look(run_id: str, last_id: int, *, full_steps: bool) -> list[Any]:
        batch = looked(run_id, last_id, full_steps=full_steps)
        looks.append(len(batch))
        if len(looks) == 2:
            assert h.api.post(f"/v1/runs/{run_id}/cancel", {}, format="json").status_code == 200
        return batch

    monkeypatch.setattr(run_events, "after", cancelled_right_after_the_second_look)
    got = events(h.api, queued["id"])
    assert looks[:2] == [1, 0]
    assert [e["event"] for e in got] == ["run.queued", "run.cancelled"]
