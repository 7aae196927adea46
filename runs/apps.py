from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import runs.executors  # noqa: F401  (binds flag_conversation's and search_knowledge's executors)
        from conversations.services import bind_open_runs
        from runs import lifecycle, webhook_events

        webhook_events.register()  # how `hooks` renders a run's events when it dispatches them
        # A team message on a conversation the agent holds supersedes the run still open there.
        bind_open_runs(lifecycle.supersede_open_runs)
