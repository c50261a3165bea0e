# The crash matrix: carreld killed at every crash point it lists (carreld --crash-points), as
# SIGKILL or a power cut would, then started again. After each: every disk layer passes
# `qemu-img check`; no orphan domain, overlay, save file, journal, extraction or intent is left;
# and the session that ran before runs after, its memory kept (a marker in tmpfs), or the
# operation's own outcome holds (a cut create leaves nothing). Prints the convergence figure.
# shellcheck shell=bash

CRASH_SESSION=""
CRASH_MARK=""
CRASH_PROBLEMS=""

crash_db() { sqlite3 -readonly "$STATE_DIR/state.db" "$@"; }

# Stops carreld as SIGTERM does (it drains its verbs first).
crash_stop_daemon() {
    [ -n "$DAEMON_PID" ] || return 0
    kill -TERM "$DAEMON_PID" 2>/dev/null || true
    wait "$DAEMON_PID" 2>/dev/null || true
    DAEMON_PID=""
}

# crash_problem TEXT: one reason this point did not converge.
crash_problem() { CRASH_PROBLEMS="$CRASH_PROBLEMS; $1"; }

# Every qcow2 under the sessions is whole. A running session is paused meanwhile: QEMU flushes
# its metadata when it pauses, and a top being written reads as damaged otherwise.
crash_check_layers() {
    local f id running
    running="$(crash_db "SELECT id FROM sessions WHERE state = 'running' AND pool IS NULL")"
    for id in $running; do carrel pause "$id" >/dev/null 2>&1; done
    while IFS= read -r f; do
        qemu-img check -U -q "$f" >/dev/null 2>&1 || crash_problem "layer $f fails qemu-img check"
    done < <(find "$STATE_DIR/sessions" -name '*.qcow2' 2>/dev/null)
    for id in $running; do carrel resume "$id" >/dev/null 2>&1; done
}

# No restore's FIFO folder of the killed carreld is left in run/ (the next one removes them at
# start). A pool's refill may be restoring meanwhile: a folder still there after 60 s is left.
crash_check_restore_folders() {
    local f left
    for _ in $(seq 1 60); do
        left=""
        for f in "$STATE_DIR"/run/restore-*; do [ -e "$f" ] && left="$left $f"; done
        [ -n "$left" ] || return 0
        sleep 1
    done
    crash_problem "a restore's FIFO folder is left:$left"
}

