/*
 * Unit tests of the CLI's pure helpers (cli-format.c, cli-hint.c, cli-progress.c): exit codes,
 * sizes, ages, text, tables, audit queries and verdicts, error hints, progress lines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli/cli-format.h"

static void
test_exit_codes(void **state)
{
    static const struct {
        CarrelErrorCode code;
        CarrelCliExit exit_code;
    } cases[] = {
        {CARREL_ERROR_FAILED, CARREL_CLI_EXIT_FAILED},
        {CARREL_ERROR_INVALID_ARG, CARREL_CLI_EXIT_INVALID},
        {CARREL_ERROR_NOT_FOUND, CARREL_CLI_EXIT_NOT_FOUND},
        {CARREL_ERROR_EXISTS, CARREL_CLI_EXIT_CONFLICT},
        {CARREL_ERROR_WRONG_STATE, CARREL_CLI_EXIT_CONFLICT},
        {CARREL_ERROR_BUSY, CARREL_CLI_EXIT_CONFLICT},
        {CARREL_ERROR_POLICY_DENIED, CARREL_CLI_EXIT_DENIED},
        {CARREL_ERROR_UNAUTHORIZED, CARREL_CLI_EXIT_DENIED},
        {CARREL_ERROR_FORBIDDEN, CARREL_CLI_EXIT_DENIED},
        {CARREL_ERROR_LIMIT, CARREL_CLI_EXIT_INVALID},
        {CARREL_ERROR_UNSUPPORTED, CARREL_CLI_EXIT_FAILED},
        {CARREL_ERROR_TIMEOUT, CARREL_CLI_EXIT_TIMEOUT},
        {CARREL_ERROR_HYPERVISOR, CARREL_CLI_EXIT_FAILED},
        {CARREL_ERROR_INTERNAL, CARREL_CLI_EXIT_FAILED},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = g_error_new_literal(CARREL_ERROR, cases[i].code, "x");

        assert_int_equal(carrel_cli_exit_code(error), cases[i].exit_code);
    }
    {
        g_autoptr(GError) other = g_error_new_literal(G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "x");

        assert_int_equal(carrel_cli_exit_code(other), CARREL_CLI_EXIT_FAILED);
        assert_int_equal(carrel_cli_exit_code(NULL), CARREL_CLI_EXIT_OK);
    }
}

static void
assert_text(char *text, const char *expected)
{
    assert_string_equal(text, expected);
    g_free(text);
}

/* Timings on one line, phases in order; none without a total; odd members skipped. */
static void
test_format_timings(void **state)
{
    g_autoptr(JsonNode) t = json_from_string(
        "{\"restore_ms\":812,\"agent_ms\":640,\"odd\":\"x\",\"total_ms\":2630}", NULL);
    g_autoptr(JsonNode) bare = json_from_string("{\"total_ms\":5}", NULL);
    g_autoptr(JsonNode) none = json_from_string("{\"restore_ms\":1}", NULL);

    assert_text(carrel_cli_format_timings(json_node_get_object(t)),
                "took 2.63 s (restore 812 ms, agent 640 ms)");
    assert_text(carrel_cli_format_timings(json_node_get_object(bare)), "took 0.01 s");
    assert_null(carrel_cli_format_timings(json_node_get_object(none)));
    assert_null(carrel_cli_format_timings(NULL));
}

static void
test_format_size(void **state)
{
    assert_text(carrel_cli_format_size(0), "0 B");
    assert_text(carrel_cli_format_size(1023), "1023 B");
    assert_text(carrel_cli_format_size(1024), "1 KiB");
    assert_text(carrel_cli_format_size(1025), "2 KiB");
    assert_text(carrel_cli_format_size(1024 * 1024), "1 MiB");
    assert_text(carrel_cli_format_size(G_GUINT64_CONSTANT(1536) * 1024 * 1024), "1536 MiB");
    assert_text(carrel_cli_format_size(G_GUINT64_CONSTANT(25) * 1024 * 1024 * 1024 / 2),
                "12.5 GiB");
}

