"""The run engine end to end in this process: API -> engine -> policy -> tools -> scripted model on loopback."""

from __future__ import annotations

import json

import pytest

from conversations.models import Message, Session
from desk.models import Handoff, Ticket
from fakes.llm import calls, text
from runs.models import Run, ToolCall
from tests.kagent.test_auth import error
from tests.runs.conftest import VERIFIED

pytestmark = pytest.mark.django_db


def shown(h, script, turn):
    """The tool results the model was shown before answering `turn` (parsed after the failure banner)."""
    request = [r for r in h.fake.requests(script) if r.turn == turn][-1]
    out = []
    for result in request.new_tool_results:
        content = result["content"]
        body = content.split("\n", 1)[1] if content.startswith("[TOOL FAILED]") else content
        out.append({"failed_banner": content.startswith("[TOOL FAILED]"), **json.loads(body)})
    return out


def test_one_shot_text_answer(h):
    agent = h.agent("hello", [text("Hi! How can I help?")], instructions="You are Acme's assistant.")
    run = h.run(agent, "hi there")
    assert run["status"] == "completed"
    assert run["output"] == {"text": "Hi! How can I help?", "unverified_claims": [], "claims": []}
    assert run["object"] == "run" and run["id"].startswith("run_")
    assert run["version"] == 1 and run["session"] is None and run["rounds"] == 0
    assert run["usage"]["input_tokens"] > 0
    assert isinstance(run["completed_at"], int) and run["completed_at"] >= run["created_at"]
    request = h.fake.last_request("hello")
    assert "You are Acme's assistant." in request.system
    assert request.user_texts[-1] == "hi there"
    assert request.tool_choice is None or request.tool_choice == "auto"


def test_not_published_is_409(h):
    agent = h.agent("draft-only", [text("x")], publish=False)
    response = h.api.post("/v1/runs", {"agent": agent, "input": "hi"}, format="json")
    assert response.status_code == 409 and error(response) == "not_published"


def test_bad_run_requests(h):
    agent = h.agent("bad", [text("x")])
    cases = [
        ({"agent": agent}, 422),
        ({"agent": agent, "input": ""}, 422),
        ({"agent": agent, "input": "x" * 20001}, 422),
        ({"agent": agent, "input": "hi", "wait": 31}, 422),
        ({"agent": agent, "input": "hi", "store": "no"}, 422),
        ({"agent": agent, "input": "hi", "version": 7}, 404),
        ({"agent": agent, "input": "hi", "version": "1"}, 422),
        ({"agent": agent, "input": "hi", "bogus": 1}, 422),
        ({"agent": "agt_nope", "input": "hi"}, 404),
        ({"agent": agent, "input": "hi", "run_real_actions": True}, 422),
        ({"agent": agent, "input": "hi", "end_user": {"external_id": ""}}, 422),
        ({"agent": agent, "input": "hi", "metadata": {"k": {"nested": 1}}}, 422),
    ]
    for body, status in cases:
        response = h.api.post("/v1/runs", body, format="json")
        assert response.status_code == status, (body, response.json())
    assert Run.objects.count() == 0


def test_handoff_through_alias_and_argument_synonym(h):
    agent = h.agent(
        "handoff",
        [
            calls(("handoff", {"reason_type": "customer_requested", "message": "Wants to change delivery address"})),
            text("I've passed this to our team; someone will continue here."),
        ],
    )
    run = h.run(agent, "I want a human")
    assert run["status"] == "completed" and run["rounds"] == 1
    assert run["output"]["unverified_claims"] == []
    handoff = Handoff.objects.get()
    assert handoff.summary == "Wants to change delivery address" and handoff.reason_type == "customer_requested"
    assert handoff.is_test is False
    [call] = h.tool_steps(run["id"])
    assert call["requested_name"] == "handoff" and call["name"] == "transfer_to_human"
    assert call["arguments"] == {"reason_type": "customer_requested", "summary": "Wants to change delivery address"}
    assert call["policy"] == {"decision": "allowed", "code": None}
    assert call["status"] == "succeeded" and call["effect"] == "escalation"
    assert shown(h, "handoff", 1)[0]["ok"] is True


