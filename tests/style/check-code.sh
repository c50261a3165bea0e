#!/bin/bash
# Banned functions, logging in library modules, and formatting of the C sources.
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$root"
bad=0
# Every C file of the tree, tracked or not (a new file is checked before its first commit).
mapfile -t sources < <(find manager guest-tools tests -name '*.[ch]' | sort)

# Unsafe or shell-spawning calls: GSubprocess and GLib string functions instead.
if grep -nE '\b(system|popen|sprintf|vsprintf|strcpy|strcat|gets|strtok|tmpnam)\s*\(' "${sources[@]}" |
    grep -v '^\s*//' ; then
    echo "banned function used (see ../shared/STYLE.md)"
    bad=1
fi

# Library modules return errors; only core, api, daemon and cli log.
for m in util conf policy store disk image archive evidence hypervisor net; do
    if grep -nE '\bg_(message|warning|info|critical|print|printerr)\s*\(' "manager/$m"/*.c; then
        echo "module '$m' logs: return a GError instead"
        bad=1
    fi
done

# A caller decides by error code, never by message text (STYLE.md, "Decisions, not messages"):
# manager/ code may not compare, search or cut an error's ->message. Tests may inspect messages.
mapfile -t manager_sources < <(printf '%s\n' "${sources[@]}" | grep '^manager/')
if grep -HnE '\b(strstr|g_str_has_prefix|g_str_has_suffix|strncmp|strcmp|g_strcmp0|memmove)\s*\([^;]*->message\b' \
    "${manager_sources[@]}"; then
    echo "message text inspected: give the decision its own CARREL_ERROR code (g_error_matches)"
    bad=1
fi

# Formatting per .clang-format.
if command -v clang-format >/dev/null; then
    format_log="$(mktemp --tmpdir carrel-clang-format.XXXXXX)"
    if ! clang-format --dry-run --Werror "${sources[@]}" 2>"$format_log"; then
        head -40 "$format_log"
        echo "run: clang-format -i <files>"
        bad=1
    fi
    rm -f "$format_log"
else
    echo "clang-format is missing (scripts/test installs it)"
    bad=1
fi
exit "$bad"
