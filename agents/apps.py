from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents.selectors import agents_granting_mcp_server, agents_granting_tool
        from tools.selectors import Grants, bind_grants

        # The tools app refuses to delete or rename what an agent's draft grants; the drafts are here.
        bind_grants(Grants(http_tool=agents_granting_tool, mcp_server=agents_granting_mcp_server))
