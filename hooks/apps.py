from django.apps import AppConfig


class HooksConfig(AppConfig):
    name = "hooks"
    verbose_name = "Webhooks"
    default_auto_field = "django.db.models.BigAutoField"
