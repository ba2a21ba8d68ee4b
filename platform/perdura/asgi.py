"""The web app (console, REST API, accounts) as an ASGI application: `perdura web` serves it with uvicorn,
and `perdura dev` on its web port. HTTP goes to Django; websockets are the console's live updates
(frontend/live/), with the session cookie read as pages read it."""

import os
import warnings

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "perdura.settings")
# The app serves its own few static files with Django's file responses, whose synchronous iterators
# Django reads chunk by chunk on a thread under ASGI; that works, and is not worth a warning per process.
warnings.filterwarnings("ignore", message="StreamingHttpResponse must consume synchronous iterators")
django_application = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402  (after Django is set up)
from channels.sessions import CookieMiddleware  # noqa: E402

from frontend.live.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {"http": django_application, "websocket": CookieMiddleware(URLRouter(websocket_urlpatterns))}
)
