"""`manage.py kagent_demo_agent --project proj_… --json`: the demo project's agent for the chat widget's demo page
(`bin/run`), made and published once, reused after. It runs on the offline `demo` model, with the handoff and
ticket built-ins on, so a visitor sees both."""

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from agents.models import Agent
from agents.services import agent_create, agent_publish
from kagent.models import Project

DEMO_AGENT_NAME = "Demo assistant"
DEMO_CONFIG = {
    "instructions": "You answer customers of Acme Shoes, a pretend shop. Be brief and kind. Hand the conversation "
    "to a person when asked, and open a ticket for a problem the team must look into.",
    "model": {"provider": "demo", "name": "demo"},
    "tools": {"builtin": {"create_ticket": {"enabled": True}}},
}


class Command(BaseCommand):
    help = "Create (or reuse) the published demo agent of a project, for the chat widget's demo page."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="the project's id (proj_…)")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args: object, **options: object) -> None:
        project = Project.objects.filter(pk=str(options["project"])).first()
        if project is None:
            raise CommandError("--project names no project")
        with transaction.atomic():
            agent = Agent.objects.filter(project=project, name=DEMO_AGENT_NAME).order_by("created_at").first()
            if agent is None:
                agent = agent_create(project=project, name=DEMO_AGENT_NAME, config=DEMO_CONFIG)
            if not agent.versions.exists():
                agent_publish(agent=agent, note="the chat widget's demo")
        result = {"agent": {"id": agent.pk, "name": agent.name}}
        self.stdout.write(json.dumps(result) if options["json"] else f"demo agent {agent.name} ({agent.pk})")
