from django.urls import path

from tools import apis

urlpatterns = [
    path("tools", apis.ToolListCreateApi.as_view()),
    path("tools/<name:name>", apis.ToolDetailApi.as_view()),
    path("tools/<name:name>/preview", apis.ToolPreviewApi.as_view()),
    path("tools/<name:name>/test", apis.ToolTestCallApi.as_view()),
    # A definition not yet saved (`/v1/tools/preview` would be the tool named "preview").
    path("tool_drafts/preview", apis.ToolDraftPreviewApi.as_view()),
    path("tool_drafts/test", apis.ToolDraftTestCallApi.as_view()),
    path("mcp_servers", apis.McpServerListCreateApi.as_view()),
    path("mcp_servers/<oid:server_id>", apis.McpServerDetailApi.as_view()),
    path("mcp_servers/<oid:server_id>/refresh", apis.McpServerRefreshApi.as_view()),
]
