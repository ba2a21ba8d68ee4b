"""The web app (REST API, accounts, console) as a WSGI application: `perdura web` serves it with gunicorn."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "perdura.settings")
application = get_wsgi_application()
