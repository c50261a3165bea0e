#!/bin/bash
# carrel-run (guest-tools/carrel-run.c) on the host, as qemu-ga runs it in a guest: the exit
# status passes through, PROGRAM leads its own process group, the deadline kills the whole
# group with SIGKILL, the watchdog neither outlives PROGRAM nor holds its output open, and
# 127/126/125 say what could not run.
# shellcheck disable=SC2016 # the single-quoted scripts are for the child shells
set -uo pipefail

run="$(realpath "${1:?usage: test-carrel-run.sh PATH-TO-carrel-run}")"
passed=0
failed=0
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

check_eq() {
	if [[ $2 == "$3" ]]; then
		passed=$((passed + 1))
		echo "ok - $1"
	else
		failed=$((failed + 1))
		echo "not ok - $1: expected '$2', got '$3'"
	fi
}

# A process group with no process left in it (the watchdog gone too), within 5 s.
group_empty() {
	local i
	for ((i = 0; i < 50; i++)); do
		pgrep -g "$1" >/dev/null || return 0
		sleep 0.1
	done
	return 1
}

check_eq "PROGRAM's exit status passes through" 3 "$("$run" 5 sh -c 'exit 3' >/dev/null; echo $?)"
check_eq "standard input and output pass through" "hello" "$(echo hello | "$run" 5 cat)"
check_eq "standard error passes through" "oops" "$("$run" 5 sh -c 'echo oops >&2' 2>&1 >/dev/null)"

# PROGRAM is carrel-run's own process (the pid qemu-ga watches) and leads a new group.
read -r pid pgid < <("$run" 5 sh -c 'echo "$$ $(ps -o pgid= -p $$)"')
check_eq "PROGRAM leads its own process group" "$pid" "$((pgid))"
check_eq "PROGRAM's group is not the caller's" "yes" "$([[ $pgid != "$(ps -o pgid= -p $$ | tr -d ' ')" ]] && echo yes)"
check_eq "the watchdog ends with PROGRAM" "yes" "$(group_empty "$pid" && echo yes)"

# The deadline: PROGRAM and what it started in the background are killed, by SIGKILL.
start=$SECONDS
"$run" 1 sh -c 'sleep 60 & echo $! >"$1"; sleep 60' sh "$work/bg.pid"
status=$?
check_eq "the deadline kills PROGRAM with SIGKILL (128 + 9)" 137 "$status"
check_eq "...at the deadline, not at PROGRAM's end" "yes" "$( ((SECONDS - start < 30)) && echo yes)"
# Killed: gone, or a zombie until whoever adopted it reaps it.
bg="$(cat "$work/bg.pid")"
sleep 0.2
bg_state="$(awk '{print $3}' "/proc/$bg/stat" 2>/dev/null)"
check_eq "...and what it started in its group" "dead" "$([[ -z $bg_state || $bg_state == Z ]] && echo dead)"

# Output ends when PROGRAM does: the watchdog holds none of its pipes (qemu-ga reads to EOF).
out="$(timeout 20 bash -c '"$1" 60 echo done | cat' _ "$run")"
check_eq "the output pipe closes when PROGRAM ends, long before the deadline" "done" "$out"

printf '#!/bin/sh\n' >"$work/not-executable"
check_eq "a program that does not exist: 127" 127 "$("$run" 5 /nonexistent/program 2>/dev/null; echo $?)"
check_eq "...with carrel-run's message on stderr" \
	"carrel-run: /nonexistent/program: No such file or directory" \
	"$("$run" 5 /nonexistent/program 2>&1 >/dev/null)"
check_eq "a program that cannot run: 126" 126 "$("$run" 5 "$work/not-executable" 2>/dev/null; echo $?)"
check_eq "a program found through PATH" "found" "$("$run" 5 printf found)"
for bad in 0 3601 1x -1 ""; do
	check_eq "deadline '$bad' is refused with 125" 125 "$("$run" "$bad" true 2>/dev/null; echo $?)"
done
check_eq "no program is refused with 125" 125 "$("$run" 5 2>/dev/null; echo $?)"
# PROGRAM's own options are never carrel-run's: nothing after SECONDS is parsed.
check_eq "PROGRAM's arguments are passed untouched" "-- --help -5" "$("$run" 5 echo -- --help -5)"

echo "carrel-run: $passed passed, $failed failed"
((failed == 0))
