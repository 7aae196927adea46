from typing import Any

from django.apps import AppConfig
from django.core import checks


class ToolsConfig(AppConfig):
    name = "tools"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        checks.register(builtins_executed)


def builtins_executed(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Every built-in has an executor once the apps are ready: each app binds its own in its `ready` (tools/builtins.py
    says why), so a built-in whose app forgot is found here, at start, not at its first call."""
    from tools import builtins

    return [
        checks.Error(
            f"The built-in {name} has no executor.",
            hint="Bind one with @tools.builtins.executes(...) in the app that owns what it does, imported by its "
            "AppConfig.ready().",
            id="tools.E001",
        )
        for name in builtins.unexecuted()
    ]
