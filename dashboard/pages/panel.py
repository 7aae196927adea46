"""The test panel (SPEC §7, seed "In the test panel"): a chat against the agent's draft.

Each message is a sandbox run on a test-panel session, made by the services `POST /v1/runs` uses (the dashboard is
trusted like the project's secret key: `api_key=None`). A worker runs it; the panel polls the run's turn every
second while it works, showing its steps as they are written (model rounds, tool calls with their arguments, policy
decisions and codes, simulated actions). A client tool call is answered here by typing its output.

The conversation (its session id, who the customer is) is kept in the browser's Django session, per agent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from agents.config_validation import validate_config
from agents.models import Agent
from agents.selectors import agent_get
from conversations import selectors as conversation_selectors
from conversations import services as conversation
from conversations.identity import EndUserClaim
from conversations.models import Session
from dashboard.access import MemberRequest, member_page
from dashboard.pages.desk import decide_from_post
from dashboard.problems import Problems, problems_from
from kagent import throttle
from kagent.errors import ApiError, NotFound
from runs import lifecycle, run_events, selectors, services
from runs.apis.actions import SUBMIT_TOOL_OUTPUTS
from runs.apis.create import RUN_CREATE
from runs.apis.reads import render_step
from runs.approvals import APPROVE_TOOL_CALLS
from runs.models import Run
from tools.builtins import all_builtins
from tools.selectors import http_tool_list, mcp_granted
from tools.toolset import ToolSetFacts, tool_set_build

# Built-ins whose real effect in a sandbox run is a test object: say so next to the call.
TEST_OBJECTS = {tool.name: tool.test_object for tool in all_builtins() if tool.test_object}


def _state_key(agent: Agent) -> str:
    return f"kagent_panel:{agent.pk}"


def _state(request: HttpRequest, agent: Agent) -> dict[str, Any]:
    state = request.session.get(_state_key(agent))
    return dict(state) if isinstance(state, dict) else {}


def _save_state(request: HttpRequest, agent: Agent, state: dict[str, Any]) -> None:
    request.session[_state_key(agent)] = state


def step_views(run: Run) -> list[dict[str, Any]]:
    """A run's steps as the steps API renders them, with what the test panel adds: which successful calls made test
    objects."""
    views = []
    for step in selectors.run_timeline(run=run):
        rendered = render_step(step)
        call = rendered.get("tool_call")
        if call is not None:
            if run.sandbox and not call["simulated"] and call["status"] == "succeeded":
                rendered["test_object"] = TEST_OBJECTS.get(call["name"] or "", "")
        views.append(rendered)
    return views


@dataclass
class Turn:
    run: Run
    steps: list[dict[str, Any]]
    problems: Problems = field(default_factory=Problems)
    outputs: dict[str, str] = field(default_factory=dict)
    last_event: int = 0  # the turn follows the run's events after this one while it is active
    written: str = ""  # the answer shown so far as it is written (run.output.delta after the last reset)

    @property
    def active(self) -> bool:
        return self.run.status in (Run.Status.QUEUED, Run.Status.IN_PROGRESS)

    def _waiting_for(self, kind: str) -> list[dict[str, Any]]:
        action = self.run.required_action
        if self.run.status != Run.Status.REQUIRES_ACTION or not action or action.get("type") != kind:
            return []
        calls: list[dict[str, Any]] = action.get("tool_calls", [])
        return calls

    @property
    def awaiting(self) -> list[dict[str, Any]]:
        """Client tool calls waiting for what the app would answer."""
        calls = self._waiting_for("submit_tool_outputs")
        return [{**call, "typed": self.outputs.get(call["call_id"], "")} for call in calls]

    @property
    def approvals(self) -> list[dict[str, Any]]:
        """Actions waiting for a person's approval (answered here as on the desk)."""
        return self._waiting_for(APPROVE_TOOL_CALLS)


def _turn(run: Run, **extra: Any) -> Turn:
    lifecycle.run_expire_if_due(run=run)
    last_event = run_events.followed_from(run)
    written = run_events.written_so_far(run.pk) if last_event else ""
    return Turn(run=run, steps=step_views(run), last_event=last_event, written=written, **extra)


