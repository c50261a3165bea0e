#!/bin/bash
# Slow tier: build the `desktop` template (Xfce, firefox-esr; several minutes), boot it under
# TCG, and check the desktop an agent will see. Not part of CI's budget: run it with
#   meson test -C build --suite slow --print-errorlogs      (or ./scripts/test --slow)
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
trap 'finish; exit $?' EXIT

start_daemon || exit 1
check "template build desktop" carrel template build desktop
manifest="$(cat "$STATE_DIR"/templates/desktop/*/manifest.json)"
check "the manifest records the Debian packages with versions" json_true \
    '(.packages | length) > 100 and (.packages["firefox-esr"] | test("esr")) and (.packages["xfce4-session"] != null)' \
    "$manifest"
check "...the recipe hash and the image sha256" json_true \
    '(.recipe_hash | length) == 64 and (.sha256 | length) == 64 and .recipe.resolution == "1280x800"' \
    "$manifest"
start=$(date +%s)
json="$(carrel create --template desktop --name desk --vcpus 2 --memory 2048 --json)"
echo "create took $(($(date +%s) - start)) s"
id="$(jq -r .id <<<"$json")"
check_eq "the desktop session runs" "running" "$(jq -r .state <<<"$json")"
ready="$(carrel exec --timeout 180 "$id" -- /usr/local/bin/carrel-guest ready --timeout 150)"
check "carrel-guest says the desktop is ready" json_true '.ready == true' "$ready"
check_eq "the screen is 1280x800" "1280x800" \
    "$(jq -r '"\(.screen.width)x\(.screen.height)"' <<<"$ready")"
# create returns once the desktop is drawn (carrel-guest ready, then a settled screen).
shot="$E2E_DIR/desktop.png"
carrel screenshot "$id" -o "$shot" >/dev/null 2>&1
check "the desktop is visible right after create (screenshot not blank)" \
    /usr/bin/python3 "$(dirname "$0")/image-stats.py" "$shot"
check "the agent user is logged in" carrel exec "$id" -- pgrep -u agent -x xfce4-session
check "firefox-esr starts in the session" \
    carrel exec "$id" -- /usr/local/bin/carrel-guest launch -- firefox-esr about:blank
# Firefox takes a minute or more to map its first window under TCG.
found=""
for _ in $(seq 1 36); do
    windows="$(carrel exec "$id" -- /usr/local/bin/carrel-guest windows 2>/dev/null)"
    if json_true '[.windows[] | select(.class | test("firefox"; "i"))] | length >= 1' \
        "$windows"; then
        found=yes
        break
    fi
    sleep 5
done
check_eq "carrel-guest lists the firefox window" "yes" "$found"
carrel screenshot "$id" -o "$E2E_DIR/firefox.png" >/dev/null 2>&1
check "rm" carrel rm "$id"
exit 0
