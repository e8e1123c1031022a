# Sourced by scripts/demo and scripts/test: create .venv once and keep it in step with pyproject.toml.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python" ]; then
  echo "grouplab: creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.installed-$(sha1sum "$ROOT/pyproject.toml" | cut -c1-12)-$1"
if [ ! -f "$STAMP" ]; then
  echo "grouplab: installing the project ($1) into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
  if [ "$1" = dev ]; then
    "$VENV/bin/python" -m pip install --quiet -e "$ROOT[dev]" >&2
  else
    "$VENV/bin/python" -m pip install --quiet -e "$ROOT" >&2
  fi
  rm -f "$VENV"/.installed-*
  touch "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
