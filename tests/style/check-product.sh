#!/bin/bash
# Test code stays out of the product (STYLE.md: test doubles link only into tests): no symbol of
# the built programs and libraries given as arguments (carreld, carrel, the module libraries) may
# name a fake.
set -euo pipefail
[ "$#" -gt 0 ] || { echo "usage: $0 BINARY_OR_LIBRARY..."; exit 2; }
command -v nm >/dev/null || { echo "nm is missing (binutils)"; exit 1; }
bad=0
for file in "$@"; do
    if nm "$file" 2>/dev/null | grep -i fake; then
        echo "$file: test code in the product: move it under tests/"
        bad=1
    fi
done
[ "$bad" = 0 ] && echo "no test code in $# product files"
exit "$bad"
