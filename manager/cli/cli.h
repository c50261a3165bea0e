/* cli: the carrel command line; talks to carreld through client/ only, never to core. */
#pragma once

#include "cli/cli-format.h"
#include "client/client.h"

G_BEGIN_DECLS

/*
 * Exit codes (CarrelCliExit in cli-format.h, also printed by `carrel --help`):
 *   0 ok, 1 failed (host or other errors), 2 usage, 3 not found,
 *   4 conflict (wrong_state, busy, exists), 5 unauthorized / forbidden / policy_denied,
 *   6 carreld unreachable, 7 timeout, 8 invalid argument refused by carreld,
 *   9 audit log broken (`carrel audit verify` found the hash chain broken).
 * With --json, stdout carries JSON only; an error is {"error": {"code", "message", "hint"}} there,
 * with the codes of the API plus "usage" (exit 2) and "unreachable" (exit 6).
 */

/* What every verb gets: the client and how to print. */
typedef struct {
    CarrelClient *client;
    gboolean json;       /* --json: stdout is JSON only */
    gboolean stdout_tty; /* pretty JSON on a terminal, one line per object otherwise */
    gboolean stderr_tty; /* progress and "waiting" lines only on a terminal */
    gboolean has_token;  /* to hint at --token-file on "unauthorized" */
    const char *url;     /* carreld's TCP address (--url, CARREL_URL); NULL on the Unix socket */
    /* The file the token was read from (--token-file or the default admin.token), else NULL. */
    const char *token_file;
    /* A transfer shown as a progress line (carrel_cli_transfer_begin): its text, last redraw. */
    char *transfer_text;
    gint64 transfer_shown_at;
} CarrelCli;

/*
 * A verb: argv[0] is the verb's name, argv[1..] its arguments with the global options taken
 * out. Returns the exit code.
 */
typedef int (*CarrelCliVerbFunc)(CarrelCli *cli, int argc, char **argv);

/* Verbs (one file each). */
int carrel_cli_version(CarrelCli *cli, int argc, char **argv);
/* Background processes (cli-procs.c). */
int carrel_cli_ps(CarrelCli *cli, int argc, char **argv);
int carrel_cli_kill(CarrelCli *cli, int argc, char **argv);
int carrel_cli_logs(CarrelCli *cli, int argc, char **argv);
int carrel_cli_stdin(CarrelCli *cli, int argc, char **argv);
int carrel_cli_shell(CarrelCli *cli, int argc, char **argv);
/* exec --stream and exec --background: POST body to path (cli-procs.c). */
int carrel_cli_exec_stream(CarrelCli *cli, const char *path, JsonNode *body);
int carrel_cli_exec_background(CarrelCli *cli, const char *path, JsonNode *body);
int carrel_cli_template(CarrelCli *cli, int argc, char **argv);
int carrel_cli_create(CarrelCli *cli, int argc, char **argv);
int carrel_cli_ls(CarrelCli *cli, int argc, char **argv);
int carrel_cli_show(CarrelCli *cli, int argc, char **argv);
int carrel_cli_start(CarrelCli *cli, int argc, char **argv);
int carrel_cli_stop(CarrelCli *cli, int argc, char **argv);
int carrel_cli_pause(CarrelCli *cli, int argc, char **argv);
int carrel_cli_resume(CarrelCli *cli, int argc, char **argv);
int carrel_cli_hibernate(CarrelCli *cli, int argc, char **argv);
int carrel_cli_snapshot(CarrelCli *cli, int argc, char **argv);
int carrel_cli_snapshots(CarrelCli *cli, int argc, char **argv);
int carrel_cli_revert(CarrelCli *cli, int argc, char **argv);
int carrel_cli_fork(CarrelCli *cli, int argc, char **argv);
int carrel_cli_rm(CarrelCli *cli, int argc, char **argv);

