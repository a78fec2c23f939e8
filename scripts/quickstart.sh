#!/usr/bin/env bash
# Installs what is missing, builds, and trains the quickstart model (experiments/quickstart.toml).
# Extra arguments go to `poslab train`; they are read from the repository root, so give relative
# paths relative to it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
exec build/poslab train --config experiments/quickstart.toml "$@"
