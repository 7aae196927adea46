from django.apps import AppConfig


class ChecksConfig(AppConfig):
    name = "checks"
    verbose_name = "Checks"
    default_auto_field = "django.db.models.BigAutoField"
