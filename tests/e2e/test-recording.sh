#!/bin/bash
# e2e, the screen recording part (tests/e2e/recording.sh): build or reuse `tiny`, a carreld with
# a policy that records, then a recorded session's life. Needs root, qemu:///system and
# gst-discoverer-1.0 (gstreamer1.0-plugins-base-apps); node and chromium for the page's player.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
# shellcheck source=tests/e2e/browser.sh
source "$(dirname "$0")/browser.sh"
# shellcheck source=tests/e2e/recording.sh
source "$(dirname "$0")/recording.sh"
trap 'finish; exit $?' EXIT

recording_policies
start_with_tiny --policy-dir "$RECORDING_POLICIES" || exit 1
check "template warm tiny" carrel template warm tiny
recording_checks
