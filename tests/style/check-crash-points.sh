#!/bin/bash
# Every crash point the code reaches is listed in util-crash.c (the e2e crash matrix walks that
# list), and every listed point is reached somewhere: a point renamed on one side only would
# make the matrix test nothing, or refuse to arm.
set -euo pipefail
root="${1:?usage: check-crash-points.sh SOURCE_ROOT}"
cd "$root"

listed="$(sed -n '/^static const char \*const points\[\] = {/,/^};/p' manager/util/util-crash.c |
    grep -o '"[a-z]*\.[a-z]*"' | tr -d '"' | sort)"
used="$(grep -rhoE 'carrel_crash_(point|during)\("[a-z]+\.[a-z]+"' manager |
    grep -oE '"[a-z]+\.[a-z]+"' | tr -d '"' | sort -u)"
[ -n "$listed" ] || { echo "no crash points found in manager/util/util-crash.c"; exit 1; }
status=0
for p in $used; do
    grep -qx "$p" <<<"$listed" || { echo "crash point '$p' is reached but not listed"; status=1; }
done
for p in $listed; do
    grep -qx "$p" <<<"$used" || { echo "crash point '$p' is listed but never reached"; status=1; }
done
[ "$status" -eq 0 ] && echo "crash points: $(wc -l <<<"$listed") listed, all reached"
exit "$status"
