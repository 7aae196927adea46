"""Review finding (rev1): a lone surrogate escape in the model's arguments (valid JSON, `"\\ud800"`) makes the
policy check raise UnicodeEncodeError (arguments_hash encodes to UTF-8) instead of refusing the call: a hostile
model output fails the whole run with internal_error."""

from __future__ import annotations

import pytest

from tests.tools.test_policy import context
from tools.policy import policy_check


@pytest.mark.parametrize(
    "raw", ['{"order": "88\\ud80012"}', '{"order": "8812", "\\udc00": 1}', '{"order": ' + "[" * 5000 + "]" * 5000 + "}"]
)
def test_a_lone_surrogate_in_the_arguments_is_refused_not_raised(raw: str) -> None:
    decision = policy_check(context(), "refund", raw)
    assert (decision.allowed, decision.code) == (False, "invalid_arguments")
