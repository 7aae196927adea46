"""Review findings (rev1): a value ending in a line feed passes the header check (`$` matches before a final
newline), so it is only refused by h11 after a connection and TLS handshake to the upstream."""

from __future__ import annotations

import pytest

from tests.tools.test_templating import USER, refused, tool_with
from tools.templating import EndUserIdentity, SecretValue


@pytest.mark.parametrize(
    ("header", "kwargs"),
    [
        ("{{var.store_lf}}", {"variables": {"store_lf": "riyadh-1\n"}}),
        ("{{end_user.traits.tier}}", {"end_user": EndUserIdentity("cus_42", {"tier": "gold\n"})}),
        ("{{secret.LF}}", {"secret_lookup": lambda n: SecretValue("tok_live\n", ("api.example.com",))}),
    ],
)
def test_a_header_value_ending_in_a_line_feed_is_refused(header, kwargs):
    assert USER  # the seed user is replaced where the case needs another
    assert refused(tool_with(headers={"X-Value": header}), **kwargs).code == "invalid_header_value"
