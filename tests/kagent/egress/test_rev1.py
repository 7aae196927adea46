"""Review findings (rev1): each test fails on the code as reviewed."""

from __future__ import annotations

import pytest

from kagent.egress import EgressClient, EgressError
from kagent.models import EgressEvent

pytestmark = pytest.mark.django_db


def _request(client: EgressClient, url: str, **kwargs):
    params = {"project_id": None, "purpose": "http_tool", "method": "GET", "url": url, "headers": {}, "body": None,
              "timeout_ms": 3000}
    params.update(kwargs)
    return client.request(**params)


@pytest.mark.parametrize("value", ["token\n"])
def test_a_header_value_ending_in_a_line_feed_is_refused_before_connecting(client, base_url, upstream, value):
    with pytest.raises(EgressError) as info:
        _request(client, f"{base_url}/echo", headers={"X-A": value})
    assert info.value.code == "invalid_request"
    assert upstream.sni_names == []  # refused by the check, not by h11 after a TLS handshake
    assert EgressEvent.objects.get().decision == "refused"