def test_ticket_for_a_verified_user_in_a_session(h):
    agent = h.agent(
        "ticket",
        [
            calls(
                ("create_ticket", {"title": "Damaged parcel", "description": "Box arrived crushed", "priority": "HIGH"})
            ),
            text("I've opened ticket TKT-1 for you."),
        ],
        tools={"builtin": {"create_ticket": {"enabled": True, "rules": "Open tickets for damage."}}},
    )
    session = h.session(agent, **VERIFIED)
    run = h.run(agent, "my parcel is crushed", session=session, **VERIFIED)
    assert run["status"] == "completed", run
    assert run["output"] == {"text": "I've opened ticket TKT-1 for you.", "unverified_claims": [], "claims": []}
    ticket = Ticket.objects.get()
    assert ticket.display_number == "TKT-1" and ticket.priority == "high" and ticket.end_user.external_id == "cust-42"
    request = h.fake.requests("ticket")[0]
    tool = next(t for t in request.body["tools"] if t["function"]["name"] == "create_ticket")
    assert "This company's rules for this action\nOpen tickets for damage." in tool["function"]["description"]
    assert [m.role for m in Message.objects.filter(session=session).order_by("created_at")] == ["user", "assistant"]
    messages = h.api.get(f"/v1/sessions/{session}/messages").json()["data"]
    assert [m["content"] for m in messages] == ["I've opened ticket TKT-1 for you.", "my parcel is crushed"]
    assert [m["unverified_claims"] for m in messages] == [[], []]  # a tool made the ticket it speaks of


def test_ticket_numbers_count_up_per_project(h, bob, fake_llm):
    from tests.runs.conftest import Harness

    turns = [calls(("create_ticket", {"title": "T", "description": "D"})), text("Done: see the ticket above.")]
    tools = {"builtin": {"create_ticket": {"enabled": True}}}
    agent = h.agent("tickets", turns, tools=tools)
    for n in range(2):
        h.run(agent, "help", end_user={"external_id": f"c{n}"}, allow_actions=True)
    other = Harness(bob, fake_llm)
    other.run(other.agent("tickets-b", turns, tools=tools), "help", end_user={"external_id": "x"}, allow_actions=True)
    assert sorted(t.display_number for t in Ticket.objects.filter(project=h.tenant.project)) == ["TKT-1", "TKT-2"]
    assert Ticket.objects.get(project=bob.project).display_number == "TKT-1"


def test_unverified_ticket_claim_is_pushed_back_twice_then_flagged(h):
    agent = h.agent(
        "liar",
        [
            text("I've opened ticket TKT-99 for you."),
            text("Your ticket TKT-99 is open."),
            text("Ticket TKT-99 is being handled."),
        ],
    )
    run = h.run(agent, "open a ticket")
    assert run["status"] == "completed"
    assert run["output"]["text"] == "Ticket TKT-99 is being handled."
    assert run["output"]["unverified_claims"] == ["ticket TKT-99"]
    requests = h.fake.requests("liar")
    assert len(requests) == 3
    notices = [t for t in requests[2].user_texts if t.startswith("[K-Agent notice]")]
    assert len(notices) == 2 and "This is a repeat" in notices[1] and "TKT-99" in notices[0]


def test_a_sessions_answer_keeps_its_unverified_claims_with_its_message(h):
    # What the conversation shows later (the widget after a reload) must know that answer wasn't confirmed.
    turns = [text("I've opened ticket TKT-99 for you."), text("Your ticket TKT-99 is open."), text("TKT-99 is open.")]
    agent = h.agent("liar-in-session", turns)
    session = h.session(agent)
    run = h.run(agent, "open a ticket", session=session)
    assert run["output"]["unverified_claims"] == ["ticket TKT-99"]
    answer, asked = h.api.get(f"/v1/sessions/{session}/messages").json()["data"]
    assert answer["role"] == "assistant" and answer["unverified_claims"] == ["ticket TKT-99"]
    assert asked["role"] == "user" and asked["unverified_claims"] == []


def test_a_model_that_corrects_itself_after_a_pushback(h):
    agent = h.agent(
        "honest",
        [
            text("I've transferred you to a human agent."),
            text("Sorry, I can't hand this over from here. You can email support@acme.test."),
        ],
    )
    run = h.run(agent, "human please")
    assert run["output"]["unverified_claims"] == []
    assert run["output"]["text"].startswith("Sorry")


