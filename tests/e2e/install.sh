# e2e: an installed carrel builds `tiny` from its installed recipe and boots it. `meson install
# --destdir` of this build, then the destdir's carreld (its own state, socket and image cache,
# pointed at the destdir's data and libexec folders) builds the template with the installed
# recipe library and carrel-guest, and a cold session of it runs with its agent answering.
# The install test of the integration tier checks the file list, the man pages and the console;
# this part is what needs a real build and a real VM.
# Needs lib.sh (carrel, check, check_eq, json_true, remove_domains, E2E_DIR, CARREL_BUILD). Run by
# test-install.sh.
# shellcheck shell=bash
# The checks hand values to `bash -c '...' _ ARGS`: expanded there, on purpose.
# shellcheck disable=SC2016

install_checks() {
    local dest="$E2E_DIR/installed" prefix state="$E2E_DIR/installed-state" log pid sock id out
    prefix="$(meson introspect "$CARREL_BUILD" --buildoptions | jq -r '.[] | select(.name == "prefix") | .value')"
    log="$E2E_DIR/installed-carreld.log"
    sock="$E2E_DIR/installed.sock"
    check "meson install --destdir" meson install -C "$CARREL_BUILD" --no-rebuild --quiet \
        --destdir "$dest"
    mkdir -p "$state" "$E2E_DIR/installed-cache"
    "$dest$prefix/sbin/carreld" --state-dir "$state" --socket "$sock" \
        --accel "${E2E_ACCEL:-auto}" --data-dir "$dest$prefix/share/carrel" \
        --libexec-dir "$dest$prefix/libexec/carrel" --cache-dir "$E2E_DIR/installed-cache" \
        >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 300); do
        CARREL_SOCKET="$sock" CARREL_STATE_DIR="$state" carrel version >/dev/null 2>&1 && break
        sleep 0.1
    done
    check "the installed carreld names the installed recipes and carrel-guest" bash -c \
        'grep -q "$2/share/carrel/templates" "$1" && grep -q "$2/libexec/carrel/carrel-guest" "$1"' \
        _ "$log" "$dest$prefix"
    check "the installed carreld builds tiny from the installed recipe" env \
        CARREL_SOCKET="$sock" CARREL_STATE_DIR="$state" "$CARREL_BIN" template build tiny
    out="$(cat "$state"/templates/tiny/*/manifest.json 2>/dev/null)"
    check "...its manifest has the recipe hash and image sha256" json_true \
        '(.recipe_hash | length) == 64 and (.sha256 | length) == 64' "$out"
    id="$(CARREL_SOCKET="$sock" CARREL_STATE_DIR="$state" carrel create tiny --cold --json |
        jq -r .id)"
    check_eq "a cold session of it runs" "running" "$(CARREL_SOCKET="$sock" \
        CARREL_STATE_DIR="$state" carrel show "$id" --json | jq -r .state)"
    check "...with the installed carrel-guest answering in the guest" env CARREL_SOCKET="$sock" \
        CARREL_STATE_DIR="$state" "$CARREL_BIN" exec --timeout 90 "$id" -- /usr/local/bin/carrel-guest ready \
        --timeout 60
    check "...and it goes" env CARREL_SOCKET="$sock" CARREL_STATE_DIR="$state" "$CARREL_BIN" rm "$id"
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    # What a failed check above left running (finish only knows this run's main state).
    remove_domains "$state"
}
