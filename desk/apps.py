from django.apps import AppConfig


class DeskConfig(AppConfig):
    name = "desk"
    verbose_name = "Desk"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        import desk.executors  # noqa: F401  (binds transfer_to_human's and create_ticket's executors, and the desk's facts)