def test_done_after_a_failed_call_is_pushed_back(h):
    agent = h.agent(
        "failed-then-done",
        [
            calls(("transfer_to_human", {"reason_type": "sideways", "summary": "x"})),
            text("Done! All set."),
            text("That didn't work, sorry: I couldn't hand this over."),
        ],
    )
    run = h.run(agent, "help")
    assert run["output"]["unverified_claims"] == []
    first = shown(h, "failed-then-done", 1)[0]
    assert first["failed_banner"] and first["error"]["code"] == "invalid_arguments"
    pushback = h.fake.requests("failed-then-done")[2].user_texts[-1]
    assert "transfer_to_human failed" in pushback


def test_tool_set_is_sorted_and_frozen_per_segment(h):
    agent = h.agent(
        "segment",
        [text("a"), text("b")],
        tools={
            "builtin": {"flag_conversation": {"enabled": True}, "create_ticket": {"enabled": True}},
            "client": [{"name": "get_cart", "description": "The cart.", "effect": "read"}],
        },
    )
    session = h.session(agent, **VERIFIED)
    h.run(agent, "first", session=session, **VERIFIED)
    first = h.fake.requests("segment")[0].tool_names
    assert first == sorted(first) == ["create_ticket", "flag_conversation", "get_cart", "transfer_to_human"]
    # Pausing actions mid-segment doesn't change the offered set: the tool is refused with guidance instead.
    h.api.patch(f"/v1/agents/{agent}", {"actions_paused": True}, format="json")
    h.run(agent, "second", session=session, **VERIFIED)
    assert h.fake.requests("segment")[-1].tool_names == first
    assert Session.objects.get(pk=session).segments.count() == 1


def test_store_false_purges_content_and_hides_client_tools(h):
    agent = h.agent(
        "private",
        [
            calls(("transfer_to_human", {"reason_type": "complaint", "summary": "Late order"})),
            text("Handed over to the team."),
        ],
        tools={"client": [{"name": "get_cart", "description": "The cart.", "effect": "read"}]},
    )
    started = h.start(agent, "secret stuff: card 4111", store=False, metadata={"ticket_ref": "abc"})
    from runs import engine

    engine.run_execute(started["id"])
    assert "get_cart" not in h.fake.requests("private")[0].tool_names
    delivered = h.get(started["id"])  # the result is returned once...
    assert delivered["status"] == "completed" and delivered["output"]["text"] == "Handed over to the team."
    again = h.get(started["id"])  # ...and then it is gone
    assert again["output"] is None and again["input"] is None
    assert again["metadata"] == {"ticket_ref": "abc"} and again["status"] == "completed"
    run = Run.objects.get(pk=started["id"])
    assert run.transcript == [] and run.input == ""
    assert not Message.objects.filter(run=run).exists()
    call = ToolCall.objects.get(run=run)
    assert call.arguments is None and call.result is None
    assert "4111" not in json.dumps(h.api.get(f"/v1/runs/{run.pk}/steps").json())


def test_model_errors_are_retried_then_fail_with_model_error(h):
    from fakes.llm import Fault

    agent = h.agent("flaky", [text("ok", faults=[Fault(status=500), Fault(status=429)])])
    assert h.run(agent)["status"] == "completed"
    assert [r.status for r in h.fake.requests("flaky")] == [500, 429, 200]

    agent = h.agent("down", [text("never", faults=[Fault(status=503)] * 5)])
    run = h.run(agent)
    assert run["status"] == "failed"
    assert run["last_error"]["code"] == "model_error"
    assert run["output"] is None


def test_final_answer_with_tools_disabled_after_the_last_round(h):
    agent = h.agent(
        "rounds",
        [
            calls(("transfer_to_human", {"reason_type": "sideways", "summary": "a"})),
            calls(("transfer_to_human", {"reason_type": "sideways", "summary": "b"})),
            calls(("transfer_to_human", {"reason_type": "complaint", "summary": "c"})),
            text("I couldn't hand this over, sorry."),
        ],
        tools={"max_tool_rounds": 2},
    )
    run = h.run(agent)
    assert run["status"] == "completed" and run["rounds"] == 3
    choices = [r.tool_choice for r in h.fake.requests("rounds")]
    assert choices[:2] == ["auto", "auto"] and choices[2] == "none" and choices[3] == "none"
    codes = [c["policy"]["code"] for c in h.tool_steps(run["id"])]
    assert codes == ["invalid_arguments", "invalid_arguments", "round_budget_exhausted"]
    assert not Handoff.objects.exists()


