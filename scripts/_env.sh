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
  echo "grouplab: installing the project ($1) into $VENV: about 750 MB with PySpark (1 GB with the test tools), a few minutes the first time" >&2
  # A line per package as pip collects it, so a first install is not a silent minute; pip's whole
  # output goes to .venv/pip.log and is shown if it fails.
  _pip() {
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off "$@" 2>&1 \
        | tee "$VENV/pip.log" | { grep --line-buffered -E '^Collecting ' || true; } | sed -u 's/^Collecting /  collecting /' >&2; then
      echo "grouplab: pip install failed; the end of $VENV/pip.log:" >&2
      tail -n 30 "$VENV/pip.log" >&2
      exit 1
    fi
  }
  _pip --quiet --upgrade pip
  if [ "$1" = dev ]; then
    _pip -e "$ROOT[dev]"
  else
    _pip -e "$ROOT[all]"
  fi
  rm -f "$VENV"/.installed-*
  touch "$VENV/.installed-$HASH-$1"
  echo "grouplab: installed ($(du -sh "$VENV" | cut -f1) in $VENV)" >&2
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
