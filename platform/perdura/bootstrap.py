"""How every `perdura` command starts Django: the one place that sets the settings module and sets up.

Two kinds of command start it. Servers and maintenance (`api`, `migrate`, `dev`, `visibility reindex`)
read the configuration as it is. Operator commands (`org`, `namespace`, `apikey`, `audit`, `export run`,
`shards`) also work against a `perdura dev` database (PERDURA_DATABASE_URL=sqlite:///F): its data folder,
where dev keeps the generated master key and export signing key, is the one beside F; and what they
change is audited as the operator's, by OS account and host.
"""

from __future__ import annotations

import getpass
import os
import socket
from pathlib import Path

SETTINGS_MODULE = "perdura.settings"

_ready = False


def dev_data_dir_beside_database() -> None:
    """Against a SQLite database, take its folder as the data folder of `perdura dev` (PERDURA_DEV on).

    Needs no Django: `perdura export key` reads the signing key kept there without a database.
    """
    from perdura import env

    url = env.database_url()
    if url.startswith("sqlite:///"):
        os.environ["PERDURA_DEV"] = "1"
        os.environ.setdefault("PERDURA_DATA_DIR", str(Path(url.removeprefix("sqlite:///")).resolve().parent))


def setup(*, operator: bool = False) -> None:
    """Set up Django for this process, once.

    Args:
        operator: an operator command: the data folder of a dev database is the one beside it, and the
            changes the command makes are recorded in the audit log as the operator's.
    """
    global _ready
    if operator:
        dev_data_dir_beside_database()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", SETTINGS_MODULE)
    if not _ready:
        import django

        django.setup()
        _ready = True
    if operator:
        from tenants import audit

        audit.bind(
            audit.AuditContext(
                actor=audit.operator_actor("cli", getpass.getuser()), source=socket.gethostname(), via="cli"
            )
        )
