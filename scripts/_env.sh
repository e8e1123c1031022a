# Sourced by scripts/demo and scripts/test: create .venv once and keep it in step with pyproject.toml.
# $1 is "run" (the project with every extra: README's demo installs everything) or "dev" (the project plus test tools); a dev install serves both.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
VENV="$ROOT/.venv"
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "grouplab needs Python 3.11 or newer ($PY is $("$PY" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "grouplab: creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
HASH="$(sha1sum "$ROOT/pyproject.toml" | cut -c1-12)"
if [ ! -f "$VENV/.installed-$HASH-dev" ] && [ ! -f "$VENV/.installed-$HASH-$1" ]; then
  echo "grouplab: installing the project ($1) into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
  if [ "$1" = dev ]; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT[dev]" >&2
  else
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT[all]" >&2
  fi
  rm -f "$VENV"/.installed-*
  touch "$VENV/.installed-$HASH-$1"
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
