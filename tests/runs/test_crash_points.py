"""A worker SIGKILLed right after each durable write of a run (the store's fault hook, armed through the worker's
environment): the run is picked up again by another worker and ends completed, nothing is lost, a call that succeeded
is never sent again, a call that may have been in flight is sent again with the same `webhook-id`, and every attempt
that reached the business is in the egress log (also the one whose result the dead worker never wrote)."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from fakes.llm import calls, text
from kagent.models import EgressEvent
from runs.lifecycle import run_sweep
from runs.models import Run, ToolCall
from tests.conftest import make_tenant, wait_for
from tests.runs.conftest import VERIFIED, Harness
from tests.runs.test_http_tools import setup_tool

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

ANSWER = "Order 8812 has shipped and 9913 is packed."


def worker_env(fake_llm, settings, point, marker):
    return {
        **fake_llm.worker_env(),
        "KAGENT_RUN_LEASE_SECONDS": "2",
        "KAGENT_EGRESS_ALLOW_NETWORKS": " ".join(settings.KAGENT_EGRESS_ALLOW_NETWORKS),
        "KAGENT_EGRESS_CA_BUNDLE": settings.KAGENT_EGRESS_CA_BUNDLE,
        "KAGENT_EGRESS_RESOLVE": settings.KAGENT_EGRESS_RESOLVE,
        "KAGENT_TEST_CRASH_AT": point,
        "KAGENT_TEST_CRASH_MARKER": str(marker),
    }


# point -> how many times the business sees each call (a call in flight at the crash is sent again, same id)
POINTS = {
    "claimed": (1, 1),  # nothing sent yet
    "round": (1, 1),  # the first call recorded as running, not yet sent: sent once, after the restart
    "running": (1, 1),  # the second call recorded as running, not yet sent
    "sent": (2, 1),  # the first call reached the business, its result wasn't written: sent again, same id
    "result": (1, 1),  # its result was written: never sent again
    "completed": (1, 1),  # the run was over
}


@pytest.mark.parametrize("point", list(POINTS))
def test_a_worker_killed_after_each_durable_write(
    point, start_worker, fake_llm, upstream, egress_settings, settings, tmp_path
):
    tenant = make_tenant("alice")
    h = Harness(tenant, fake_llm)
    setup_tool(h, upstream)
    upstream.respond("order", json_body={"data": [{"status": "shipped", "eta": "Tuesday"}]})
    agent = h.agent(
        f"crash-{point}",
        [
            calls(("order_status", {"order_number": "8812"}), ("order_status", {"order_number": "9913"})),
            text(ANSWER),
        ],
        tools={"http": [{"tool": "order_status"}]},
    )
    marker = tmp_path / "crashed"
    start_worker(worker_env(fake_llm, settings, point, marker))
    run_id = h.start(agent, "where are 8812 and 9913?", **VERIFIED)["id"]
    wait_for(marker.exists, timeout=30, message=f"the worker to die at {point}")
    # The worker runs its runs in threads (docker-compose.yml): the whole process died with them. Another worker is
    # what is left alive, as on a second host; the marker keeps it from dying at the same point.
    start_worker(worker_env(fake_llm, settings, point, marker))

    settings.KAGENT_RUN_LEASE_SECONDS = 2
    if point != "completed":
        time.sleep(2.5)  # the dead worker's lease runs out; the sweeper hands the run to a live worker
        assert run_sweep()["requeued"] == 1
    wait_for(lambda: Run.objects.get(pk=run_id).status == "completed", timeout=40, message="completion")

    run = Run.objects.get(pk=run_id)
    assert run.output["text"] == ANSWER and run.output["unverified_claims"] == []
    assert run.claims == (1 if point == "completed" else 2)
    tool_calls = list(ToolCall.objects.filter(run_id=run_id).order_by("index"))
    assert [call.status for call in tool_calls] == ["succeeded", "succeeded"]
    sends = Counter(request.headers["webhook-id"] for request in upstream.received)
    assert [sends[call.pk] for call in tool_calls] == list(POINTS[point])
    logged = EgressEvent.objects.filter(project=tenant.project, purpose="http_tool", decision="allowed")
    assert logged.count() == sum(POINTS[point])
    assert all(all(request.signature_valid) for request in upstream.received)
