from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from runs import (
            builtins,  # noqa: F401  (binds flag_conversation's and search_knowledge's executors)
            webhooks,
        )

        webhooks.register()  # how `hooks` renders a run's events when it dispatches them