def _session(request: MemberRequest, state: dict[str, Any]) -> Session | None:
    session_id = state.get("session")
    if not session_id:
        return None
    try:
        return conversation_selectors.session_get(project=request.project, session_id=session_id)
    except NotFound:
        return None


def anonymous_left_out(request: MemberRequest, agent: Agent) -> list[str]:
    """The draft's action tools an anonymous customer is not offered (anonymous actions off), by name."""
    config = validate_config(agent.config)
    if config["tools"].get("allow_anonymous_actions") or not config["tools"].get("enabled", True):
        return []
    http_tools = {t.name: t.definition() for t in http_tool_list(project=request.project)}
    mcp = mcp_granted(project_id=request.project.pk, grants=config["tools"].get("mcp", []))

    def offered(verified: bool) -> set[str]:
        facts = ToolSetFacts(
            one_shot=False,
            allow_actions=False,
            verified=verified,
            actions_paused=agent.actions_paused,
            store=True,
            has_searchable_knowledge=True,
        )
        built = tool_set_build(config=config, http_tools=http_tools, mcp_tools=mcp.definitions, facts=facts)
        return {spec.name for spec in built}

    return sorted(offered(True) - offered(False))


def panel_context(request: MemberRequest, agent: Agent, **extra: Any) -> dict[str, Any]:
    """What the panel shows: the conversation so far, one turn per run, and the send form's settings."""
    state = _state(request, agent)
    session = _session(request, state)
    turns = []
    if session is not None and session.agent_id == agent.pk:
        runs = selectors.run_list(project=request.project, session_id=session.pk, sandbox=True).order_by("pk")
        turns = [_turn(run) for run in runs]
    context = {
        "panel_agent": agent,
        "panel_turns": turns,
        "panel_session": session,
        "panel_customer": session.end_user.external_id if session and session.end_user else state.get("customer", ""),
        "panel_real": bool(state.get("real")),
        "panel_left_out": anonymous_left_out(request, agent) if session is None else [],
        "panel_problems": Problems(),
        "panel_message": "",
        "panel_focus": False,
    }
    context.update(extra)
    return context


def _panel(request: MemberRequest, agent: Agent, **extra: Any) -> HttpResponse:
    if not request.htmx:
        return HttpResponseRedirect(reverse("dashboard:agent", kwargs={"agent_id": agent.pk}) + "#panel")
    return render(request, "dashboard/_panel.html", panel_context(request, agent, **extra))


PANEL_FIELDS = ("$.input", "$.end_user")


@member_page("GET")
def panel(request: MemberRequest, agent_id: str) -> HttpResponse:
    return _panel(request, agent_get(project=request.project, agent_id=agent_id))


@member_page("POST")
def panel_send(request: MemberRequest, agent_id: str) -> HttpResponse:
    """One message to the draft: a sandbox run on the panel's session (started on the first message)."""
    agent = agent_get(project=request.project, agent_id=agent_id)
    state = _state(request, agent)
    message = request.POST.get("message", "").replace("\r\n", "\n")
    real = request.POST.get("run_real_actions") == "on"
    state["real"] = real
    session = _session(request, state)
    customer = session.end_user.external_id if session and session.end_user else request.POST.get("customer", "")
    customer = customer.strip()
    try:
        body = RUN_CREATE.parse(
            {
                "agent": agent.pk,
                "input": message,
                "sandbox": {"run_real_actions": real},
                **({"end_user": {"external_id": customer}} if customer else {}),
            }
        )
        throttle.dashboard_action(request.project.pk, request.user.pk)
        if session is None or session.agent_id != agent.pk:
            claim = EndUserClaim(external_id=customer) if customer else None
            session = conversation.panel_session_create(project=request.project, agent_id=agent.pk, end_user=claim)
            state.update(session=session.pk, customer=customer)
        services.run_create(
            project=request.project,
            api_key=None,
            agent_id=agent.pk,
            text=body.input,
            session_id=session.pk,
            sandbox=True,
            run_real_actions=real,
        )
    except ApiError as exc:
        _save_state(request, agent, state)
        if exc.code == "session_handed_off":  # said for the panel, not for an app
            exc = ApiError(exc.code, HANDED_OFF_IN_PANEL, status=409)
        problems = problems_from(exc, PANEL_FIELDS)
        return _panel(request, agent, panel_problems=problems, panel_message=message, panel_customer=customer)
    _save_state(request, agent, state)
    return _panel(request, agent, panel_focus=True)


