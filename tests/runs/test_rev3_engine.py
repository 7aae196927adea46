"""rev3: model output that escapes a policy step or breaks the engine."""

from __future__ import annotations

import pytest

from fakes.llm import calls, text
from runs.models import Handoff
from tests.runs.test_policy_refusals import refusals

pytestmark = pytest.mark.django_db


def test_deeply_nested_arguments_are_invalid_arguments_not_an_internal_error(h):
    """JSON nested deeper than the parser's recursion limit raises RecursionError, which parse_arguments doesn't
    catch: the whole run fails with internal_error instead of the model hearing invalid_arguments."""
    nested = "[" * 100_000 + "]" * 100_000
    agent = h.agent("rev3-deep", [calls(("transfer_to_human", nested)), text("Sorry, that didn't work.")])
    run = h.run(agent)
    assert run["status"] == "completed", run.get("last_error")
    assert refusals(h, run["id"]) == [("transfer_to_human", "invalid_arguments")]


def test_deep_but_parseable_arguments_do_not_break_the_run(h):
    nested = '{"summary": "x", "reason_type": "complaint", "extra": ' + "[" * 5_000 + "]" * 5_000 + "}"
    agent = h.agent("rev3-deep2", [calls(("transfer_to_human", nested)), text("Sorry, that didn't work.")])
    run = h.run(agent)
    assert run["status"] == "completed", run.get("last_error")
    assert refusals(h, run["id"]) == [("transfer_to_human", "invalid_arguments")]


def test_duplicate_handoff_is_not_fooled_by_whitespace(h):
    """Step 5: the same tool with the same arguments. A trailing space or doubled space in the summary makes a second
    handoff (and a second handoff.created webhook) in the same reply."""
    agent = h.agent(
        "rev3-dup-ws",
        [
            calls(("transfer_to_human", {"reason_type": "complaint", "summary": "Late order"})),
            calls(("transfer_to_human", {"reason_type": "complaint", "summary": " Late  order "})),
            text("The team has it."),
        ],
    )
    run = h.run(agent)
    assert run["status"] == "completed", run
    assert Handoff.objects.count() == 1, refusals(h, run["id"])
