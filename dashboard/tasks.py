"""Celery tasks: interfaces like API views. They take what they need and call a service."""

from __future__ import annotations

from smtplib import SMTPException

from celery import shared_task

from dashboard.forms import RESET_MAIL_TASK, password_reset_mail


# A mail server out of reach a moment: tried again, up to five times over about half an hour.
@shared_task(
    name=RESET_MAIL_TASK,
    autoretry_for=(SMTPException, OSError),
    retry_backoff=60,
    retry_backoff_max=900,
    max_retries=5,
    time_limit=60,
    ignore_result=True,
)
def password_reset_mail_task(email: str, base_url: str) -> int:
    return password_reset_mail(email, base_url)