static void
test_format_age(void **state)
{
    gint64 base = 1700000000; /* 2023-11-14T22:13:20Z */

    assert_text(carrel_cli_format_age("2023-11-14T22:13:20Z", base + 42), "42s");
    assert_text(carrel_cli_format_age("2023-11-14T22:13:20Z", base + 5 * 60 + 3), "5m");
    assert_text(carrel_cli_format_age("2023-11-14T22:13:20Z", base + 3 * 3600), "3h");
    assert_text(carrel_cli_format_age("2023-11-14T22:13:20Z", base + 2 * 86400 + 5), "2d");
    assert_text(carrel_cli_format_age("2023-11-14T22:13:20Z", base - 10), "0s");
    assert_text(carrel_cli_format_age("yesterday", base), "-");
    assert_text(carrel_cli_format_age(NULL, base), "-");
}

static void
test_clean_text(void **state)
{
    assert_text(carrel_cli_clean_text("tiny@1"), "tiny@1");
    assert_text(carrel_cli_clean_text("caf\xc3\xa9"), "caf\xc3\xa9");
    assert_text(carrel_cli_clean_text("a\x1b[31mred"), "a?[31mred");
    assert_text(carrel_cli_clean_text("line\nnext\ttab\r"), "line?next?tab?");
    assert_text(carrel_cli_clean_text("x\xe2\x80\xaey"), "x?y");      /* U+202E RLO */
    assert_text(carrel_cli_clean_text("c1\xc2\x9b"), "c1?");          /* U+009B CSI */
    assert_text(carrel_cli_clean_text("bad\xff"), "bad\xef\xbf\xbd"); /* U+FFFD */
    assert_text(carrel_cli_clean_text(NULL), "-");
}

static void
test_escape_segment(void **state)
{
    assert_text(carrel_cli_escape_segment("s-0123456789ab"), "s-0123456789ab");
    assert_text(carrel_cli_escape_segment("../x"), "..%2Fx");
    assert_text(carrel_cli_escape_segment("..."), "...");
    assert_null(carrel_cli_escape_segment(".."));
    assert_null(carrel_cli_escape_segment("."));
    assert_text(carrel_cli_escape_segment("a/b?c#d"), "a%2Fb%3Fc%23d");
    assert_text(carrel_cli_escape_segment("x y%"), "x%20y%25");
    assert_null(carrel_cli_escape_segment(""));
    assert_null(carrel_cli_escape_segment(NULL));
}

static void
test_progress(void **state)
{
    const char *abc[] = {"a", "b", "c"};
    const char *bcd[] = {"b", "c", "d"};
    const char *cdcd[] = {"c", "d", "c", "d"};
    const char *xyz[] = {"x", "y", "z"};

    /* First poll: everything is new. */
    assert_int_equal(carrel_cli_progress_first_new(NULL, 0, abc, 3), 0);
    /* Unchanged window. */
    assert_int_equal(carrel_cli_progress_first_new(abc, 3, abc, 3), 3);
    /* Window slid by one. */
    assert_int_equal(carrel_cli_progress_first_new(abc, 3, bcd, 3), 2);
    /* Window grew. */
    assert_int_equal(carrel_cli_progress_first_new(abc, 2, abc, 3), 2);
    /* Repeated lines: the longest overlap wins. */
    assert_int_equal(carrel_cli_progress_first_new(bcd, 3, cdcd, 4), 2);
    /* More new lines than the window holds. */
    assert_int_equal(carrel_cli_progress_first_new(abc, 3, xyz, 3), 0);
    /* Window emptied. */
    assert_int_equal(carrel_cli_progress_first_new(abc, 3, NULL, 0), 0);
}

static JsonObject *
parse_object(const char *text)
{
    g_autoptr(JsonParser) parser = json_parser_new();

    assert_true(json_parser_load_from_data(parser, text, -1, NULL));
    return json_object_ref(json_node_get_object(json_parser_get_root(parser)));
}

static void
test_table(void **state)
{
    static const char *const columns[] = {"ID", "NAME", NULL};
    static const char *const row1[] = {"s-1", "first", NULL};
    static const char *const row2[] = {"s-1234", NULL, NULL};
    g_autoptr(CarrelCliTable) table = carrel_cli_table_new(columns);

    carrel_cli_table_add(table, row1);
    carrel_cli_table_add(table, row2);
    assert_text(carrel_cli_table_render(table), "ID      NAME\n"
                                                "s-1     first\n"
                                                "s-1234  -\n");
}

