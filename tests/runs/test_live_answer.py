"""The answer shown as the model writes it (run.output.delta / run.output.reset, runs/live_answer.py): through the
real engine and the scripted model, which streams every answer a word at a time (fakes/llm.py). What a follower
reads must never hold an unverified confirmation or a tool call written as text, and the deltas after the last reset
join into `output.text`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from fakes.llm import calls, text
from runs.models import Run
from tests.runs.test_run_events import events

pytestmark = pytest.mark.django_db

HANDOFF = ("transfer_to_human", {"reason_type": "complaint", "summary": "Wants a person"})


def followed_run(h: Any, agent: str, message: str = "hello") -> str:
    """A run someone follows from before its claim on (as a stream or a wait of the app's), driven to its end."""
    run_id = h.start(agent, message)["id"]
    Run.objects.filter(pk=run_id).update(followed_until=timezone.now() + timedelta(minutes=5))
    h.drive(run_id)
    return str(run_id)


def answer_events(h: Any, run_id: str) -> list[dict[str, Any]]:
    return [e for e in events(h.api, run_id) if e["event"] in ("run.output.delta", "run.output.reset")]


def shown_after_last_reset(got: list[dict[str, Any]]) -> str:
    shown = ""
    for event in got:
        shown = "" if event["event"] == "run.output.reset" else shown + event["data"]["delta"]
    return shown


def test_a_followed_answer_arrives_sentence_by_sentence_and_joins_into_the_output(h):
    answer = "Your parcel left our warehouse on Monday. It should arrive by Thursday. Anything else I can do?"
    agent = h.agent("live-three", [text(answer)])
    run_id = followed_run(h, agent)
    got = answer_events(h, run_id)
    assert [e["event"] for e in got] == ["run.output.delta"] * len(got) and len(got) >= 2  # before its end
    assert got[0]["data"] == {"run": run_id, "delta": "Your parcel left our warehouse on Monday."}
    run = h.get(run_id)
    assert shown_after_last_reset(got) == run["output"]["text"] == answer
    # The deltas come before the run's completion, in the order they were written.
    all_events = events(h.api, run_id)
    assert all_events[-1]["event"] == "run.completed"
    assert [e["event"] for e in all_events].index("run.output.delta") < len(all_events) - 1


def test_an_answer_nobody_follows_is_one_delta_with_its_completion(h):
    agent = h.agent("live-unfollowed", [text("First. Second. Third.")])
    run = h.run(agent)
    got = answer_events(h, run["id"])
    assert got == [
        {"id": got[0]["id"], "event": "run.output.delta", "data": {"run": run["id"], "delta": "First. Second. Third."}}
    ]


def test_an_invented_ticket_number_never_reaches_the_stream(h):
    # No create_ticket ran: the claim is pushed back; what was shown before it is reset, the claim never was.
    invented = "Thanks for your patience. I've opened ticket TKT-4471 for you. We will email you soon."
    honest = "Thanks for your patience. I couldn't open a ticket, but a person can help you here."
    agent = h.agent("live-invented", [text(invented), text(honest)])
    run_id = followed_run(h, agent)
    got = answer_events(h, run_id)
    for event in got:
        assert "4471" not in event["data"].get("delta", "")
    assert "run.output.reset" in [e["event"] for e in got]
    assert shown_after_last_reset(got) == h.get(run_id)["output"]["text"] == honest


def test_claims_that_remain_end_the_stream_on_a_reset(h):
    invented = "Done. I've opened ticket TKT-9 for you."
    agent = h.agent("live-stubborn", [text(invented), text(invented), text(invented)])
    run_id = followed_run(h, agent)
    run = h.get(run_id)
    assert run["output"]["unverified_claims"]
    got = answer_events(h, run_id)
    assert got[-1]["event"] == "run.output.reset"
    assert all("TKT" not in e["data"].get("delta", "") for e in got)
    assert [e["event"] for e in events(h.api, run_id)][-2:] == ["run.output.reset", "run.completed"]


def test_a_tool_rounds_text_is_not_the_answer(h):
    preamble = "Let me hand you over. A person will read this conversation. One moment."
    agent = h.agent("live-tool-round", [calls(HANDOFF, text=preamble), text("You're now with our team.")])
    session = h.session(agent)
    run_id = h.start(agent, "I want a person", session=session)["id"]
    Run.objects.filter(pk=run_id).update(followed_until=timezone.now() + timedelta(minutes=5))
    h.drive(run_id)
    got = answer_events(h, run_id)
    assert shown_after_last_reset(got) == h.get(run_id)["output"]["text"] == "You're now with our team."
    # The round's first sentences were shown while it was written, then taken back when it turned out to be a tool
    # round.
    assert got[0]["data"]["delta"] == "Let me hand you over." and "run.output.reset" in [e["event"] for e in got]


def test_a_tool_call_written_as_text_is_never_streamed(h):
    written = (
        'Checking now. <tool_call>{"name": "transfer_to_human", "arguments": '
        '{"reason_type": "complaint", "summary": "x"}}</tool_call> Done soon.'
    )
    agent = h.agent("live-written", [text(written), text("A person will take over here.")])
    run_id = followed_run(h, agent)
    for event in answer_events(h, run_id):
        delta = event["data"].get("delta", "")
        assert "<tool_call" not in delta and "transfer_to_human" not in delta and "tool_call" not in delta
