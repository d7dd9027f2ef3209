#!/usr/bin/env bash
# Run by .ci/run: the oldest and the newest Python on this machine that pyproject.toml's
# requires-python admits, one line each, "VERSION PATH" (one line when there is only one).
# Looked for: python3.N on PATH (pyenv's shims skipped: they run whichever version pyenv has
# selected, not the one they are named after) and each of pyenv's versions
# ($PYENV_ROOT/versions/*/bin/python3). An interpreter that cannot make a virtualenv with pip
# (Debian's without python3-venv) is passed over, and said so.
set -euo pipefail
cd "$(dirname "$0")/.."

floor=$(sed -n 's/^requires-python = ">=\([0-9.]*\)"$/\1/p' pyproject.toml)
if [ -z "$floor" ]; then
    echo "ci: no requires-python = \">=X.Y\" in pyproject.toml" >&2
    exit 1
fi

candidates=()
IFS=: read -r -a path_dirs <<<"$PATH"
for dir in "${path_dirs[@]}"; do
    case "$dir" in */shims) continue ;; esac
    for py in "$dir"/python3.[0-9] "$dir"/python3.[0-9][0-9]; do
        [ -x "$py" ] && candidates+=("$py")
    done
done
for py in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/*/bin/python3; do
    [ -x "$py" ] && candidates+=("$py")
done

found=$(
    for py in "${candidates[@]}"; do
        # The version, if this interpreter is a CPython at or above the floor with venv and pip.
        version=$("$py" - "$floor" 2>/dev/null <<'EOF' || true
import sys
floor = tuple(int(part) for part in sys.argv[1].split("."))
if sys.implementation.name == "cpython" and sys.version_info[: len(floor)] >= floor:
    import ensurepip, venv  # noqa: F401  (Debian splits them out: python3-venv)
    print("%d.%d.%d" % sys.version_info[:3])
EOF
        )
        if [ -n "$version" ]; then
            echo "$version $(readlink -f "$py")"
        elif "$py" -c "import sys; sys.exit(sys.version_info < (${floor/./, }))" 2>/dev/null; then
            echo "ci: $py cannot make a virtualenv (no venv or ensurepip): passed over" >&2
        fi
    done | sort -u -k2,2 | sort -V -k1,1
)
if [ -z "$found" ]; then
    echo "ci: no Python $floor or newer found" >&2
    exit 1
fi
oldest=$(head -n 1 <<<"$found")
newest=$(tail -n 1 <<<"$found")
echo "$oldest"
if [ "${newest%% *}" != "${oldest%% *}" ]; then
    echo "$newest"
fi