static void
test_session_row(void **state)
{
    g_autoptr(JsonObject) session =
        parse_object("{\"id\":\"s-0123456789ab\",\"name\":\"w\\u001b1\",\"template\":\"tiny\","
                     "\"template_version\":2,\"state\":\"running\",\"vcpus\":1,\"memory_mib\":1024,"
                     "\"created_at\":\"2023-11-14T22:13:20Z\"}");
    g_autoptr(CarrelCliTable) table = carrel_cli_table_new_sessions();

    carrel_cli_table_add_session(table, session, 1700000000 + 120);
    assert_text(carrel_cli_table_render(table),
                "ID              NAME  TEMPLATE  STATE    VCPUS  MEM       AGE\n"
                "s-0123456789ab  w?1   tiny@2    running  1      1024 MiB  2m\n");
}

static void
test_template_row(void **state)
{
    g_autoptr(JsonObject) tmpl = parse_object(
        "{\"name\":\"tiny\",\"version\":3,\"boot\":\"direct\",\"format\":\"qcow2\","
        "\"size_bytes\":314572800,\"sessions\":0,\"created_at\":\"2023-11-14T22:13:20Z\"}");
    g_autoptr(JsonObject) warm = parse_object(
        "{\"name\":\"tiny\",\"version\":4,\"boot\":\"direct\",\"format\":\"qcow2\","
        "\"size_bytes\":314572800,\"sessions\":2,\"created_at\":\"2023-11-14T22:13:20Z\","
        "\"warm\":{\"memory_bytes\":283115520}}");
    g_autoptr(CarrelCliTable) table = carrel_cli_table_new_templates();

    carrel_cli_table_add_template(table, tmpl);
    carrel_cli_table_add_template(table, warm);
    assert_text(
        carrel_cli_table_render(table),
        "NAME  VERSION  BOOT    FORMAT  SIZE     WARM     SESSIONS  CREATED\n"
        "tiny  3        direct  qcow2   300 MiB  no       0         2023-11-14T22:13:20Z\n"
        "tiny  4        direct  qcow2   300 MiB  270 MiB  2         2023-11-14T22:13:20Z\n");
}

static void
test_fields(void **state)
{
    g_autoptr(JsonObject) obj = parse_object(
        "{\"name\":\"tiny\",\"size_bytes\":2048,\"kernel\":null,\"ok\":true,"
        "\"versions\":[{\"ref\":\"tiny@1\"},{\"ref\":\"tiny@2\"}],\"tags\":[\"a\",1]}");

    assert_text(carrel_cli_format_fields(obj), "name:       tiny\n"
                                               "size_bytes: 2048 (2 KiB)\n"
                                               "kernel:     -\n"
                                               "ok:         true\n"
                                               "versions:   tiny@1, tiny@2\n"
                                               "tags:       a, 1\n");
}

static void
test_token_row(void **state)
{
    g_autoptr(JsonObject) live = parse_object(
        "{\"id\":\"t-0123456789ab\",\"name\":\"alice\",\"role\":\"reviewer\",\"state\":\"live\","
        "\"created_at\":\"2023-11-14T22:13:20Z\",\"last_used_at\":null,"
        "\"expires_at\":\"2023-11-15T10:13:20Z\",\"revoked_at\":null}");
    g_autoptr(JsonObject) revoked = parse_object(
        "{\"id\":\"t-1\",\"name\":\"bot\\u001b\",\"role\":\"agent\",\"state\":\"revoked\","
        "\"created_at\":\"2023-11-14T22:13:20Z\",\"last_used_at\":\"2023-11-14T22:14:00Z\","
        "\"expires_at\":null,\"revoked_at\":\"2023-11-14T22:15:00Z\","
        "\"policies\":[\"small\",\"web\"]}");
    g_autoptr(CarrelCliTable) table = carrel_cli_table_new_tokens();

    carrel_cli_table_add_token(table, live);
    carrel_cli_table_add_token(table, revoked);
    assert_text(carrel_cli_table_render(table),
                "NAME   ID              ROLE      STATE    CREATED               LAST-USED      "
                "       EXPIRES               POLICIES\n"
                "alice  t-0123456789ab  reviewer  live     2023-11-14T22:13:20Z  -              "
                "       2023-11-15T10:13:20Z  any\n"
                "bot?   t-1             agent     revoked  2023-11-14T22:13:20Z  "
                "2023-11-14T22:14:00Z  -                     small,web\n");
}

