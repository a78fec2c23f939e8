#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (each Catch2 test case is a CTest test).
# The exit code is ctest's: non-zero if any test fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
exec ctest --test-dir build --output-on-failure -j2
