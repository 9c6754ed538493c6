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
  # pip's own output goes to a log, shown only when pip fails
  LOG="$VENV/pip-install.log"
  echo "[setup] installing atoll and its dependencies into .venv (first run, ~2 min; pip's log: .venv/pip-install.log)" >&2
  if ! { "$PY" -m pip install --disable-pip-version-check --upgrade pip \
         && "$PY" -m pip install --disable-pip-version-check -e "$ROOT[dev]"; } >"$LOG" 2>&1; then
    cat "$LOG" >&2
    echo "[setup] pip failed (its log is above and in $LOG)" >&2
    exit 1
  fi
  echo "$WANT" > "$STAMP"
fi

# the console's browser test drives Debian's chromium through chromedriver: install them when missing and we may
if ! command -v chromedriver >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[setup] installing chromium and chromium-driver with apt-get (for the console's browser test)" >&2
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } \
       >"$VENV/apt-install.log" 2>&1; then
    echo "[setup] apt-get failed (its log: $VENV/apt-install.log); the console's browser test will fail" >&2
  fi
fi

# Ray starts a fresh Python process per worker: with bytecode writing off (PYTHONDONTWRITEBYTECODE, set in some
# environments) each one would compile Atoll's ~200 modules from source (~0.3 s per worker). Compile them once
# here; compileall rewrites only what changed, so this is quick when set up.
"$PY" -m compileall -q "$ROOT/atoll" >/dev/null || echo "[setup] compileall failed; Ray workers will compile from source" >&2

export PYSPARK_PYTHON="$PY"
export PYSPARK_DRIVER_PYTHON="$PY"
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"
