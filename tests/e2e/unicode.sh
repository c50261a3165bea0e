# Any Unicode text typed into tiny's terminal (a UTF-8 xterm running bash, see the template's
# session): the text the US keymap can type goes as key presses through QEMU ("keys"); the rest
# is typed by carrel-guest in the guest ("guest_keysyms") or pasted ("clipboard"). Each text is
# typed as `printf %s 'TEXT' > /tmp/u.txt` + Return and read back with exec, byte for byte.
# shellcheck shell=bash

# unicode_x SESSION COMMAND...: a command in the guest's X session, as root.
unicode_x() {
    local s="$1"
    shift
    carrel exec "$s" -- env DISPLAY=:0 "$@"
}

# The terminal holds the pointer and the focus again (earlier parts clicked and dragged).
unicode_focus() {
    local s="$1" wid
    wid="$(unicode_x "$s" xdotool search --onlyvisible --classname '^carrel-terminal$' | tail -n 1)"
    unicode_x "$s" xdotool mousemove --window "$wid" 400 250 windowraise "$wid" \
        windowfocus --sync "$wid" >/dev/null
    # An empty command line: whatever an earlier part left half-typed goes.
    carrel key "$s" ctrl+u >/dev/null
}

# unicode_hex TEXT: the bytes of TEXT as hex, one line.
unicode_hex() {
    printf %s "$1" | od -An -tx1 | tr -d ' \n'
}

# unicode_read SESSION: /tmp/u.txt of the guest as hex, once it exists (up to 15 s).
unicode_read() {
    local s="$1"
    for _ in $(seq 1 30); do
        carrel exec "$s" -- test -e /tmp/u.txt 2>/dev/null && break
        sleep 0.5
    done
    sleep 0.5 # the shell may still be writing
    carrel exec "$s" -- od -An -tx1 /tmp/u.txt 2>/dev/null | tr -d ' \n'
}

# unicode_typed SESSION TEXT METHOD LABEL [carrel type options...]: types the printf line with
# carrel type, checks the method the reply names and the file's bytes.
unicode_typed() {
    local s="$1" text="$2" method="$3" label="$4" out
    shift 4
    carrel exec "$s" -- rm -f /tmp/u.txt >/dev/null
    out="$(carrel type --json "$@" "$s" "printf %s '$text' > /tmp/u.txt"$'\n')"
    check_eq "$label: typed with $method" "$method" "$(jq -r '.results[0].output.method' <<<"$out")"
    check_eq "$label: the file holds exactly the text" "$(unicode_hex "$text")" "$(unicode_read "$s")"
}

# unicode_do SESSION LABEL JSON TEXT: one raw action (a format's own names) that types TEXT's
# printf line; the file must hold TEXT.
unicode_do() {
    local s="$1" label="$2" json="$3" text="$4" out
    carrel exec "$s" -- rm -f /tmp/u.txt >/dev/null
    out="$(carrel "do" "$s" "$json" --json)"
    check_eq "$label: typed with guest_keysyms" "guest_keysyms" \
        "$(jq -r '.results[0].output.method' <<<"$out")"
    check_eq "$label: the file holds exactly the text" "$(unicode_hex "$text")" "$(unicode_read "$s")"
}

# The spare keycodes carrel-guest remaps, counted as xmodmap shows them ("keycode N =").
unicode_spare_keycodes() {
    unicode_x "$1" xmodmap -pke | awk 'NF <= 3' | wc -l
}

unicode_checks() {
    local s="$1" text spare line
    unicode_focus "$s"
    spare="$(unicode_spare_keycodes "$s")"
    check "the guest keymap has spare keycodes for remapping" test "$spare" -gt 0
    # The last text: quotes, a dollar and a backslash stay literal inside the guest's '...'.
    # shellcheck disable=SC2016,SC1003
    for text in 'é' 'ß' '中文' '😀' 'naïve café 中文 😀 ok' 'Größe Ελληνικά русский ½ ✓ "q" $HOME \'; do
        unicode_typed "$s" "$text" guest_keysyms "type '$text'"
    done
    # Longer than CARREL_TYPE_KEYS_AUTO_MAX characters: through the guest, unless keys are asked.
    unicode_typed "$s" 'plain ASCII ~!@#$%^&*()_+{}|:"<>?' guest_keysyms "ASCII text"
    unicode_typed "$s" 'keys ~!@#$%^&*()_+{}|:"<>?' keys "ASCII text as keys" --method keys
    unicode_typed "$s" 'ascii through the guest' guest_keysyms "ASCII asked through the guest" \
        --method guest_keysyms
    sleep 1
    check_eq "the spare keycodes are empty again after typing" "$spare" "$(unicode_spare_keycodes "$s")"

    # Every format's type action reaches the same typing.
    text='naïve 中文 😀'
    line="printf %s '$text' > /tmp/u.txt"$'\n'
    unicode_do "$s" "Anthropic type" "$(jq -cn --arg t "$line" '{action: "type", text: $t}')" "$text"
    unicode_do "$s" "OpenAI type" "$(jq -cn --arg t "$line" '{type: "type", text: $t}')" "$text"
    unicode_do "$s" "OSWorld TYPING" \
        "$(jq -cn --arg t "$line" '{action_type: "TYPING", parameters: {text: $t}}')" "$text"

    # The clipboard: the selections hold the text, shift+Insert pastes it (xterm: PRIMARY).
    carrel exec "$s" -- rm -f /tmp/u.txt >/dev/null
    carrel type "$s" "printf %s '" >/dev/null
    text='ß 中 😀 pasted'
    check_eq "clipboard: pasted with shift+Insert" "clipboard" \
        "$(carrel type --json --method clipboard "$s" "$text" | jq -r '.results[0].output.method')"
    carrel type "$s" "' > /tmp/u.txt"$'\n' >/dev/null
    check_eq "clipboard: the file holds exactly the text" "$(unicode_hex "$text")" "$(unicode_read "$s")"

    # Refusals: control characters, and text the keymap lacks when keys are asked for.
    carrel type "$s" $'a\x1bb' >/dev/null 2>&1
    check_eq "a control character (ESC) exits 8 (invalid argument)" "8" "$?"
    carrel type --method keys "$s" 'héllo' >/dev/null 2>&1
    check_eq "non-ASCII text with --method keys exits 8" "8" "$?"
    carrel "do" "$s" '{"action":"type","text":"x","method":"telepathy"}' >/dev/null 2>&1
    check_eq "an unknown method exits 8" "8" "$?"
}
