from django.urls import path

from conversations import apis

urlpatterns = [
    path("sessions", apis.SessionListCreateApi.as_view()),
    path("sessions/<oid:session_id>", apis.SessionDetailApi.as_view()),
    path("sessions/<oid:session_id>/messages", apis.SessionMessagesApi.as_view()),
    path("sessions/<oid:session_id>/events", apis.SessionEventsApi.as_view()),
]
