# e2e: named policies on real VMs. An agent token limited to the shipped `small` policy makes a
# warm tiny session that runs under it (its time limit set, its machine within the limits); a
# bigger machine or another policy is refused and leaves nothing behind.
# Needs lib.sh (carrel, check, check_eq, VIRSH).
# shellcheck shell=bash

policy_checks() {
    local tok json id before after mem
    check_eq "carrel policy ls lists the shipped policies" "default small" \
        "$(carrel policy ls --json | jq -r '[.policies[].name] | join(" ")')"
    tok="$(carrel token add agent-small --role agent --policy small --json | jq -r .token)"
    check_eq "the limited token sees its policy alone" "small" \
        "$(CARREL_TOKEN="$tok" carrel policy ls --json | jq -r '[.policies[].name] | join(" ")')"
    json="$(CARREL_TOKEN="$tok" carrel create tiny --name e2e-small --json)"
    id="$(jq -r .id <<<"$json")"
    check_eq "a create by the limited token runs under its policy" "running small" \
        "$(jq -r '"\(.state) \(.policy)"' <<<"$json")"
    check "the small policy's time limit is set" json_true '.expires_at != null' "$json"
    check_eq "the guest runs with the policy's vCPUs" "1" \
        "$("${VIRSH[@]}" vcpucount "carrel-$id" --live --active 2>/dev/null)"
    mem="$("${VIRSH[@]}" dominfo "carrel-$id" | awk '/^Max memory/ {print $3}')"
    check "the guest has at most the policy's memory ($mem KiB)" test "${mem:-0}" -gt 0 -a \
        "${mem:-0}" -le 1048576
    check "the guest agent answers in the small session" agent_ping "carrel-$id"
    before="$(carrel ls --all --json | jq '.sessions | length')"
    CARREL_TOKEN="$tok" carrel create tiny --memory 2048 >/dev/null 2>&1
    check_eq "a machine over the policy's memory is refused (exit 5)" "5" "$?"
    CARREL_TOKEN="$tok" carrel create tiny --policy default >/dev/null 2>&1
    check_eq "another policy than the token's is refused (exit 5)" "5" "$?"
    carrel create tiny --policy nope >/dev/null 2>&1
    check_eq "an unknown policy is not found (exit 3)" "3" "$?"
    after="$(carrel ls --all --json | jq '.sessions | length')"
    check_eq "refused creates leave no session behind" "$before" "$after"
    check_eq "the small session is destroyed" "destroyed" \
        "$(CARREL_TOKEN="$tok" carrel rm "$id" --json | jq -r '.state // .[0].state')"
}
