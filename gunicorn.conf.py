"""gunicorn's settings for the web service (Dockerfile, docker-compose.yml): threaded workers, so a request that
waits on a run (`wait`, an event stream served here) holds one thread of a process, never the process; at most
KAGENT_WAIT_THREADS threads per process wait at once (kagent/settings.py), the rest serve the API and dashboard."""

import os

bind = os.environ.get("KAGENT_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
worker_class = "gthread"
threads = int(os.environ.get("WEB_THREADS", "16"))
timeout = 60
accesslog = "-"