def test_a_ticket_or_handoff_from_an_earlier_reply_is_not_a_false_claim(h):
    agent = h.agent(
        "earlier",
        [
            calls(
                ("create_ticket", {"title": "Late", "description": "Order late"}),
                ("transfer_to_human", {"reason_type": "complaint", "summary": "Late order"}),
            ),
            text("Ticket TKT-1 is open and the team has the conversation."),
            text("Your ticket TKT-1 is open and I've passed this to our team; they'll continue here."),
        ],
        tools={"builtin": {"create_ticket": {"enabled": True}}},
    )
    session = h.session(agent, **VERIFIED)
    h.run(agent, "my order is late", session=session, **VERIFIED)
    h.api.patch(f"/v1/sessions/{session}", {"status": "open"}, format="json")  # the team hands it back
    later = h.run(agent, "any news?", session=session, **VERIFIED)
    assert later["output"]["unverified_claims"] == []
    assert len(h.fake.requests("earlier")) == 3  # no push-back


def test_done_after_a_duplicate_is_not_a_false_claim(h):
    same = ("transfer_to_human", {"reason_type": "complaint", "summary": "x"})
    agent = h.agent("dup-done", [calls(same), calls(same), text("Done: the team has it.")])
    run = h.run(agent)
    assert run["output"]["unverified_claims"] == []


def test_statements_per_run_stay_pinned(h, django_assert_max_num_queries):
    """The hot path: creating a run and running a plain answer (bench/runs_bench.py measures the full one)."""
    agent = h.agent("pinned", [text("a"), text("b")])
    h.run(agent)  # warm: the key's last_used_at, the signing secret
    with django_assert_max_num_queries(6):
        started = h.start(agent)
    from runs import engine

    with django_assert_max_num_queries(6):
        engine.run_execute(started["id"])
    assert h.get(started["id"])["status"] == "completed"


def test_an_agent_without_a_model_uses_the_operator_endpoint_or_the_demo(h, settings):
    agent = h.api.post(
        "/v1/agents", {"name": "plain", "config": {"instructions": "[script:plain]"}}, format="json"
    ).json()["id"]
    assert "model" not in h.api.get(f"/v1/agents/{agent}").json()["config"]
    h.api.post(f"/v1/agents/{agent}/publish", {}, format="json")
    h.fake.script("plain", [text("From the operator's model.")])
    assert h.run(agent)["output"]["text"] == "From the operator's model."
    settings.KAGENT_LLM_BASE_URL = ""
    assert h.run(agent)["output"]["text"].startswith("(Demo model)")


def test_a_model_answering_nul_and_lone_surrogates_does_not_fail_the_run(h):
    from fakes.llm import raw

    body = {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Hello\u0000 there \ud800!"},
            }
        ],
    }
    agent = h.agent("garbage", [raw(body)])
    run = h.run(agent)
    assert run["status"] == "completed", run
    assert "\x00" not in run["output"]["text"] and run["output"]["text"].startswith("Hello")


def test_the_next_run_of_a_session_is_told_an_earlier_answer_was_not_confirmed(h):
    # The customer was shown a neutral reply instead of that answer (the widget): the model must not go on as if the
    # ticket it claimed existed.
    turns = [text("I've opened ticket TKT-99 for you."), text("Your ticket TKT-99 is open."), text("TKT-99 is open.")]
    agent = h.agent("liar-then-asked", turns)
    session = h.session(agent)
    assert h.run(agent, "open a ticket", session=session)["output"]["unverified_claims"] == ["ticket TKT-99"]
    h.run(agent, "so what's my ticket number?", session=session)
    asked = [r for r in h.fake.requests("liar-then-asked") if r.user_texts[-1] == "so what's my ticket number?"]
    history = asked[0].user_texts  # the later run's first request: the session so far, then the question
    assert history[0] == "open a ticket" and history[-1] == "so what's my ticket number?"
    [notice] = history[1:-1]
    assert notice.startswith("[K-Agent notice]") and "no tool result confirmed (ticket TKT-99)" in notice
