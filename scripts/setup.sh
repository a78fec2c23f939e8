#!/usr/bin/env bash
# Installs what poslab needs (Debian 12 packages only) and builds it into build/ (Release).
#
# Idempotent and cheap when nothing is missing: each package is checked with dpkg-query, and
# apt-get (which needs the network) only runs if something is not installed. As root it installs
# the missing packages itself (this is what CI does on a fresh Debian 12); otherwise it prints
# the exact command to run with sudo and stops. Runs from any directory.
set -euo pipefail

# Work from the repository root, wherever the script is called from.
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(
  # Toolchain
  cmake g++ make
  # C++ libraries: tensors, BLAS, tests, config, command line, JSON output
  libxtensor-dev libxtensor-blas-dev xtl-dev libxsimd-dev libopenblas-dev
  catch2 libtomlplusplus-dev libcli11-dev nlohmann-json3-dev
  # The default corpus (/usr/share/games/fortunes)
  fortunes
  # The long-document corpus: Python's standard library sources in /usr/lib/python3.11
  # (experiments/python_corpus.toml); Debian 12 installs it with python3, listed to be explicit
  libpython3.11-stdlib
  # Notebooks that plot the results (run with /usr/bin/python3)
  python3-numpy python3-pandas python3-matplotlib
  jupyter-nbconvert python3-nbclient python3-ipykernel
  # The browser test of the report and the explorer (scripts/test-browser.sh): headless
  # chromium driven by selenium
  chromium chromium-driver python3-selenium
)

missing=()
for package in "${packages[@]}"; do
  # ${Status} is a dpkg-query field name, not a shell variable.
  # shellcheck disable=SC2016
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} > 0)); then
  echo "setup: missing Debian packages: ${missing[*]}"
  if [[ "$(id -u)" -eq 0 ]]; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  else
    echo "setup: not root; install them with:" >&2
    echo "  sudo apt-get update && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

# -march=native: the build the committed studies were made with (CMakeLists.txt, POSLAB_NATIVE).
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPOSLAB_NATIVE=ON
cmake --build build -j"$(nproc)"
