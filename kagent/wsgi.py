"""The WSGI application (gunicorn: gunicorn.conf.py).

Every module a request can reach is imported when the server loads the application, not by the first request
each worker serves: importing the URLconf (the views, their serializers, the agent configuration's schema checks)
took about half a second of CPU, which the first request of every worker — after each start or restart — waited
through."""

import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kagent.settings")
application = get_wsgi_application()
get_resolver().url_patterns  # noqa: B018 - imports the URLconf and every module it includes
