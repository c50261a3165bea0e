# Task inputs and artifacts (issue 5) on real guests: inputs before boot (cold, libguestfs) and
# after a restore (warm, through the agent); extraction from a running guest (agent) and from
# disks (stopped, crashed); guest-made links come out inert; the exit path on stop, crash and
# destroy; the diff against the template; limits.
# shellcheck shell=bash

# stat lines "name owner mode type" of paths in a session.
guest_stat() {
    local id="$1"
    shift
    carrel exec "$id" -- stat -c '%n %U %a %F' "$@" 2>/dev/null
}

# The input tree: modes, a nested script, a relative link.
make_inputs() {
    local in="$1"
    mkdir -p "$in/task/sub"
    echo "task one" >"$in/task/readme.txt"
    chmod 0640 "$in/task/readme.txt"
    printf '#!/bin/sh\necho ran\n' >"$in/task/sub/run.sh"
    chmod 0755 "$in/task/sub/run.sh"
    ln -s readme.txt "$in/task/link"
}

inputs_checks() {
    local id="$1" what="$2" listing
    listing="$(guest_stat "$id" /home/user/task/readme.txt /home/user/task/sub/run.sh \
        /home/user/task/link /home/user/task)"
    check_eq "$what: inputs are owned by the desktop user, modes kept" \
        "/home/user/task/readme.txt user 640 regular file
/home/user/task/sub/run.sh user 755 regular file
/home/user/task/link user 777 symbolic link
/home/user/task user 755 directory" "$listing"
    check_eq "$what: an input script runs" "ran" \
        "$(carrel exec "$id" -- /home/user/task/sub/run.sh 2>/dev/null)"
}

# Outputs written in the guest: files, a folder, links a hostile guest could make, a FIFO.
write_outputs() {
    carrel exec "$1" -- sh -c '
        set -e
        mkdir -p /home/user/out/sub
        echo result > /home/user/out/result.txt
        head -c 1500000 /dev/urandom > /home/user/out/sub/blob.bin
        ln -s /etc/shadow /home/user/out/shadow
        ln -s ../../.. /home/user/out/up
        mkfifo /home/user/out/fifo
        chown -R user:user /home/user/out
        echo more >> /home/user/.bashrc
        rm /home/user/.profile
        sync
        cd /home/user/out && sha256sum result.txt sub/blob.bin' 2>/dev/null
}

# sha256sum lines of the two output files as found under DIR.
host_sums() {
    (cd "$1/home/user/out" 2>/dev/null && sha256sum result.txt sub/blob.bin)
}

inert_checks() {
    local dir="$1" what="$2"
    check_eq "$what: no link, FIFO or device is created under DIR" "" \
        "$(find "$dir" -type l -o -type p -o -type b -o -type c)"
    check "$what: the links are recorded with their targets" json_true \
        '[.artifacts[] | select(.type == "symlink") | .link_target] | sort == ["../../..", "/etc/shadow"]' \
        "$(cat "$dir/.carrel-manifest.json")"
    check "$what: the FIFO is recorded, not created" json_true \
        '[.artifacts[] | select(.guest_path == "/home/user/out/fifo") | .skipped != null] == [true]' \
        "$(cat "$dir/.carrel-manifest.json")"
}

# Waits until a session's state is $2 (up to 90 s: the watcher, then the exit path's appliance).
wait_state() {
    for _ in $(seq 1 90); do
        [ "$(carrel show "$1" --json 2>/dev/null | jq -r .state)" = "$2" ] && return 0
        sleep 1
    done
    return 1
}

# The extraction of a session with the given reason (JSON), once the exit path stored it.
extraction_for() {
    carrel artifacts "$1" --json 2>/dev/null | jq -c --arg r "$2" '[.extractions[] | select(.reason == $r)] | last'
}

# Waits (up to 90 s: the watcher, then an appliance) for the extraction of a session with the
# given reason and prints it.
wait_extraction() {
    local x
    for _ in $(seq 1 90); do
        x="$(extraction_for "$1" "$2")"
        [ "$x" != null ] && [ -n "$x" ] && break
        sleep 1
    done
    echo "$x"
}

# The sha256 of an artifact of an extraction, downloaded by id.
download_sum() {
    local aid
    aid="$(jq -r --arg p "$2" '.artifacts[] | select(.guest_path == $p) | .id' <<<"$1")"
    [ -n "$aid" ] && carrel artifact "$aid" -o - 2>/dev/null | sha256sum | cut -d' ' -f1
}