static void
test_audit_row(void **state)
{
    g_autoptr(JsonObject) ok = parse_object(
        "{\"seq\":1,\"time\":\"2023-11-14T22:13:20.123456Z\",\"principal\":{\"id\":\"t-1\","
        "\"label\":\"admin\"},\"role\":\"admin\",\"operation\":\"token.create\",\"session\":null,"
        "\"result\":\"ok\",\"error_code\":null}");
    g_autoptr(JsonObject) denied = parse_object(
        "{\"seq\":12,\"time\":\"2023-11-14T22:13:21.999999Z\",\"principal\":{\"id\":\"t-2\"},"
        "\"role\":\"reviewer\",\"operation\":\"session.stop\",\"session\":\"s-0123456789ab\","
        "\"result\":\"denied\",\"error_code\":\"forbidden\"}");
    g_autoptr(CarrelCliTable) table = carrel_cli_table_new_audit();

    carrel_cli_table_add_audit(table, ok);
    carrel_cli_table_add_audit(table, denied);
    assert_text(carrel_cli_table_render(table),
                "SEQ  TIME                  PRINCIPAL  ROLE      OPERATION     SESSION         "
                "RESULT\n"
                "1    2023-11-14T22:13:20Z  admin      admin     token.create  -               ok\n"
                "12   2023-11-14T22:13:21Z  t-2        reviewer  session.stop  s-0123456789ab  "
                "denied (forbidden)\n");
}

static void
test_audit_path(void **state)
{
    CarrelCliAuditFilter none = {0};
    CarrelCliAuditFilter all = {
        .since = "2026-12-01T10:00:00+02:00",
        .session = "s-1",
        .principal = "a&limit=1",
        .operation = "token.create",
        .result = "denied",
    };

    assert_text(carrel_cli_audit_path(&none, 0, 0), "/v1/audit");
    assert_text(carrel_cli_audit_path(&none, -3, 0), "/v1/audit");
    assert_text(carrel_cli_audit_path(&none, 1000, 1000), "/v1/audit?after=1000&limit=1000");
    /* Values cannot add parameters or turn '+' into a space. */
    assert_text(carrel_cli_audit_path(&all, 7, 50),
                "/v1/audit?after=7&since=2026-12-01T10%3A00%3A00%2B02%3A00&session=s-1"
                "&principal=a%26limit%3D1&operation=token.create&result=denied&limit=50");
}

static void
test_audit_verdict(void **state)
{
    g_autoptr(JsonObject) intact =
        parse_object("{\"intact\":true,\"rows\":42,\"bad_seq\":null,\"why\":null}");
    g_autoptr(JsonObject) broken = parse_object(
        "{\"intact\":false,\"rows\":2,\"bad_seq\":2,\"why\":\"row 2: hash\\u001b[2J\"}");
    g_autoptr(JsonObject) garbled = parse_object("{\"intact\":\"yes\",\"rows\":3}");
    gboolean ok = FALSE;

    assert_text(carrel_cli_format_audit_verdict(intact, &ok), "audit log intact: 42 rows");
    assert_true(ok);
    assert_text(carrel_cli_format_audit_verdict(broken, &ok),
                "audit log broken at seq 2: row 2: hash?[2J");
    assert_false(ok);
    ok = TRUE;
    assert_text(carrel_cli_format_audit_verdict(garbled, &ok), "audit log broken at seq ?: -");
    assert_false(ok);
    ok = TRUE;
    assert_text(carrel_cli_format_audit_verdict(NULL, &ok), "audit log broken at seq ?: -");
    assert_false(ok);
}

/* Every error code the CLI can print has a hint; no-token 401 says how to get one. */
static void
test_error_hints(void **state)
{
    static const char *const codes[] = {"usage",          "unreachable",      "unauthorized",
                                        "forbidden",      "policy_denied",    "not_found",
                                        "exists",         "wrong_state",      "busy",
                                        "limit_exceeded", "invalid_argument", "unsupported",
                                        "timeout",        "hypervisor_error", "disk_error",
                                        "store_error",    "internal",         "no_space",
                                        "rate_limited",   "overloaded",       "gone"};

    for (gsize i = 0; i < G_N_ELEMENTS(codes); i++) {
        const char *hint = carrel_cli_error_hint(codes[i], TRUE);

        assert_non_null(hint);
        assert_true(carrel_util_is_clean_text(hint));
    }
    for (int code = 1; code < CARREL_ERROR_LAST; code++)
        assert_non_null(carrel_cli_error_hint(carrel_error_code_to_string(code), TRUE));
    assert_null(carrel_cli_error_hint("failed", TRUE));
    assert_null(carrel_cli_error_hint("nonsense", TRUE));
    assert_null(carrel_cli_error_hint(NULL, TRUE));
    assert_non_null(strstr(carrel_cli_error_hint("not_found", TRUE), "'carrel ls'"));
    assert_non_null(strstr(carrel_cli_error_hint("unreachable", TRUE), "start carreld"));
    assert_non_null(strstr(carrel_cli_error_hint("forbidden", TRUE), "--token-file"));
    assert_non_null(strstr(carrel_cli_error_hint("unauthorized", FALSE), "run as root"));
    assert_non_null(strstr(carrel_cli_error_hint("unauthorized", TRUE), "--token-file"));
}

