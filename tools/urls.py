from django.urls import path

from tools import apis

urlpatterns = [
    path("tools", apis.ToolListCreateApi.as_view()),
    path("tools/<name:name>", apis.ToolDetailApi.as_view()),
]
