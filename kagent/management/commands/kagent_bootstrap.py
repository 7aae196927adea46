import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from kagent.services import bootstrap


class Command(BaseCommand):
    help = "Create (or reuse) an organization, project, dashboard owner and API keys."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True, help="organization name")
        parser.add_argument("--project", required=True, help="project name")
        parser.add_argument("--email", required=True, help="dashboard owner's email")
        parser.add_argument("--password", required=True, help="dashboard owner's password")
        parser.add_argument("--new-keys", action="store_true", help="create new API keys even if some exist")
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args: object, **options: object) -> None:
        for name in ("org", "project", "email", "password"):
            if not str(options[name]).strip():
                raise CommandError(f"--{name} must not be empty")
        if "@" not in str(options["email"]):
            raise CommandError("--email must be an email address")
        result = bootstrap(
            org_name=str(options["org"]).strip(),
            project_name=str(options["project"]).strip(),
            email=str(options["email"]),
            password=str(options["password"]),
            new_keys=bool(options["new_keys"]),
        )
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        self.stdout.write(f"organization   {result['organization']['name']} ({result['organization']['id']})")
        self.stdout.write(f"project        {result['project']['name']} ({result['project']['id']})")
        self.stdout.write(f"dashboard user {result['dashboard_user']['email']}")
        for label, field in (("secret key", "secret_key"), ("publishable key", "publishable_key")):
            value = result[field] or "(unchanged; shown when created; use --new-keys for a new one)"
            self.stdout.write(f"{label:<15}{value}")
