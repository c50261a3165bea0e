/* cli-hint: what to do next after an error, by the error's code; pure, no I/O. */
#include "cli/cli-format.h"

typedef struct {
    const char *code;
    const char *hint;
} CliHint;

/* Codes of the API's error envelope (util-error.c) plus the CLI's "usage" and "unreachable". */
static const CliHint cli_hints[] = {
    {"usage", "'carrel --help' lists commands, 'carrel COMMAND --help' their options"},
    {"unreachable", "start carreld with scripts/quickstart or 'carreld --state-dir DIR', or point "
                    "--socket / --url at the one running"},
    {"unauthorized", "the token was refused: pass a valid one with --token-file FILE or "
                     "CARREL_TOKEN ('carrel token ls' as admin shows tokens)"},
    {"forbidden", "this token's role may not do this: use an admin token (run as root or pass "
                  "--token-file FILE)"},
    {"policy_denied", "the session's policy refuses this: 'carrel policy show NAME' shows what it "
                      "allows"},
    {"not_found", "'carrel ls' lists sessions, 'carrel template ls' templates"},
    {"exists",
     "pick another name, or remove the old one first ('carrel rm', 'carrel template rm')"},
    {"wrong_state", "'carrel show ID' shows the session's state: start, stop or resume it first"},
    {"busy", "another operation holds it: wait for it to end and retry"},
    {"rate_limited", "this token is over one of carreld's [limits] (the message names it): wait "
                     "the seconds it says, or destroy sessions it no longer needs"},
    {"overloaded", "carreld has too many requests of this kind queued: wait a few seconds and "
                   "retry"},
    {"limit_exceeded", "stay under the limit (smaller files, fewer items), or wait a few seconds "
                       "and retry if carreld is rate limiting"},
    {"invalid_argument", "check the arguments: 'carrel COMMAND --help' shows them"},
    {"unsupported", "this hypervisor or host cannot do it ('carrel version' shows the "
                    "accelerator in use)"},
    {"timeout", "the guest or carreld did not answer in time: retry, and check 'carrel show ID'"},
    {"hypervisor_error", "carreld's log has the details (journalctl -u carreld)"},
    {"disk_error", "carreld's log has the details (journalctl -u carreld)"},
    {"store_error", "carreld's log has the details (journalctl -u carreld)"},
    {"gone", "it existed but is gone for good (a pruned screenshot, a used console link): take "
             "a new one"},
    {"no_space", "the host's disk is full: free space in carreld's state dir (remove sessions, "
                 "snapshots or templates), then retry"},
    {"internal", "carreld's log has the details (journalctl -u carreld)"},
};

const char *
carrel_cli_error_hint(const char *code, gboolean has_token)
{
    if (!code)
        return NULL;
    if (!has_token && g_str_equal(code, "unauthorized"))
        return "run as root (carrel reads /var/lib/carrel/admin.token) or ask an admin for a "
               "token ('carrel token add NAME')";
    for (gsize i = 0; i < G_N_ELEMENTS(cli_hints); i++) {
        if (g_str_equal(cli_hints[i].code, code))
            return cli_hints[i].hint;
    }
    return NULL;
}

char *
carrel_cli_format_error(const char *message, const char *hint)
{
    g_autofree char *clean = carrel_cli_clean_text(message);

    if (!hint)
        return g_strdup_printf("carrel: %s\n", clean);
    return g_strdup_printf("carrel: %s\ncarrel: hint: %s\n", clean, hint);
}
