"""Python client for the K-Agent REST API.

from kagent_client import Client

client = Client(api_key="ka_sk_…", base_url="http://127.0.0.1:8000")
run = client.runs.create_and_run(agent="agt_…", input="What's in my cart?", client_tools={"get_cart": get_cart})
print(run.status, run.output.text)
"""

from kagent_client._client import DEFAULT_BASE_URL, AsyncClient, Client, __version__
from kagent_client._errors import ApiConnectionError, ApiError
from kagent_client._http import NOT_GIVEN, RetryPolicy
from kagent_client._objects import Answer, Event, KObject, Page
from kagent_client._runs import CLOSING_EVENTS, SETTLED, TERMINAL, RunTimeout
from kagent_client._sse import SSEDecoder

__all__ = [
    "Answer",
    "CLOSING_EVENTS",
    "DEFAULT_BASE_URL",
    "NOT_GIVEN",
    "SETTLED",
    "TERMINAL",
    "ApiConnectionError",
    "ApiError",
    "AsyncClient",
    "Client",
    "Event",
    "KObject",
    "Page",
    "RetryPolicy",
    "RunTimeout",
    "SSEDecoder",
    "__version__",
]
