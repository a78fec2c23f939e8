#!/usr/bin/env bash
# `poslab bench` of two builds, alternated for a few rounds (a change in the machine's load then
# hits both), at the reference configuration or with extra `bench` options. Prints each round's
# tokens/s, ceiling and ratio. Measure on an idle machine.
#
#   bash bench/before_after.sh OLD_POSLAB NEW_POSLAB [ROUNDS] [bench options...]
#   bash bench/before_after.sh /tmp/old/build/poslab build/poslab 3 --set encoding.type=shaw
set -euo pipefail
old=${1:?usage: before_after.sh OLD_POSLAB NEW_POSLAB [ROUNDS] [bench options...]}
new=${2:?usage: before_after.sh OLD_POSLAB NEW_POSLAB [ROUNDS] [bench options...]}
rounds=${3:-3}
shift $(($# < 3 ? $# : 3))
echo "round,build,tokens_per_s,ceiling_gflops,ratio"
for ((r = 1; r <= rounds; r++)); do
  for which in old new; do
    bin=$old
    [[ $which == new ]] && bin=$new
    out=$("$bin" bench "$@")
    tokens=$(awk '/^training:/{print $2}' <<<"$out")
    ceiling=$(awk '/^ceiling:/{print $2}' <<<"$out")
    ratio=$(awk '/^ratio:/{print $2}' <<<"$out")
    echo "$r,$which,$tokens,$ceiling,$ratio"
  done
done