# Nothing is left that no row accounts for.
crash_check_orphans() {
    local dir id state f overlay dom
    [ "$(crash_db 'SELECT COUNT(*) FROM intents')" = 0 ] || crash_problem "an intent is left"
    [ -z "$(find "$STATE_DIR" -name '*.journal' 2>/dev/null)" ] || crash_problem "a header journal is left"
    [ -z "$(find "$STATE_DIR/templates" -maxdepth 3 -name warm.tmp 2>/dev/null)" ] ||
        crash_problem "a warm scratch folder is left"
    crash_check_restore_folders
    # A pool member being made (the refill, after the restart) is no leftover.
    [ "$(crash_db "SELECT COUNT(*) FROM sessions WHERE state = 'creating' AND pool IS NULL")" = 0 ] ||
        crash_problem "a session is left creating"
    for dir in "$STATE_DIR"/artifacts/x-*; do
        [ -d "$dir" ] || continue
        [ "$(crash_db "SELECT COUNT(*) FROM extractions WHERE id = '$(basename "$dir")'")" = 1 ] ||
            crash_problem "extraction folder $(basename "$dir") has no row"
    done
    for dir in "$STATE_DIR"/sessions/s-*; do
        [ -d "$dir" ] || continue
        id="$(basename "$dir")"
        state="$(crash_db "SELECT state FROM sessions WHERE id = '$id'")"
        [ "$state" = creating ] && [ -n "$(crash_db "SELECT pool FROM sessions WHERE id = '$id'")" ] &&
            continue
        case "$state" in
        running | paused | stopped | hibernated | crashed) ;;
        *) crash_problem "session folder $id is left (row: '${state:-none}')" ;;
        esac
        overlay="$(crash_db "SELECT overlay_path FROM sessions WHERE id = '$id'")"
        # A writable qcow2 is a session's top; any other is a top nothing uses.
        while IFS= read -r f; do
            [ "$f" = "$overlay" ] || [ ! -w "$f" ] || [ "$(stat -c %a "$f")" = 444 ] ||
                crash_problem "overlay $(basename "$f") of $id is used by nothing"
        done < <(find "$dir" -maxdepth 1 -name '*.qcow2')
        if [ -e "$dir/hibernate.save" ] && [ "$state" != hibernated ]; then
            crash_problem "hibernate.save of $id is left while it is $state"
        fi
        for f in "$dir"/snapshots/p-*; do
            [ -d "$f" ] || continue
            [ "$(crash_db "SELECT COUNT(*) FROM snapshots WHERE id = '$(basename "$f")'")" = 1 ] ||
                crash_problem "snapshot folder $(basename "$f") of $id has no row"
        done
        # A snapshot's RAM file (core-snapshot.c) is a snapshot's or mapped by a session.
        for f in "$dir"/*.ram; do
            [ -e "$f" ] || continue
            [ "$(crash_db "SELECT (SELECT COUNT(*) FROM snapshots WHERE memory_file = '$f')
                + (SELECT COUNT(*) FROM sessions WHERE memory_file = '$f')")" -gt 0 ] ||
                crash_problem "RAM file $(basename "$f") of $id is nobody's"
        done
    done
    while IFS= read -r dom; do
        id="${dom#carrel-}"
        state="$(crash_db "SELECT state FROM sessions WHERE id = '$id'")"
        [ -n "$state" ] || continue # another carrel's domain
        [ "$state" = creating ] && [ -n "$(crash_db "SELECT pool FROM sessions WHERE id = '$id'")" ] &&
            continue
        case "$state" in
        running | paused | stopped) ;;
        *) crash_problem "domain $dom is left while its session is $state" ;;
        esac
    done < <("${VIRSH[@]}" list --all --name 2>/dev/null | grep '^carrel-s-')
}

# The session that ran before runs after, with what it held in memory.
crash_check_runs() {
    local id="$1" state
    state="$(carrel show "$id" --json 2>/dev/null | jq -r .state)"
    if [ "$state" = hibernated ]; then
        carrel resume "$id" >/dev/null 2>&1 || crash_problem "resume after the crash failed"
        state="$(carrel show "$id" --json 2>/dev/null | jq -r .state)"
    fi
    [ "$state" = running ] || crash_problem "session is $state ($(carrel show "$id" --json 2>/dev/null | jq -r '.state_reason // ""'))"
    [ "$(carrel exec "$id" -- cat /dev/shm/carrel-crash-mark 2>/dev/null)" = "$CRASH_MARK" ] ||
        crash_problem "the memory marker is gone"
}

# A session id created for a point, by name (empty when none).
crash_id_of() { crash_db "SELECT id FROM sessions WHERE name = '$1' AND state != 'destroyed'"; }

# What a point's operation leaves (beyond the generic checks).
crash_check_outcome() {
    local point="$1" id
    case "$point" in
    create.* | fork.*)
        [ -z "$(crash_id_of "crash-new")" ] || crash_problem "the cut create's session is left"
        crash_check_runs "$CRASH_SESSION"
        ;;
    destroy.*)
        [ -z "$(crash_id_of "crash-doomed")" ] || crash_problem "the cut destroy left its session"
        # Its exit path ran exactly once: before the cut, or when carreld finished the destroy.
        [ "$(crash_db "SELECT count(*) FROM extractions WHERE reason = 'destroy' AND session_id = (SELECT id FROM sessions WHERE name = 'crash-doomed' ORDER BY created_at DESC, rowid DESC LIMIT 1)")" = 1 ] ||
            crash_problem "the cut destroy's exit artifacts were not collected exactly once"
        ;;
    pool.*)
        id="$(crash_id_of crash-pooled)"
        if [ -z "$id" ] || [ "$(carrel show "$id" --json 2>/dev/null | jq -r .state)" != running ]; then
            crash_problem "the claimed pool member does not run"
        fi
        ;;
    warm.*) ;;
    *) crash_check_runs "$CRASH_SESSION" ;;
    esac
}

# Readies what a point's operation acts on, with the normal daemon.
crash_prepare() {
    case "$1" in
    resume.*) carrel hibernate "$CRASH_SESSION" >/dev/null 2>&1 ;;
    destroy.*) carrel create --template tiny --name crash-doomed --artifact /etc/hostname >/dev/null 2>&1 ;;
    pool.*)
        carrel template pool tiny --size 1 >/dev/null 2>&1
        for _ in $(seq 1 150); do
            [ "$(carrel template pool --json 2>/dev/null | jq '[.pools[] | select(.template == "tiny") | .ready] | add // 0')" -ge 1 ] && break
            sleep 1
        done
        ;;
    esac
}

# The operation that reaches a point.
crash_operate() {
    case "$1" in
    create.*) carrel create --template tiny --name crash-new ;;
    warm.*) carrel template warm crashy ;;
    snapshot.*) carrel snapshot "$CRASH_SESSION" "cut-${1//./-}" ;;
    revert.*) carrel revert "$CRASH_SESSION" base ;;
    fork.*) carrel fork "$CRASH_SESSION" --snapshot base --count 1 ;;
    hibernate.*) carrel hibernate "$CRASH_SESSION" ;;
    resume.*) carrel resume "$CRASH_SESSION" ;;
    pool.*) carrel create --template tiny --name crash-pooled ;;
    extract.*) carrel extract "$CRASH_SESSION" /etc/hostname -o "$E2E_DIR/crash-out" ;;
    destroy.*) carrel rm crash-doomed ;;
    esac
}

# Puts the shared state back after a point (sessions it made, the pool).
crash_tidy() {
    case "$1" in
    pool.*)
        carrel template pool tiny --size 0 >/dev/null 2>&1
        carrel rm crash-pooled >/dev/null 2>&1
        ;;
    esac
    carrel rm crash-new crash-doomed >/dev/null 2>&1 || true
}

# crash_one POINT: 0 when reconcile converged from it.
crash_one() {
    local point="$1" op_pid rc start=$SECONDS
    CRASH_PROBLEMS=""
    crash_prepare "$point"
    crash_stop_daemon
    export CARREL_CRASH_AT="$point"
    start_daemon || return 1
    unset CARREL_CRASH_AT
    crash_operate "$point" >/dev/null 2>&1 &
    op_pid=$!
    for _ in $(seq 1 3000); do
        kill -0 "$DAEMON_PID" 2>/dev/null || break
        sleep 0.1
    done
    rc=0
    # A point the operation never reaches must fail here, not hang the matrix.
    if kill -0 "$DAEMON_PID" 2>/dev/null; then
        crash_problem "the operation never reached the point"
        kill -9 "$DAEMON_PID" 2>/dev/null
    fi
    wait "$DAEMON_PID" 2>/dev/null || rc=$?
    DAEMON_PID=""
    wait "$op_pid" 2>/dev/null || true
    [ "$rc" = 86 ] || crash_problem "carreld did not stop at the point (exit $rc)"
    start_daemon || return 1
    crash_check_layers
    crash_check_orphans
    crash_check_outcome "$point"
    crash_tidy "$point"
    echo "# crash point $point: $((SECONDS - start)) s"
    if [ -n "$CRASH_PROBLEMS" ]; then
        echo "# crash point $point: ${CRASH_PROBLEMS#; }"
        return 1
    fi
    return 0
}

# A template nobody warmed yet (tiny's disk and kernel under another name), for warm's points.
crash_import_unwarmed() {
    local t
    t="$(carrel template show tiny --json 2>/dev/null)"
    carrel template import crashy --disk "$(jq -r .disk <<<"$t")" --format "$(jq -r .format <<<"$t")" \
        --kernel "$(jq -r .kernel <<<"$t")" --initrd "$(jq -r .initrd <<<"$t")" \
        --cmdline "$(jq -r .cmdline <<<"$t")" >/dev/null 2>&1
}

crash_checks() {
    local points point converged=0 total=0 start=$SECONDS
    points="$("$CARRELD_BIN" --crash-points)"
    # Each restart would probe the accelerator again (15 s under TCG): keep carreld's first answer.
    E2E_ACCEL="$(carrel version --json 2>/dev/null | jq -r '.server.accel // "auto"')"
    export E2E_ACCEL
    check "carreld lists its crash points" test -n "$points"
    CRASH_SESSION="$(carrel create --template tiny --name crash-main --json 2>/dev/null | jq -r '.id // empty')"
    CRASH_MARK="mark-$RANDOM$RANDOM"
    carrel exec "$CRASH_SESSION" -- sh -c "echo $CRASH_MARK > /dev/shm/carrel-crash-mark" >/dev/null 2>&1
    check "a base snapshot for reverts and forks" carrel snapshot "$CRASH_SESSION" base
    check "an unwarmed template for warm's points" crash_import_unwarmed
    for point in $points; do
        total=$((total + 1))
        if crash_one "$point"; then converged=$((converged + 1)); fi
    done
    echo "# crash matrix: $converged of $total points converged ($((100 * converged / (total ? total : 1))) %) in $((SECONDS - start)) s"
    check_eq "reconcile converges from every crash point" "$total" "$converged"
    check "a warm after the cut warms was cut finishes" carrel template warm crashy
    check "SIGTERM waits for a running snapshot, which completes" crash_sigterm_drains
    carrel rm "$CRASH_SESSION" >/dev/null 2>&1
    carrel template rm crashy >/dev/null 2>&1
}

# SIGTERM in the middle of a snapshot: carreld finishes it before it exits.
crash_sigterm_drains() {
    local op_pid
    carrel snapshot "$CRASH_SESSION" drained >/dev/null 2>&1 &
    op_pid=$!
    sleep 1
    crash_stop_daemon
    wait "$op_pid" || return 1
    start_daemon || return 1
    carrel snapshots "$CRASH_SESSION" --json | jq -e '[.snapshots[] | select(.name == "drained")] | length == 1' >/dev/null &&
        [ "$(carrel show "$CRASH_SESSION" --json | jq -r .state)" = running ]
}

# libvirtd restarted while three sessions run: carreld reconnects, none is lost, each still
# holds its memory and runs commands, and a new create works.
libvirtd_restart_checks() {
    local ids=() id lost=0 pid
    for n in 1 2 3; do
        id="$(carrel create --template tiny --name "lv-$n" --json 2>/dev/null | jq -r '.id // empty')"
        ids+=("$id")
        carrel exec "$id" -- sh -c "echo lv-$n > /dev/shm/carrel-lv-mark" >/dev/null 2>&1
    done
    pid="$(pgrep -x libvirtd | head -1)"
    kill -TERM "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    # As scripts/test started it: under tini, which reaps the QEMUs that end after this.
    (
        # shellcheck source=scripts/lib/common.sh
        source "$E2E_SRC/scripts/lib/common.sh" && start_libvirtd_reaped
    )
    for _ in $(seq 1 100); do "${VIRSH[@]}" version >/dev/null 2>&1 && break; sleep 0.2; done
    # Two watcher rounds: a session judged lost would show by then.
    sleep 6
    for n in 1 2 3; do
        id="${ids[$((n - 1))]}"
        if [ "$(carrel show "$id" --json 2>/dev/null | jq -r .state)" != running ] ||
            [ "$(carrel exec "$id" -- cat /dev/shm/carrel-lv-mark 2>/dev/null)" != "lv-$n" ]; then
            lost=$((lost + 1))
        fi
    done
    check_eq "libvirtd restarted under 3 running sessions: none lost, memory kept" 0 "$lost"
    check "...and carreld creates after it" carrel create --template tiny --name lv-after
    carrel rm lv-1 lv-2 lv-3 lv-after >/dev/null 2>&1
}
