from typing import Any

from django.apps import AppConfig
from django.core import checks


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        checks.register(open_runs_bound)


def open_runs_bound(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """What the runs app binds here once it is ready (what a team message does to a conversation's open run): found
    missing at start, not at the first team message."""
    from conversations.services import OPEN_RUNS

    if OPEN_RUNS.bound:
        return []
    return [
        checks.Error(
            f"{OPEN_RUNS.what} are not bound.",
            hint="conversations.services.bind_open_runs(...) in the runs app's AppConfig.ready().",
            id="conversations.E001",
        )
    ]
