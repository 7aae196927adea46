from django.urls import path

from dashboard import views

app_name = "dashboard"

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", views.logout_view, name="logout"),
    path("projects/", views.project_picker, name="projects"),
    path("projects/<str:project_id>/select/", views.project_select, name="project-select"),
    path("agents/", views.agent_list, name="agents"),
    path("settings/", views.settings_home, name="settings"),
    path("settings/api-keys/", views.api_keys, name="api-keys"),
    path("settings/api-keys/<str:key_id>/revoke/", views.api_key_revoke, name="api-key-revoke"),
]
