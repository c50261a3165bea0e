#!/bin/bash
# Slow tier: build the `desktop` template (Xfce, firefox-esr; several minutes), boot it under
# TCG, and check the desktop an agent will see; Firefox opens a page of the stand-in internet
# (standin.sh) through the egress path, and OCR of the screenshot reads its text. Then the dock's
# launchers, xdg-open and a local page open their applications without asking anything
# (desktop-apps.sh). Not part of CI's budget: run it with
#   meson test -C build --suite slow --print-errorlogs      (or ./scripts/test --slow)
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/desktop-apps.sh
source "$(dirname "$0")/desktop-apps.sh"
trap 'finish; exit $?' EXIT

# The stand-in internet, and carreld with a policy that lets sessions reach allowed.test only.
mkdir -p "$E2E_DIR/standin" "$E2E_DIR/policies"
dns="$("$(dirname "$0")/standin.sh" up "$E2E_DIR/standin" | tail -1)"
check "the stand-in internet is up" test -n "$dns"
printf '%s\n' '[network]' 'mode=allowlist' 'allow=allowed.test' >"$E2E_DIR/policies/web.policy"
cp "$E2E_SRC/policies/default.policy" "$E2E_DIR/policies/"
start_daemon --policy-dir "$E2E_DIR/policies" --egress-dns "$dns" \
    --egress-ca "$E2E_DIR/standin/standin-ca.crt" || exit 1
check "template build desktop" carrel template build desktop
manifest="$(cat "$STATE_DIR"/templates/desktop/*/manifest.json)"
check "the manifest records the Debian packages with versions" json_true \
    '(.packages | length) > 100 and (.packages["firefox-esr"] | test("esr")) and (.packages["xfce4-session"] != null)' \
    "$manifest"
check "...the recipe hash and the image sha256" json_true \
    '(.recipe_hash | length) == 64 and (.sha256 | length) == 64 and .recipe.resolution == "1280x800"' \
    "$manifest"
check "...and the template's default size: 2 vCPUs, 2048 MiB" json_true \
    '.recipe.defaults == {"vcpus": 2, "memory_mib": 2048}' "$manifest"
start=$(date +%s)
json="$(carrel create --template desktop --name desk --vcpus 2 --memory 2048 --policy web --json)"
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
check_eq "it has an address on the egress network" "10.77." \
    "$(carrel show "$id" --json | jq -r '.address[0:6]')"
check "firefox-esr starts in the session on a page of allowed.test" \
    carrel exec "$id" -- /usr/local/bin/carrel-guest launch -- firefox-esr http://allowed.test/page
# Firefox takes a minute or more to map its first window under TCG; its title is the page's.
found=""
for _ in $(seq 1 48); do
    windows="$(carrel exec "$id" -- /usr/local/bin/carrel-guest windows 2>/dev/null)"
    if json_true '[.windows[] | select((.class | test("firefox"; "i")) and (.title | test("stand-in allowed.test")))] | length >= 1' \
        "$windows"; then
        found=yes
        break
    fi
    sleep 5
done
check_eq "carrel-guest lists the firefox window, titled by the page of allowed.test" "yes" "$found"
sleep 5
carrel screenshot "$id" -o "$E2E_DIR/firefox.png" >/dev/null 2>&1
text="$(tesseract "$E2E_DIR/firefox.png" - 2>/dev/null | tr -s ' \n' ' ')"
check "the screenshot shows the page's text (OCR: ${text:0:200})" \
    grep -q "allowed.test says hello" <<<"$text"
check "the stand-in web server served the page through the proxy" \
    grep -q '"path": "/page", "host": "allowed.test"' "$E2E_DIR/standin/web.log"
check "the egress log has allowed.test allowed" json_true \
    '[.egress[] | select(.name == "allowed.test" and .decision == "allowed")] | length >= 1' \
    "$(carrel egress "$id" --json)"
# The dock, xdg-open (a URL of allowed.test, then a local page): each application opens its
# window, and nothing asks first.
desktop_apps_checks "$id" http://allowed.test/page 'stand-in allowed.test'
check "rm" carrel rm "$id"
kill "$DAEMON_PID" 2>/dev/null
wait "$DAEMON_PID" 2>/dev/null
"$(dirname "$0")/standin.sh" down "$E2E_DIR/standin" >/dev/null
exit 0
