#!/usr/bin/env bash
# Run by .ci/run in the background: Arize Phoenix, the OTLP receiver tests/test_phoenix.py
# exports to, in a virtualenv of its own (DIR, default .ci-phoenix) so that its many pins never
# constrain agentrunner's. The version is pinned: the test reads Phoenix's REST API. About a
# minute and 850 MB here (80 s with an empty pip cache).
set -euo pipefail
cd "$(dirname "$0")/.."

PHOENIX_VERSION=20.26.1
venv=${1:-.ci-phoenix}
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "arize-phoenix==$PHOENIX_VERSION"
test -x "$venv/bin/phoenix"
echo "ci: Arize Phoenix $PHOENIX_VERSION in $venv" >&2
