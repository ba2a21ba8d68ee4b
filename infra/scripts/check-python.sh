#!/usr/bin/env bash
# Fail early, with a clear message, when the Python given to make is older than 3.11 or lacks venv.
set -euo pipefail
py="${1:-python3}"
if ! command -v "$py" >/dev/null 2>&1; then
  echo "Perdura needs Python 3.11 or newer: '$py' was not found (on Debian/Ubuntu: apt-get install python3 python3-venv)." >&2
  exit 1
fi
if ! "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "Perdura needs Python 3.11 or newer; '$py' is $("$py" -V 2>&1). Run: make PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if ! "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "'$py' has no venv/ensurepip module (on Debian/Ubuntu: apt-get install python3-venv)." >&2
  exit 1
fi
