"""The client's objects (attribute access over the JSON kept as it came) and its reading of Retry-After."""

from __future__ import annotations

import copy
import email.utils
import pickle
import time

import httpx
import pytest
from kagent_client import KObject, Page
from kagent_client._http import retry_after_seconds

RUN = {
    "id": "run_1",
    "object": "run",
    "status": "requires_action",
    "output": None,
    "required_action": {"tool_calls": [{"call_id": "call_1", "name": "get_cart", "arguments": {}}]},
}


def test_fields_as_attributes_and_the_raw_json_kept():
    run = KObject(RUN)
    assert (run.id, run.status, run.output) == ("run_1", "requires_action", None)
    assert run.required_action.tool_calls[0].name == "get_cart"
    assert run.raw == RUN and run["required_action"] == RUN["required_action"] and run == RUN
    assert "status" in run and run.get("missing", 1) == 1
    with pytest.raises(AttributeError, match="no field 'missing'"):
        _ = run.missing
    with pytest.raises(AttributeError):
        run.status = "completed"  # type: ignore[misc]
    assert copy.deepcopy(run) == run and pickle.loads(pickle.dumps(run)) == run
    assert run.to_dict() == RUN and run.to_dict() is not run.raw
    assert "required_action" in dir(run) and "KObject<run>" in repr(run)


def test_a_page_iterates_its_objects():
    page = Page({"data": [RUN, {**RUN, "id": "run_0"}], "next": "run_0"})
    assert [r.id for r in page] == ["run_1", "run_0"] and len(page) == 2 and page.next == "run_0"
    assert Page({"data": [], "next": None}).next is None


def test_retry_after_in_seconds_or_as_a_date():
    assert retry_after_seconds(httpx.Headers({"Retry-After": "7"})) == 7.0
    later = email.utils.formatdate(time.time() + 120, usegmt=True)
    assert 100 < (retry_after_seconds(httpx.Headers({"Retry-After": later})) or 0) <= 120
    assert retry_after_seconds(httpx.Headers({"Retry-After": "soon"})) is None
    assert retry_after_seconds(httpx.Headers()) is None
