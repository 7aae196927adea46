# K-Agent for production: one image for web (gunicorn), the Celery worker and Celery beat (docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=kagent.settings \
    KAGENT_VAR_DIR=/app/var

WORKDIR /app

# Dependencies first (pinned in pyproject.toml), so a source change doesn't reinstall them.
# The project itself has `packages = []`: it runs from /app, not from site-packages.
COPY pyproject.toml README.md ./
RUN pip install .

COPY . .

# Static files at build time. Settings refuse to load without a secret and encryption keys when DEBUG is false:
# throwaway values, for this step only (not kept in the image's environment).
RUN SECRET_KEY=collectstatic-only \
    KAGENT_ENCRYPTION_KEYS=Y29sbGVjdHN0YXRpYy1vbmx5LW5vdC1hLXJlYWwta3k= \
    DEBUG=false \
    python manage.py collectstatic --no-input -v0 \
 && useradd --system --uid 10001 --home-dir /app kagent \
 && mkdir -p /app/var/beat \
 && chown -R kagent:kagent /app/var

USER kagent
EXPOSE 8000

# Migrations run when the web container starts (docker-compose.yml); worker and beat start after web is healthy.
CMD ["sh", "-c", "python manage.py migrate --no-input && exec gunicorn kagent.wsgi -c gunicorn.conf.py"]
