from django.apps import AppConfig


class KagentConfig(AppConfig):
    name = "kagent"
    verbose_name = "K-Agent"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from kagent import openapi  # noqa: F401  (registers the API key scheme with drf-spectacular)
