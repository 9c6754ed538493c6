# Sourced by scripts/demo, scripts/test and scripts/bench: make sure .venv exists and holds this project.
# Idempotent and quick when already set up: reinstalls only when pyproject.toml changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

pick_python() {
  for c in python3.11 python3 python; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$c"; return 0
    fi
  done
  echo "Atoll needs Python >= 3.11 (python3.11 not found)" >&2
  return 1
}

VENV="$ROOT/.venv"
PY="$VENV/bin/python"
if [ ! -x "$PY" ]; then
  echo "[setup] creating $VENV" >&2
  "$(pick_python)" -m venv "$VENV"
fi

STAMP="$VENV/.atoll-installed"
WANT="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "[setup] installing atoll and its dependencies into $VENV (first run takes a few minutes)" >&2
  "$PY" -m pip install --quiet --upgrade pip >&2
  "$PY" -m pip install --quiet -e "$ROOT[dev]" >&2
  echo "$WANT" > "$STAMP"
fi

export PYSPARK_PYTHON="$PY"
export PYSPARK_DRIVER_PYTHON="$PY"
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"
