from typing import Any

from django.apps import AppConfig
from django.core import checks


class ToolsConfig(AppConfig):
    name = "tools"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        checks.register(builtins_executed)
        checks.register(bindings_made)


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


def bindings_made(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """What the apps above bind for this one once they are ready: the desk's facts (the engine asks them through
    tools.builtins) and the agents' grants of a tool (tools.selectors). Found missing at start, not at first use."""
    from tools import builtins, selectors

    missing = []
    if not builtins.DESK.bound:
        missing.append(("the desk's facts", "tools.builtins.bind_desk", "tools.E002"))
    if not selectors.GRANTS.bound:
        missing.append(("the agents' grants of a tool", "tools.selectors.bind_grants", "tools.E003"))
    return [
        checks.Error(f"{what} are not bound.", hint=f"{how}(...) in the owning app's AppConfig.ready().", id=code)
        for what, how, code in missing
    ]
