#!/bin/bash
# Fails when a manager module includes a module the table in manager/README.md does not allow.
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
table="$(sed -n '/<!-- deps:begin -->/,/<!-- deps:end -->/p' "$root/manager/README.md" |
    grep -E '^\| [a-z]+ \|' | grep -v '^| module')"
bad=0
checked=0
while IFS='|' read -r _ module allowed _; do
    module="$(echo "$module" | xargs)"
    allowed="$(echo "$allowed" | xargs)"
    [ -d "$root/manager/$module" ] || { echo "table names missing module '$module'"; bad=1; continue; }
    while IFS=: read -r file _ include; do
        target="$(sed -E 's/.*#include "([a-z]+)\/.*/\1/' <<<"$include")"
        [ "$target" = "$module" ] && continue
        if ! grep -qw -- "$target" <<<"$allowed"; then
            echo "$file: module '$module' may not include '$target' (manager/README.md)"
            bad=1
        fi
        checked=$((checked + 1))
    done < <(grep -HnE '^#include "[a-z]+/' "$root/manager/$module"/*.[ch] || true)
done <<<"$table"
for dir in "$root"/manager/*/; do
    m="$(basename "$dir")"
    grep -qE "^\| $m \|" <<<"$table" || { echo "module '$m' is missing from the table"; bad=1; }
done
echo "checked $checked cross-module includes"
exit "$bad"
