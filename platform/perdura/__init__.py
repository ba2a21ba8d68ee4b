"""Perdura: the Django project package (settings, CLI, Celery app, dev server)."""
