# Sourced by scripts/run and scripts/test: create .venv once and install twinloop into it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
stamp=.venv/.twinloop-installed-$1
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q -e ".[$1]" 2>&1 | grep -v "^\s*$" || true
  touch "$stamp"
fi
export PATH="$root/.venv/bin:$PATH"
