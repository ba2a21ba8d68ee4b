"""The web app (console, REST API, accounts) as an ASGI application: `perdura web` serves it with uvicorn,
and `perdura dev` on its web port. ASGI so the console's live updates (websockets) can join it later."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "perdura.settings")
application = get_asgi_application()
