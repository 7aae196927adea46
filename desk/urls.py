from django.urls import path

from desk import apis

urlpatterns = [
    path("tickets", apis.TicketListApi.as_view()),
    path("tickets/<oid:ticket_id>", apis.TicketDetailApi.as_view()),
    path("handoffs", apis.HandoffListApi.as_view()),
    path("handoffs/<oid:handoff_id>", apis.HandoffDetailApi.as_view()),
]