artifacts_checks() {
    local dir="$E2E_DIR/artifacts" cold warm sums x diff outside
    mkdir -p "$dir"
    make_inputs "$dir/in"
    outside="$dir/outside-sentinel"
    echo untouched >"$outside"

    # Inputs: written into the disk with libguestfs before a cold boot...
    cold="$(carrel create --template tiny --name art-cold --cold \
        --input "$dir/in/task:/home/user/task" --artifact /home/user/out --json 2>/dev/null | jq -r .id)"
    check "cold create with inputs and exit artifacts" test -n "$cold" -a "$cold" != null
    inputs_checks "$cold" "cold"
    # ...and copied in by the restored guest itself (its disk must not change under it).
    warm="$(carrel create --template tiny --name art-warm --artifact /home/user/task \
        --input "$dir/in/task:/home/user/task" --json 2>/dev/null | jq -r .id)"
    inputs_checks "$warm" "warm"

    # A running guest: through its agent.
    sums="$(write_outputs "$cold")"
    check "outputs written in the guest" test -n "$sums"
    carrel extract "$cold" /home/user/out /home/user/missing -o "$dir/run" --json >"$dir/run.json" 2>/dev/null
    check_eq "running extraction goes through the agent" "agent" "$(jq -r .source "$dir/run.json")"
    check_eq "running extraction: sha256 equal" "$sums" "$(host_sums "$dir/run")"
    check "a missing path is reported, the rest still comes" json_true \
        '.missing[0].path == "/home/user/missing" and .count >= 5' "$(cat "$dir/run.json")"
    inert_checks "$dir/run" "running"
    check_eq "nothing outside DIR was touched" "untouched" "$(cat "$outside")"

    # Limits: stop early with a clear error, keep what came.
    x="$(carrel extract "$cold" /home/user/out --max-files 2 -o "$dir/lim" --json 2>/dev/null)"
    check "the entry limit stops an extraction with a clear error" json_true \
        '(.error | test("limit")) and .count <= 2' "$x"
    x="$(carrel extract "$cold" /home/user/out/sub --max-mib 1 -o "$dir/lim2" --json 2>/dev/null)"
    check "the byte limit stops an extraction with a clear error" json_true \
        '(.error | test("limit")) and .bytes <= 1048576' "$x"
    check "a relative path is refused" bash -c "! $CARREL_BIN extract $cold home/user -o $dir/bad"
    check "'..' in a path is refused" bash -c "! $CARREL_BIN extract $cold /home/../etc -o $dir/bad"

    # The diff against the template: exactly what the test created, changed and removed.
    diff="$(carrel diff "$cold" --path /home/user --json 2>/dev/null)"
    check_eq "diff: the files added" \
        "/home/user/out /home/user/out/fifo /home/user/out/result.txt /home/user/out/shadow /home/user/out/sub /home/user/out/sub/blob.bin /home/user/out/up /home/user/task /home/user/task/link /home/user/task/readme.txt /home/user/task/sub /home/user/task/sub/run.sh" \
        "$(jq -r '[.added[].path | select(startswith("/home/user/.") | not)] | join(" ")' <<<"$diff")"
    # The template's own files in /home/user are .bash_logout, .bashrc and .profile; the desktop
    # adds dot-folders of its own (.dbus...), which are left out of "added" above.
    check_eq "diff: the file changed, with its new hash" "/home/user/.bashrc true" \
        "$(jq -r '[.changed[] | select(.path | test("^/home/user/[.](bashrc|profile|bash_logout)$"))
            | "\(.path) \(.sha256 | length == 64)"] | join(" ")' <<<"$diff")"
    check_eq "diff: the file removed, and nothing else" "/home/user/.profile" \
        "$(jq -r '[.removed[].path] | join(" ")' <<<"$diff")"

    # Stop: the exit path collects from the disk, once the guest is off.
    carrel stop "$cold" >/dev/null 2>&1
    x="$(extraction_for "$cold" stop)"
    check_eq "stop collected the exit artifacts from the disk" "disk" "$(jq -r .source <<<"$x")"
    check_eq "stop collection: sha256 equal" \
        "$(grep result.txt <<<"$sums" | cut -d' ' -f1)" "$(download_sum "$x" /home/user/out/result.txt)"

    # SIGKILL QEMU: the session shows crashed and the exit path still yields the files.
    carrel start "$cold" >/dev/null 2>&1
    carrel exec "$cold" -- sh -c 'echo after-restart > /home/user/out/late.txt; sync' >/dev/null 2>&1
    pkill -KILL -f "guest=carrel-$cold" || true
    check "a SIGKILLed QEMU shows as crashed" wait_state "$cold" crashed
    x="$(wait_extraction "$cold" crash)"
    check_eq "the crash collected the exit artifacts" "after-restart" \
        "$(carrel artifact "$(jq -r '.artifacts[] | select(.guest_path == "/home/user/out/late.txt") | .id' <<<"$x")" -o - 2>/dev/null)"
    carrel extract "$cold" /home/user/out -o "$dir/crashed" --json >"$dir/crashed.json" 2>/dev/null
    check_eq "extraction from a crashed session's disk: sha256 equal" "$sums" "$(host_sums "$dir/crashed")"
    inert_checks "$dir/crashed" "crashed"

    # Destroy collects before deleting anything.
    carrel rm "$cold" >/dev/null 2>&1
    check "destroy collected the exit artifacts first" json_true '.count >= 5' \
        "$(extraction_for "$cold" destroy)"

    # QEMU dies while carreld is down: the next carreld finds it crashed and still collects.
    kill -KILL "$DAEMON_PID"
    wait "$DAEMON_PID" 2>/dev/null || true
    pkill -KILL -f "guest=carrel-$warm" || true
    start_daemon
    check "found crashed by the next carreld" wait_state "$warm" crashed
    x="$(wait_extraction "$warm" crash)"
    check_eq "its exit artifacts were collected after the restart" "task one" \
        "$(carrel artifact "$(jq -r '.artifacts[] | select(.guest_path == "/home/user/task/readme.txt") | .id' <<<"$x")" -o - 2>/dev/null)"
    carrel rm "$warm" >/dev/null 2>&1
}
