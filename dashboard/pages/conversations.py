"""A conversation's page (`/sessions/{id}/`), where the desk links to: what the customer, the agent and the team said,
live while it is open (SPEC §4 "Live handoff": the conversation's events, followed by static/dashboard/app.js), and
the team's part of a live handoff: **Send reply** (a `team` message signed with the member's name), **Hand back to
agent** and **Close conversation**, through the services `POST /v1/sessions/{id}/messages` and `PATCH
/v1/sessions/{id}` use, with the API's inputs and messages (the dashboard is trusted like the secret key)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse

from conversations import selectors, session_events
from conversations import services as conversation_state
from conversations.apis import MESSAGE_CREATE, SESSION_UPDATE
from conversations.models import Message, Session
from conversations.resources import MESSAGE
from dashboard.access import MemberRequest, member_page
from dashboard.problems import Problems, problems_from
from desk import selectors as desk_selectors
from kagent.errors import ApiError
from kagent.models import User
from kagent.streams import StreamPlaces, resume_after
from kagent.throttle import RateLimited
from runs import selectors as run_selectors

AUTHOR_MAX = conversation_state.AUTHOR_MAX
REPLY_FIELDS = ("$.content",)
STATUS_CHANGED = {
    Session.Status.OPEN: "Handed back to the agent: it answers the customer's next message.",
    Session.Status.CLOSED: "Conversation closed.",
}


def author_name(user: User) -> str:
    """How the team's replies are signed for the customer: the member's first name, else their email's local part."""
    first = next(iter(user.name.split()), "")
    return (first or user.email.split("@", 1)[0])[:AUTHOR_MAX]


def _reply_context(request: MemberRequest, session: Session, **extra: Any) -> dict[str, Any]:
    context = {
        "session": session,
        "status": selectors.session_status(session),
        "author": author_name(request.user),
        "reply_problems": Problems(),
        "reply_content": "",
        "sent": None,
    }
    context.update(extra)
    return context


@member_page("GET")
def conversation(request: MemberRequest, session_id: str) -> HttpResponse:
    """The whole conversation, its runs, its handoffs and tickets; the page follows its events from the last one
    written before its messages were read (a message written in between is shown once: the page skips what it has)."""
    session = selectors.session_get(project=request.project, session_id=session_id)
    last_event = session_events.last_id(session.pk)
    context = _reply_context(request, session)
    context.update(
        {
            "last_event": last_event,
            "messages_": selectors.session_messages(session=session).order_by("created_at", "pk"),
            "runs": run_selectors.run_list(project=request.project, session_id=session.pk).order_by("-pk")[:100],
            "handoffs": desk_selectors.handoff_list(project=request.project, include_tests=True).filter(
                session=session
            ),
            "tickets": desk_selectors.ticket_list(project=request.project, include_tests=True).filter(session=session),
        }
    )
    return render(request, "dashboard/session.html", context)


@member_page("GET")
def conversation_events(request: MemberRequest, session_id: str) -> HttpResponseBase:
    """The conversation's events (Server-Sent Events, as `GET /v1/sessions/{id}/events` for the secret key): its page
    adds each new message and shows each change of its status as they come."""
    session = selectors.session_get(project=request.project, session_id=session_id)
    after = resume_after(request)
    try:
        places = StreamPlaces.take(request, f"member:{request.user.pk}")
    except RateLimited as exc:  # the page opens it again a few seconds later
        return HttpResponse(exc.message, status=429, headers=exc.headers, content_type="text/plain")
    return session_events.session_event_stream(session.pk, places, after=after)


def _page(session: Session, anchor: str = "") -> HttpResponse:
    return redirect(reverse("dashboard:session", kwargs={"session_id": session.pk}) + anchor)


@member_page("POST")
def conversation_reply(request: MemberRequest, session_id: str) -> HttpResponse:
    """**Send reply**: the team's message, signed with the member's name; a conversation the agent holds goes to the
    team. With htmx the form comes back empty with the message sent (the page adds it to the thread); without, the
    page again."""
    session = selectors.session_get(project=request.project, session_id=session_id)
    content = request.POST.get("content", "").replace("\r\n", "\n")
    try:
        author = author_name(request.user)
        body = MESSAGE_CREATE.parse({"role": Message.Role.TEAM, "content": content, "author": author})
        message = conversation_state.session_message_create(
            session=session, role=body.role, content=body.content, author=body.author or ""
        )
    except ApiError as exc:
        if request.htmx:
            problems = problems_from(exc, REPLY_FIELDS)
            context = _reply_context(request, session, reply_problems=problems, reply_content=content)
            return render(request, "dashboard/_reply_form.html", context)
        messages.error(request, exc.message)
        return _page(session, "#reply")
    if request.htmx:
        session = selectors.session_get(project=request.project, session_id=session.pk)
        sent = {"message": MESSAGE.render(message), "status": selectors.session_status(session)}
        return render(request, "dashboard/_reply_form.html", _reply_context(request, session, sent=sent))
    return _page(session, "#reply")


@member_page("POST")
def conversation_status(request: MemberRequest, session_id: str) -> HttpResponse:
    """**Hand back to agent** (`open`) or **Close conversation** (`closed`), as `PATCH /v1/sessions/{id}` does."""
    session = selectors.session_get(project=request.project, session_id=session_id)
    try:
        body = SESSION_UPDATE.parse({"status": request.POST.get("status", "")})
        session = conversation_state.session_update(session=session, status=body.status)
    except ApiError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, STATUS_CHANGED[Session.Status(session.status)])
    return _page(session)
