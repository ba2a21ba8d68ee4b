"""The web app (console, REST API, accounts) as a WSGI application, for WSGI hosts; `perdura web` serves the ASGI one (perdura.asgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "perdura.settings")
application = get_wsgi_application()