HANDED_OFF_IN_PANEL = (
    "The team holds this test conversation since its real handoff, so the agent keeps quiet: hand it back on the "
    "desk, or start a new conversation."
)


@member_page("POST")
def panel_new(request: MemberRequest, agent_id: str) -> HttpResponse:
    """New conversation: the next message starts a new session (and may name another customer)."""
    agent = agent_get(project=request.project, agent_id=agent_id)
    state = _state(request, agent)
    _save_state(request, agent, {"real": bool(state.get("real"))})
    return _panel(request, agent, panel_focus=True)


def _panel_run(request: MemberRequest, agent_id: str, run_id: str) -> tuple[Agent, Run]:
    """A run of this agent's test panel in this project, or a 404."""
    agent = agent_get(project=request.project, agent_id=agent_id)
    run = selectors.run_get(project=request.project, run_id=run_id)
    if run.agent_id != agent.pk or not run.sandbox:
        raise NotFound("No test-panel run with that id for this agent.")
    return agent, run


@member_page("GET")
def panel_turn(request: MemberRequest, agent_id: str, run_id: str) -> HttpResponse:
    """One turn, fetched again on each of its run's events while it works."""
    agent, run = _panel_run(request, agent_id, run_id)
    return render(request, "dashboard/_turn.html", {"turn": _turn(run), "panel_agent": agent})


def _output(text: str) -> Any:
    """What was typed as a client tool's output: JSON if it is JSON, else the text itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


@member_page("POST")
def panel_approve(request: MemberRequest, agent_id: str, run_id: str) -> HttpResponse:
    """Approve or deny the actions a test-panel run waits for, as a person would on the desk."""
    agent, run = _panel_run(request, agent_id, run_id)
    problems = Problems()
    try:
        decide_from_post(request, run)
    except ApiError as exc:
        problems.add("$.approval", exc.message)
    run.refresh_from_db()
    return render(request, "dashboard/_turn.html", {"turn": _turn(run, problems=problems), "panel_agent": agent})


@member_page("POST")
def panel_outputs(request: MemberRequest, agent_id: str, run_id: str) -> HttpResponse:
    """The client tool outputs typed in the panel, submitted as an app would submit them."""
    agent, run = _panel_run(request, agent_id, run_id)
    calls = (run.required_action or {}).get("tool_calls", [])
    typed = {call["call_id"]: request.POST.get(f"output.{call['call_id']}", "") for call in calls}
    problems = Problems()
    try:
        body = SUBMIT_TOOL_OUTPUTS.parse(
            {
                "tool_outputs": [
                    {
                        "call_id": call_id,
                        "output": _output(text),
                        "is_error": request.POST.get(f"is_error.{call_id}") == "on",
                    }
                    for call_id, text in typed.items()
                ]
                or [{"call_id": ""}]
            }
        )
        run = lifecycle.run_submit_tool_outputs(
            run=run,
            tool_outputs=[
                lifecycle.ToolOutput(item["call_id"], item.get("output"), bool(item.get("is_error")))
                for item in body.tool_outputs
            ],
        )
    except ApiError as exc:
        first = next(iter(typed), "")
        problems = problems_from(exc, [f"$.output.{first}"], translate=lambda path: f"$.output.{first}")
    turn = _turn(run, problems=problems, outputs=typed if problems else {})
    return render(request, "dashboard/_turn.html", {"turn": turn, "panel_agent": agent})
