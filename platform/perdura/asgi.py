"""The web app (console, REST API, accounts) as an ASGI application: `perdura web` serves it with uvicorn,
and `perdura dev` on its web port. ASGI so the console's live updates (websockets) can join it later."""

import os
import warnings

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "perdura.settings")
# The app serves its own few static files with Django's file responses, whose synchronous iterators
# Django reads chunk by chunk on a thread under ASGI; that works, and is not worth a warning per process.
warnings.filterwarnings("ignore", message="StreamingHttpResponse must consume synchronous iterators")
application = get_asgi_application()
