/* cli-format: pure text helpers of the carrel CLI (tables, sizes, ages, exit codes); no I/O. */
#pragma once

#include <json-glib/json-glib.h>

#include "util/util.h"

G_BEGIN_DECLS

/*
 * Exit codes of carrel; `carrel --help` prints the same list.
 *   0  ok
 *   1  failed: the host or carreld failed (hypervisor, disk, store, internal, unsupported, ...)
 *   2  usage: the command line is wrong (unknown command or option, missing argument)
 *   3  not found: unknown session, template, job or route
 *   4  conflict: the session's state does not allow it (wrong_state), another operation holds
 *      it (busy), the name exists, or retry later (rate_limited, overloaded)
 *   5  denied: unauthorized (no or wrong token), forbidden (role), policy_denied
 *   6  carreld unreachable: nothing listens on the socket or the URL
 *   7  timeout: carreld, the guest or a tool did not answer in time
 *   8  invalid argument refused by carreld (invalid_argument, limit_exceeded)
 *   9  audit log broken: `carrel audit verify` found a row that breaks the hash chain
 *  10  evidence bundle broken: `carrel verify` found a file changed, missing or extra, a bad
 *      signature or a broken audit chain
 */
typedef enum {
    CARREL_CLI_EXIT_OK = 0,
    CARREL_CLI_EXIT_FAILED = 1,
    CARREL_CLI_EXIT_USAGE = 2,
    CARREL_CLI_EXIT_NOT_FOUND = 3,
    CARREL_CLI_EXIT_CONFLICT = 4,
    CARREL_CLI_EXIT_DENIED = 5,
    CARREL_CLI_EXIT_UNREACHABLE = 6,
    CARREL_CLI_EXIT_TIMEOUT = 7,
    CARREL_CLI_EXIT_INVALID = 8,
    CARREL_CLI_EXIT_AUDIT_BROKEN = 9,
    CARREL_CLI_EXIT_BUNDLE_BROKEN = 10,
} CarrelCliExit;

/* Exit code of an error in CARREL_ERROR (other domains: FAILED). */
CarrelCliExit carrel_cli_exit_code(const GError *error);

/* "512 B", "12 KiB", "1536 MiB", "12.5 GiB" (MiB up to 10 GiB). */
char *carrel_cli_format_size(guint64 bytes);

/* Age of an RFC 3339 timestamp at now (unix seconds): "42s", "5m", "3h", "2d"; "-" if invalid. */
char *carrel_cli_format_age(const char *timestamp, gint64 now);

/*
 * Copy of server-supplied text safe to print on a terminal: invalid UTF-8, control and format
 * characters (escape sequences, bidi overrides, tabs, newlines) become '?'. NULL gives "-".
 */
char *carrel_cli_clean_text(const char *text);

/*
 * One URL path segment from user text, percent-encoded so it cannot address another route
 * ("../x", "a/b", "?" ...). NULL for "", "." and ".." (URL normalization would remove them).
 */
char *carrel_cli_escape_segment(const char *text);

/*
 * Progress of a job is a sliding window of its last lines. Given the window seen before (prev)
 * and the current one (cur), returns the index in cur of the first line not seen yet: the
 * longest suffix of prev that is a prefix of cur is skipped.
 */
guint carrel_cli_progress_first_new(const char *const *prev, guint n_prev, const char *const *cur,
                                    guint n_cur);

/* Member accessors that never fail: NULL / fallback when absent or of another type. */
const char *carrel_cli_json_string(JsonObject *obj, const char *member);
gint64 carrel_cli_json_int(JsonObject *obj, const char *member, gint64 fallback);
JsonObject *carrel_cli_json_object(JsonNode *node, const char *member);
JsonArray *carrel_cli_json_array(JsonNode *node, const char *member);

/* A new node holding an empty object ({}). */
JsonNode *carrel_cli_json_new_object(void);

/* A scalar JSON value as text ("-" for null, "true", numbers); compact JSON for the rest. */
char *carrel_cli_format_value(JsonNode *node);

/* A verb's timings ({"restore_ms": 812, ..., "total_ms": 2630}) on one line: "took 2.63 s
 * (restore 812 ms, agent 640 ms)", the phases in their order; NULL when there are none. */
