"""Django's SQLite backend, with each distinct statement's placeholders converted once (`base.py`)."""