static void
test_format_error(void **state)
{
    g_autofree char *plain = carrel_cli_format_error("no session 'x'", NULL);
    g_autofree char *hinted = carrel_cli_format_error("no session 'x'", "'carrel ls' lists them");
    g_autofree char *hostile = carrel_cli_format_error("a\033[2Jb\nc", "h");

    assert_string_equal(plain, "carrel: no session 'x'\n");
    assert_string_equal(hinted, "carrel: no session 'x'\ncarrel: hint: 'carrel ls' lists them\n");
    assert_string_equal(hostile, "carrel: a?[2Jb?c\ncarrel: hint: h\n");
}

static void
check_progress(const char *text, gint64 done, gint64 total, gboolean bytes, guint width,
               const char *want)
{
    CarrelCliProgress progress = {.text = text, .done = done, .total = total, .bytes = bytes};
    g_autofree char *line = carrel_cli_progress_render(&progress, width);

    assert_string_equal(line, want);
    assert_true(g_utf8_strlen(line, -1) <= (glong)width);
}

static void
test_progress_line(void **state)
{
    /* Unknown total: the latest text, as is. */
    check_progress("installing packages", -1, -1, FALSE, 79, "installing packages");
    /* Known total: a bar of width/4 (at most 20), the percentage, the counts. */
    check_progress("copying", 5, 10, FALSE, 79, "[=========>         ]  50% 5/10  copying");
    check_progress("copying", 5, 10, FALSE, 100, "[==========>         ]  50% 5/10  copying");
    check_progress(NULL, 0, 4, FALSE, 40, "[>         ]   0% 0/4");
    check_progress(NULL, 4, 4, FALSE, 40, "[==========] 100% 4/4");
    check_progress(NULL, 9, 4, FALSE, 40, "[==========] 100% 4/4");
    /* Narrow terminals: no bar. */
    check_progress("x", 1, 4, FALSE, 39, " 25% 1/4  x");
    /* Bytes: sizes; unknown total: just what is done. */
    check_progress("upload", 1048576, 4194304, TRUE, 60,
                   "[===>           ]  25% 1 MiB / 4 MiB  upload");
    check_progress("upload", 2048, -1, TRUE, 60, "2 KiB  upload");
    /* Long text cut to the width, "..." marking the cut. */
    check_progress("abcdefghijklmnopqrstuvwxyz", -1, -1, FALSE, 10, "abcdefg...");
    check_progress("abcdef", -1, -1, FALSE, 3, "abc");
    check_progress("abcdef", -1, -1, FALSE, 0, "");
    check_progress("h\u00e9llo w\u00f6rld!", -1, -1, FALSE, 8, "h\u00e9llo...");
    /* Server text cannot move the cursor, clear the screen or break the line. */
    check_progress("a\033[2J\rb\nc\td", -1, -1, FALSE, 79, "a?[2J?b?c?d");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_codes),    cmocka_unit_test(test_format_timings),
        cmocka_unit_test(test_format_size),   cmocka_unit_test(test_format_age),
        cmocka_unit_test(test_clean_text),    cmocka_unit_test(test_escape_segment),
        cmocka_unit_test(test_progress),      cmocka_unit_test(test_table),
        cmocka_unit_test(test_session_row),   cmocka_unit_test(test_template_row),
        cmocka_unit_test(test_fields),        cmocka_unit_test(test_token_row),
        cmocka_unit_test(test_audit_row),     cmocka_unit_test(test_audit_path),
        cmocka_unit_test(test_audit_verdict), cmocka_unit_test(test_error_hints),
        cmocka_unit_test(test_format_error),  cmocka_unit_test(test_progress_line),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
