# Sourced by bin/run and bin/test: a virtual environment in .venv with the project's pinned dependencies.
# $1: the extras to install ("" or "test"). Reinstalls only when pyproject.toml changed.
kagent_venv() {
  local extras="$1" python="${PYTHON:-python3}"
  if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "K-Agent needs Python 3.11 or newer ($python is $("$python" --version 2>&1))." >&2
    return 1
  fi
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  local spec="." stamp=".venv/.kagent-installed"
  [ -n "$extras" ] && spec=".[$extras]" && stamp="$stamp-$extras"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check "$spec"
    touch "$stamp"
  fi
}
