from django.contrib.auth.decorators import login_required
from django.urls import path, re_path

from dashboard import views
from dashboard.pages import (
    account,
    agents,
    api_keys,
    conversations,
    desk,
    knowledge,
    mcp,
    panel,
    runs,
    settings,
    tools,
    webhooks,
    widget,
)
from kagent import converters  # noqa: F401  (registers `oid` and `name`)

app_name = "dashboard"

AGENT = "agents/<oid:agent_id>"

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("widget/demo/", widget.widget_demo, name="widget-demo"),
    path("logout/", views.logout_view, name="logout"),
    path("account/password/", login_required(settings.PasswordChangeView.as_view()), name="password"),
    # Reached from mails: "Forgot your password?" and an invitation's link (its token moves into the session).
    path("password-reset/", account.ForgotPasswordView.as_view(), name="password-reset"),
    path("password-reset/sent/", account.ForgotPasswordSentView.as_view(), name="password-reset-sent"),
    path("password-reset/<uidb64>/<token>/", account.ResetPasswordView.as_view(), name="password-reset-confirm"),
    path("invitations/accept/", account.invitation, name="invitation"),
    path("invitations/<str:token>/", account.invitation_link, name="invitation-link"),
    path("projects/", views.project_picker, name="projects"),
    path("projects/<oid:project_id>/select/", views.project_select, name="project-select"),
    # Agents: the editor, the test panel (htmx endpoints under panel/), versions.
    path("agents/", agents.agent_list, name="agents"),
    path("agents/new/", agents.agent_new, name="agent-new"),
    path(f"{AGENT}/", agents.agent_detail, name="agent"),
    path(f"{AGENT}/actions-paused/", agents.agent_actions_paused, name="agent-actions-paused"),
    path(f"{AGENT}/publish/", agents.agent_publish, name="agent-publish"),
    path(f"{AGENT}/delete/", agents.agent_delete, name="agent-delete"),
    path(f"{AGENT}/versions/", agents.agent_versions, name="agent-versions"),
    path(f"{AGENT}/versions/<int:number>/restore/", agents.agent_version_restore, name="agent-version-restore"),
    path(f"{AGENT}/versions/<int:number>/rollback/", agents.agent_rollback, name="agent-rollback"),
    path(f"{AGENT}/traffic/", agents.agent_traffic, name="agent-traffic"),
    path(f"{AGENT}/checks/", agents.agent_check_add, name="agent-check-add"),
    path(f"{AGENT}/checks/run/", agents.agent_checks_run, name="agent-checks-run"),
    path(f"{AGENT}/checks/status/", agents.agent_checks, name="agent-checks"),
    path(f"{AGENT}/checks/from-run/<oid:run_id>/", agents.agent_check_from_run, name="agent-check-from-run"),
    path(f"{AGENT}/checks/<oid:check_id>/delete/", agents.agent_check_delete, name="agent-check-delete"),
    path(f"{AGENT}/panel/", panel.panel, name="panel"),
    path(f"{AGENT}/panel/send/", panel.panel_send, name="panel-send"),
    path(f"{AGENT}/panel/new/", panel.panel_new, name="panel-new"),
    path(f"{AGENT}/panel/runs/<oid:run_id>/", panel.panel_turn, name="panel-turn"),
    path(f"{AGENT}/panel/runs/<oid:run_id>/outputs/", panel.panel_outputs, name="panel-outputs"),
    path(f"{AGENT}/panel/runs/<oid:run_id>/approve/", panel.panel_approve, name="panel-approve"),
    # Knowledge sources.
    path("knowledge/", knowledge.knowledge_list, name="knowledge"),
    path("knowledge/<oid:source_id>/", knowledge.knowledge_source, name="knowledge-source"),
    path("knowledge/<oid:source_id>/refresh/", knowledge.knowledge_refresh, name="knowledge-refresh"),
    path("knowledge/<oid:source_id>/delete/", knowledge.knowledge_delete, name="knowledge-delete"),
    # HTTP tools. The editor's htmx endpoints take the form as it stands (a definition not yet saved).
    path("tools/", tools.tool_list, name="tools"),
    path("tools/new/", tools.tool_new, name="tool-new"),
    path("tools/preview/", tools.tool_preview, name="tool-preview"),
    path("tools/test-call/", tools.tool_test_call, name="tool-test-call"),
    path("tools/samples/", tools.tool_samples, name="tool-samples"),
    # MCP servers (before tools/<name>/: "mcp" is not a tool's name here).
    path("tools/mcp/new/", mcp.mcp_server_new, name="mcp-server-new"),
    path("tools/mcp/<oid:server_id>/", mcp.mcp_server_detail, name="mcp-server"),
    path("tools/mcp/<oid:server_id>/refresh/", mcp.mcp_server_refresh, name="mcp-server-refresh"),
    path("tools/mcp/<oid:server_id>/delete/", mcp.mcp_server_delete, name="mcp-server-delete"),
    path("tools/<name:name>/", tools.tool_detail, name="tool"),
    path("tools/<name:name>/delete/", tools.tool_delete, name="tool-delete"),
    # Runs, conversations, the desk, the egress log.
    path("runs/", runs.run_list, name="runs"),
    path("runs/<oid:run_id>/", runs.run_detail, name="run"),
    path("runs/<oid:run_id>/live/", runs.run_timeline, name="run-live"),
    path("runs/<oid:run_id>/events/", runs.run_events_stream, name="run-events"),
    path("runs/<oid:run_id>/cancel/", runs.run_cancel, name="run-cancel"),
    # A conversation, live, and the team's part of a live handoff (SPEC §4).
    path("sessions/<oid:session_id>/", conversations.conversation, name="session"),
    path("sessions/<oid:session_id>/events/", conversations.conversation_events, name="session-events"),
    path("sessions/<oid:session_id>/reply/", conversations.conversation_reply, name="session-reply"),
    path("sessions/<oid:session_id>/status/", conversations.conversation_status, name="session-status"),
    path("desk/", desk.desk, name="desk"),
    path("desk/tickets/<oid:ticket_id>/", desk.ticket_update, name="ticket-update"),
    path("desk/handoffs/<oid:handoff_id>/", desk.handoff_update, name="handoff-update"),
    path("desk/approvals/<oid:run_id>/", desk.approval_decide, name="approval-decide"),
    path("egress/", settings.egress, name="egress"),
    # Settings.
    path("settings/", api_keys.settings_home, name="settings"),
    path("settings/api-keys/", api_keys.api_keys, name="api-keys"),
    path("settings/api-keys/<oid:key_id>/revoke/", api_keys.api_key_revoke, name="api-key-revoke"),
    path("settings/api-keys/<oid:key_id>/origins/", api_keys.api_key_origins, name="api-key-origins"),
    path("settings/request-limits/", api_keys.request_limits, name="request-limits"),
    path("settings/secrets/", settings.secret_list, name="secrets"),
    path("settings/secrets/<name:name>/delete/", settings.secret_delete, name="secret-delete"),
    path("settings/signing-secret/", settings.signing_secret, name="signing-secret"),
    re_path(  # linear: anchored literals and a fixed choice
        r"^settings/signing-secret/(?P<which>tool|end-user)/reveal/$",
        settings.signing_secret_reveal,
        name="signing-secret-reveal",
    ),
    re_path(  # linear: anchored literals and a fixed choice
        r"^settings/signing-secret/(?P<which>tool|end-user)/rotate/$",
        settings.signing_secret_rotate,
        name="signing-secret-rotate",
    ),
    path("settings/members/", settings.members, name="members"),
    path("settings/members/<int:membership_id>/remove/", settings.member_remove, name="member-remove"),
    path(
        "settings/members/invitations/<oid:invitation_id>/resend/", settings.invitation_resend, name="invitation-resend"
    ),
    path(
        "settings/members/invitations/<oid:invitation_id>/revoke/", settings.invitation_revoke, name="invitation-revoke"
    ),
    path("settings/webhooks/", webhooks.webhook_list, name="webhooks"),
    path("settings/webhooks/<oid:endpoint_id>/", webhooks.webhook_detail, name="webhook"),
    path("settings/webhooks/<oid:endpoint_id>/rotate/", webhooks.webhook_rotate, name="webhook-rotate"),
    path("settings/webhooks/<oid:endpoint_id>/enabled/", webhooks.webhook_enabled, name="webhook-enabled"),
    path("settings/webhooks/<oid:endpoint_id>/delete/", webhooks.webhook_delete, name="webhook-delete"),
    path(
        "settings/webhooks/<oid:endpoint_id>/test/",
        webhooks.webhook_test,
        name="webhook-test",
    ),
    path(
        "settings/webhooks/<oid:endpoint_id>/deliveries/<oid:delivery_id>/redeliver/",
        webhooks.webhook_redeliver,
        name="webhook-redeliver",
    ),
]
