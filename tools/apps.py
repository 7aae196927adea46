from django.apps import AppConfig


class ToolsConfig(AppConfig):
    name = "tools"
    default_auto_field = "django.db.models.BigAutoField"