char *carrel_cli_format_timings(JsonObject *timings);

/* "key: value" lines of an object's members, keys aligned, values cleaned; "_bytes" humanized. */
char *carrel_cli_format_fields(JsonObject *obj);

typedef struct _CarrelCliTable CarrelCliTable;

/* A text table with a header row; NULL-terminated column names. */
CarrelCliTable *carrel_cli_table_new(const char *const *columns);
void carrel_cli_table_free(CarrelCliTable *table);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelCliTable, carrel_cli_table_free)

/* Adds a row of as many cells as columns (NULL cells print "-"); cells are cleaned. */
void carrel_cli_table_add(CarrelCliTable *table, const char *const *cells);

/* The table as text, columns padded and separated by two spaces, one '\n' per row. */
char *carrel_cli_table_render(const CarrelCliTable *table);

/* Tables of sessions (ID NAME TEMPLATE STATE VCPUS MEM AGE) and templates, and their rows. */
CarrelCliTable *carrel_cli_table_new_sessions(void);
void carrel_cli_table_add_session(CarrelCliTable *table, JsonObject *session, gint64 now);
CarrelCliTable *carrel_cli_table_new_templates(void);
void carrel_cli_table_add_template(CarrelCliTable *table, JsonObject *tmpl);

/* Tables of tokens (NAME ID ROLE STATE CREATED LAST-USED EXPIRES) and their rows. */
CarrelCliTable *carrel_cli_table_new_tokens(void);
void carrel_cli_table_add_token(CarrelCliTable *table, JsonObject *token);

/*
 * Tables of audit entries (SEQ TIME PRINCIPAL ROLE OPERATION SESSION RESULT) and their rows:
 * the time to the second, the principal's label (else its id), the error code after a result
 * that has one ("denied (forbidden)").
 */
CarrelCliTable *carrel_cli_table_new_audit(void);
void carrel_cli_table_add_audit(CarrelCliTable *table, JsonObject *entry);

/* Filters of GET /v1/audit as the user typed them; NULL members are not sent. */
typedef struct {
    const char *since; /* RFC 3339 or Unix seconds, checked by carreld */
    const char *session;
    const char *principal; /* token id or name */
    const char *operation;
    const char *result; /* ok, denied or failed */
} CarrelCliAuditFilter;

/*
 * "/v1/audit?..." with filter's values percent-encoded; after_seq <= 0 and limit 0 are left out
 * (carreld's defaults: from the start, 1000 entries).
 */
char *carrel_cli_audit_path(const CarrelCliAuditFilter *filter, gint64 after_seq, guint limit);

/*
 * The line for a verdict of GET /v1/audit/verify: "audit log intact: N rows" or "audit log
 * broken at seq N: WHY" (WHY cleaned for a terminal). *ret_intact is TRUE only when "intact"
 * is the boolean true.
 */
char *carrel_cli_format_audit_verdict(JsonObject *verdict, gboolean *ret_intact);

/*
 * What to do next after an error of code (the API's error codes plus "usage" and
 * "unreachable"); has_token: whether the CLI sent a token. NULL when there is no hint.
 */
const char *carrel_cli_error_hint(const char *code, gboolean has_token);

/* The stderr text of an error: "carrel: MESSAGE\n" (cleaned), then "carrel: hint: HINT\n". */
char *carrel_cli_format_error(const char *message, const char *hint);

/* What a progress line shows: a job's latest text and, when known, how far it is. */
typedef struct {
    const char *text; /* latest progress text, from carreld or a guest: cleaned here; or NULL */
    gint64 done;      /* units done, -1 unknown */
    gint64 total;     /* units in all, <= 0 unknown */
    gboolean bytes;   /* units are bytes: shown as sizes */
} CarrelCliProgress;

/*
 * The progress line for a terminal width characters wide (no '\r', no newline): a bar and a
 * percentage when the total is known, the counts, then the text with control characters
 * replaced; cut to width, "..." marking the cut.
 */
char *carrel_cli_progress_render(const CarrelCliProgress *progress, guint width);

G_END_DECLS
