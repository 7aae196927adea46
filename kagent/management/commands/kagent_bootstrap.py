import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from kagent.cors import allowed_origins_parse
from kagent.errors import ApiError
from kagent.services import bootstrap


class Command(BaseCommand):
    help = "Create (or reuse) an organization, project, dashboard owner and API keys."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True, help="organization name")
        parser.add_argument("--project", required=True, help="project name")
        parser.add_argument("--email", required=True, help="dashboard owner's email")
        parser.add_argument("--password", required=True, help="dashboard owner's password")
        parser.add_argument("--new-keys", action="store_true", help="create new API keys even if some exist")
        parser.add_argument(
            "--allowed-origin",
            action="append",
            default=[],
            help="an origin (https://shop.example) whose pages may use the project's publishable keys (the chat "
            "widget); added to every active publishable key; repeatable",
        )
        parser.add_argument("--json", action="store_true", help="print the result as JSON")

    def handle(self, *args: object, **options: object) -> None:
        for name in ("org", "project", "email", "password"):
            if not str(options[name]).strip():
                raise CommandError(f"--{name} must not be empty")
        if "@" not in str(options["email"]):
            raise CommandError("--email must be an email address")
        raw_origins = options["allowed_origin"]
        try:
            origins = allowed_origins_parse(list(raw_origins) if isinstance(raw_origins, list) else [])
        except ApiError as exc:
            raise CommandError(f"--allowed-origin: {exc.message}") from None
        result = bootstrap(
            org_name=str(options["org"]).strip(),
            project_name=str(options["project"]).strip(),
            email=str(options["email"]),
            password=str(options["password"]),
            new_keys=bool(options["new_keys"]),
            allowed_origins=origins,
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
