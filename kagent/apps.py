from django.apps import AppConfig


class KagentConfig(AppConfig):
    name = "kagent"
    verbose_name = "K-Agent"
    default_auto_field = "django.db.models.BigAutoField"