/* Template build (cli-template-build.c), called by carrel_cli_template. */
int carrel_cli_template_build(CarrelCli *cli, int argc, char **argv);
int carrel_cli_template_warm(CarrelCli *cli, int argc, char **argv);
int carrel_cli_exec(CarrelCli *cli, int argc, char **argv);
int carrel_cli_cp(CarrelCli *cli, int argc, char **argv);
int carrel_cli_fs(CarrelCli *cli, int argc, char **argv);
int carrel_cli_extract(CarrelCli *cli, int argc, char **argv);
int carrel_cli_diff(CarrelCli *cli, int argc, char **argv);
int carrel_cli_artifacts(CarrelCli *cli, int argc, char **argv);
int carrel_cli_recording(CarrelCli *cli, int argc, char **argv);
int carrel_cli_artifact(CarrelCli *cli, int argc, char **argv);
/* carrel export ID -o FILE, carrel verify BUNDLE (offline: cli->client is NULL). */
int carrel_cli_export(CarrelCli *cli, int argc, char **argv);
int carrel_cli_verify(CarrelCli *cli, int argc, char **argv);
int carrel_cli_screenshot(CarrelCli *cli, int argc, char **argv);
int carrel_cli_click(CarrelCli *cli, int argc, char **argv);
int carrel_cli_type(CarrelCli *cli, int argc, char **argv);
int carrel_cli_key(CarrelCli *cli, int argc, char **argv);
int carrel_cli_scroll(CarrelCli *cli, int argc, char **argv);
int carrel_cli_do(CarrelCli *cli, int argc, char **argv);
/* The accessibility tree (cli-a11y.c). */
int carrel_cli_a11y(CarrelCli *cli, int argc, char **argv);
/* Named tokens: ls, add, revoke, rotate-admin (cli-token.c). */
int carrel_cli_token(CarrelCli *cli, int argc, char **argv);
int carrel_cli_policy(CarrelCli *cli, int argc, char **argv);
int carrel_cli_egress(CarrelCli *cli, int argc, char **argv);
/* The audit log: ls, verify, export (cli-audit.c). */
int carrel_cli_audit(CarrelCli *cli, int argc, char **argv);
/* The control lease, approvals (cli-review.c). */
int carrel_cli_control(CarrelCli *cli, int argc, char **argv);
int carrel_cli_approvals(CarrelCli *cli, int argc, char **argv);
/* argv[0] is "approve" or "deny". */
int carrel_cli_decide(CarrelCli *cli, int argc, char **argv);
/* The web console's URL, or a .vv file for remote-viewer (cli-console.c). */
int carrel_cli_console(CarrelCli *cli, int argc, char **argv);
/* MCP over stdio, relayed to POST /mcp (cli-mcp.c). */
int carrel_cli_mcp(CarrelCli *cli, int argc, char **argv);

/*
 * Parses a verb's options with GOptionContext (--help prints the verb's help and exits 0).
 * params names the positional arguments ("ID"); n_min..n_max positional arguments are required
 * (G_MAXUINT: no limit). On a usage error prints it and returns FALSE.
 */
gboolean carrel_cli_parse_options(CarrelCli *cli, const char *params, const char *summary,
                                  const GOptionEntry *entries, guint n_min, guint n_max, int *argc,
                                  char ***argv);

/* Prints a usage error ("carrel: ..." or a JSON envelope with code "usage"); returns 2. */
int carrel_cli_usage(CarrelCli *cli, const char *format, ...) G_GNUC_PRINTF(2, 3);

/*
 * Prints error ("carrel: ..." on stderr, then "carrel: hint: ..." saying what to do next, or the
 * JSON envelope on stdout with the hint as its "hint" member); returns its exit code.
 */
int carrel_cli_fail(CarrelCli *cli, const GError *error);

/*
 * Like carrel_cli_fail with hint (what to do next) instead of the one of the error's code in
 * carrel_cli_error_hint; hint NULL: that one.
 */
int carrel_cli_fail_hint(CarrelCli *cli, const GError *error, const char *hint);

/* Error envelope {"error": {"code", "message", "hint"}} of an error, as printed by carrel_cli_fail.
 */
JsonNode *carrel_cli_error_envelope(CarrelCli *cli, const GError *error);

/* Prints a JSON value on stdout: indented on a terminal, else on one line. */
void carrel_cli_print_json(CarrelCli *cli, JsonNode *node);

/* Prints a JSON value on stdout on one line and flushes (JSON lines of long jobs). */
void carrel_cli_print_json_line(JsonNode *node);

/*
 * On a terminal (stderr a TTY, no --json): rewrites stderr's current line with progress, or
 * clears it when progress is NULL. Does nothing otherwise.
 */
void carrel_cli_progress_show(CarrelCli *cli, const CarrelCliProgress *progress);

/*
 * On a terminal, shows the bytes of the requests that follow as a progress line labelled text
 * (a bar when carreld's side tells the size); carrel_cli_transfer_end clears it. No-ops
 * elsewhere.
 */
void carrel_cli_transfer_begin(CarrelCli *cli, const char *text);
void carrel_cli_transfer_end(CarrelCli *cli);

/* Prints text on stdout as is. */
void carrel_cli_print_text(const char *text);

/*
 * Calls the API and checks that the reply is a JSON object (ret_reply may be NULL). Segments of
 * path taken from the user must be escaped with carrel_cli_escape_segment.
 */
gboolean carrel_cli_call(CarrelCli *cli, const char *method, const char *path, JsonNode *body,
                         JsonNode **ret_reply, GError **error);

/* "/v1/<collection>/<escaped item>[/<action>]"; NULL when item is "", "." or "..". */
char *carrel_cli_item_path(const char *collection, const char *item, const char *action);

/*
 * GETs /v1/sessions/ID/ACTION and returns its array member for a table; NULL when it printed
 * already (--json) or failed, with *ret_exit the exit code. *ret_reply owns the array.
 */
JsonArray *carrel_cli_get_session_list(CarrelCli *cli, const char *id, const char *action,
                                       const char *member, JsonNode **ret_reply, int *ret_exit);

/* Prints one session: its row in a table, or its JSON object with --json. */
void carrel_cli_print_session(CarrelCli *cli, JsonNode *session);

/* Prints an object: "key: value" lines, or its JSON with --json. */
void carrel_cli_print_fields(CarrelCli *cli, JsonNode *node);

G_END_DECLS
