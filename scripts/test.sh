#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (each Catch2 test case is a CTest test),
# then the report and the attention explorer in headless chromium (scripts/test-browser.sh,
# about 35 s), then the unit tests under AddressSanitizer and UndefinedBehaviorSanitizer
# (scripts/test-sanitize.sh), then the Slurm export on a real, private one-node Slurm cluster
# (scripts/test-slurm.sh, which installs Debian's slurmctld, slurmd and munge and needs root).
# Non-zero if anything fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
ctest --test-dir build --output-on-failure -j2
bash scripts/test-browser.sh    # the web pages in a real browser (build/browser-test/)
bash scripts/test-sanitize.sh   # the unit tests again under ASan and UBSan (build-sanitize/)
exec bash scripts/test-slurm.sh
