/*
 * The typed requests of the conf module (conf-requests.h): each parser takes a good body, and
 * refuses a missing member, a wrong type and (where the route does) an unknown member with the
 * texts the API has always answered.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "conf/conf.h"

typedef gpointer (*Parser)(JsonNode *body, GError **error);

/* The body of text, or NULL (no body sent) for NULL. */
static JsonNode *
body_of(const char *text)
{
    g_autoptr(GError) error = NULL;
    JsonNode *node = text ? carrel_conf_parse_json(text, strlen(text), &error) : NULL;

    assert_true(!text || node);
    return node;
}

/* parse refuses text with code and exactly message. */
static void
refused(Parser parse, const char *text, gint code, const char *message)
{
    g_autoptr(JsonNode) body = body_of(text);
    g_autoptr(GError) error = NULL;

    assert_null(parse(body, &error));
    assert_non_null(error);
    if (!g_error_matches(error, CARREL_ERROR, code) || !g_str_equal(error->message, message))
        fail_msg("%s: got %d '%s', want %d '%s'", text ? text : "(no body)", error->code,
                 error->message, code, message);
}

#define INVALID CARREL_ERROR_INVALID_ARG

/* A request parsed without an error (error is read after the parser ran). */
static gpointer
parsed(gpointer req, GError **error)
{
    if (!req)
        fail_msg("refused: %s", *error ? (*error)->message : "(no error)");
    return req;
}

/* A good body: parsed into req, declarations only (the test's own follow). */
#define GOOD(type, prefix, text)                                                                   \
    g_autoptr(JsonNode) body = body_of(text);                                                      \
    g_autoptr(GError) error = NULL;                                                                \
    g_autoptr(type) req = parsed(prefix##_from_json(body, &error), &error)

static void
test_login(void **state)
{
    GOOD(CarrelLoginRequest, carrel_login_request, "{\"token\":\"t-1\"}");
    assert_string_equal(req->token, "t-1");
    refused((Parser)carrel_login_request_from_json, NULL, INVALID, "'token' is required");
    refused((Parser)carrel_login_request_from_json, "{}", INVALID, "'token' is required");
    refused((Parser)carrel_login_request_from_json, "{\"token\":1}", INVALID,
            "'token' must be a string");
    refused((Parser)carrel_login_request_from_json, "{\"token\":\"t\",\"x\":1}", INVALID,
            "unknown member 'x'");
}

static void
test_token(void **state)
{
    GOOD(CarrelTokenRequest, carrel_token_request,
         "{\"role\":\"agent\",\"name\":\"ci\",\"expires\":\"2h\",\"policies\":[\"default\"]}");
    assert_string_equal(req->role, "agent");
    assert_string_equal(req->name, "ci");
    assert_int_equal(req->ttl_s, 7200);
    assert_int_equal(g_strv_length(req->policies), 1);
    assert_string_equal(req->policies[0], "default");
    refused((Parser)carrel_token_request_from_json, "{\"name\":\"ci\"}", INVALID,
            "'role' is required");
    refused((Parser)carrel_token_request_from_json, "{\"role\":\"agent\"}", INVALID,
            "'name' is required");
    refused((Parser)carrel_token_request_from_json,
            "{\"role\":\"agent\",\"name\":\"ci\","
            "\"expires\":7}",
            INVALID, "'expires' must be a string");
    refused((Parser)carrel_token_request_from_json,
            "{\"role\":\"agent\",\"name\":\"ci\",\"expires\":\"2w\"}", INVALID,
            "an expiry is a number with s, m, h or d ('12h', '7d'), at most 366 days");
    refused((Parser)carrel_token_request_from_json,
            "{\"role\":\"agent\",\"name\":\"ci\",\"policies\":\"default\"}", INVALID,
            "'policies' must be an array");
    refused((Parser)carrel_token_request_from_json, "{\"role\":\"agent\",\"name\":\"ci\",\"r\":1}",
            INVALID, "unknown member 'r'");
}

static void
test_token_defaults(void **state)
{
    GOOD(CarrelTokenRequest, carrel_token_request, "{\"role\":\"agent\",\"name\":\"ci\"}");
    assert_int_equal(req->ttl_s, 0);
    assert_null(req->policies);
}

static void
test_control(void **state)
{
    GOOD(CarrelControlRequest, carrel_control_request, "{\"action\":\"take\"}");
    g_autoptr(JsonNode) release = body_of("{\"action\":\"release\"}");
    g_autoptr(CarrelControlRequest) released = carrel_control_request_from_json(release, &error);

    assert_true(req->take);
    assert_non_null(released);
    assert_false(released->take);
    refused((Parser)carrel_control_request_from_json, NULL, INVALID, "'action' is required");
    refused((Parser)carrel_control_request_from_json, "{\"action\":true}", INVALID,
            "'action' must be a string");
    refused((Parser)carrel_control_request_from_json, "{\"action\":\"grab\"}", INVALID,
            "'action' must be \"take\" or \"release\"");
    refused((Parser)carrel_control_request_from_json, "{\"action\":\"take\",\"who\":\"me\"}",
            INVALID, "unknown member 'who'");
}

static void
test_decision(void **state)
{
    GOOD(CarrelDecisionRequest, carrel_decision_request, "{\"reason\":\"looks fine\"}");
    g_autoptr(CarrelDecisionRequest) bare = carrel_decision_request_from_json(NULL, &error);

    assert_string_equal(req->reason, "looks fine");
    assert_non_null(bare);
    assert_null(bare->reason);
    refused((Parser)carrel_decision_request_from_json, "{\"reason\":[]}", INVALID,
            "'reason' must be a string");
    refused((Parser)carrel_decision_request_from_json, "{\"why\":\"x\"}", INVALID,
            "unknown member 'why'");
}

static void
test_approval_ask(void **state)
{
    GOOD(CarrelApprovalAsk, carrel_approval_ask,
         "{\"session_id\":\"s-1\",\"action\":\"net.connect\",\"detail\":{\"host\":\"a\"}}");
    assert_string_equal(req->session_id, "s-1");
    assert_string_equal(req->action, "net.connect");
    assert_true(JSON_NODE_HOLDS_OBJECT(req->detail));
    refused((Parser)carrel_approval_ask_from_json, "{\"action\":\"a\"}", INVALID,
            "'session_id' is required");
    refused((Parser)carrel_approval_ask_from_json, "{\"session_id\":\"s-1\"}", INVALID,
            "'action' is required");
    refused((Parser)carrel_approval_ask_from_json, "{\"session_id\":1,\"action\":\"a\"}", INVALID,
            "'session_id' must be a string");
    refused((Parser)carrel_approval_ask_from_json,
            "{\"session_id\":\"s-1\",\"action\":\"a\",\"more\":1}", INVALID,
            "unknown member 'more'");
}

static void
test_warm(void **state)
{
    GOOD(CarrelWarmRequest, carrel_warm_request, "{\"version\":3}");
    g_autoptr(CarrelWarmRequest) latest = carrel_warm_request_from_json(NULL, &error);

    assert_int_equal(req->version, 3);
    assert_non_null(latest);
    assert_int_equal(latest->version, 0);
    refused((Parser)carrel_warm_request_from_json, "{\"version\":0}", INVALID,
            "'version' must be a positive integer");
    refused((Parser)carrel_warm_request_from_json, "{\"version\":\"3\"}", INVALID,
            "'version' must be a positive integer");
    refused((Parser)carrel_warm_request_from_json, "{\"version\":4294967296}", INVALID,
            "'version' must be a positive integer");
    refused((Parser)carrel_warm_request_from_json, "{\"v\":1}", INVALID, "unknown member 'v'");
}

static void
test_pool(void **state)
{
    GOOD(CarrelPoolRequest, carrel_pool_request, "{\"size\":2}");
    assert_int_equal(req->size, 2);
    refused((Parser)carrel_pool_request_from_json, NULL, INVALID, "'size' must be between 0 and 8");
    refused((Parser)carrel_pool_request_from_json, "{}", INVALID, "'size' must be between 0 and 8");
    refused((Parser)carrel_pool_request_from_json, "{\"size\":9}", INVALID,
            "'size' must be between 0 and 8");
    refused((Parser)carrel_pool_request_from_json, "{\"size\":\"2\"}", INVALID,
            "'size' must be between 0 and 8");
    refused((Parser)carrel_pool_request_from_json, "{\"size\":1,\"n\":1}", INVALID,
            "unknown member 'n'");
}

static void
test_snapshot_and_revert(void **state)
{
    /* Other members pass, as they always did on these two routes. */
    GOOD(CarrelSnapshotRequest, carrel_snapshot_request, "{\"name\":\"clean\",\"note\":1}");
    g_autoptr(JsonNode) revert = body_of("{\"snapshot\":\"clean\"}");
    g_autoptr(CarrelSnapshotRequest) back = carrel_revert_request_from_json(revert, &error);

    assert_string_equal(req->name, "clean");
    assert_non_null(back);
    assert_string_equal(back->name, "clean");
    refused((Parser)carrel_snapshot_request_from_json, NULL, INVALID, "'name' is required");
    refused((Parser)carrel_snapshot_request_from_json, "{\"name\":5}", INVALID,
            "'name' is required");
    refused((Parser)carrel_revert_request_from_json, "{\"name\":\"clean\"}", INVALID,
            "'snapshot' is required");
    refused((Parser)carrel_revert_request_from_json, "{\"snapshot\":{}}", INVALID,
            "'snapshot' is required");
}

static void
test_fork(void **state)
{
    GOOD(CarrelForkRequest, carrel_fork_request, "{\"snapshot\":\"clean\",\"count\":3}");
    g_autoptr(CarrelForkRequest) now = carrel_fork_request_from_json(NULL, &error);

    assert_string_equal(req->snapshot, "clean");
    assert_int_equal(req->count, 3);
    assert_non_null(now);
    assert_null(now->snapshot);
    assert_int_equal(now->count, 1);
    refused((Parser)carrel_fork_request_from_json, "{\"count\":0}", INVALID,
            "'count' must be between 1 and 16");
    refused((Parser)carrel_fork_request_from_json, "{\"count\":\"2\"}", INVALID,
            "'count' must be between 1 and 16");
    refused((Parser)carrel_fork_request_from_json, "{\"snapshot\":1}", INVALID,
            "'snapshot' must be a string");
    refused((Parser)carrel_fork_request_from_json, "{\"n\":1}", INVALID, "unknown member 'n'");
}

static void
test_stop(void **state)
{
    GOOD(CarrelStopRequest, carrel_stop_request, "{\"timeout_s\":0}");
    g_autoptr(CarrelStopRequest) dflt = carrel_stop_request_from_json(NULL, &error);

    assert_int_equal(req->timeout_s, 0);
    assert_non_null(dflt);
    assert_int_equal(dflt->timeout_s, 30);
    refused((Parser)carrel_stop_request_from_json, "{\"timeout_s\":601}", INVALID,
            "'timeout_s' must be an integer between 0 and 600");
    refused((Parser)carrel_stop_request_from_json, "{\"timeout_s\":\"5\"}", INVALID,
            "'timeout_s' must be an integer between 0 and 600");
    refused((Parser)carrel_stop_request_from_json, "{\"force\":true}", INVALID,
            "unknown member 'force'");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_login),
        cmocka_unit_test(test_token),
        cmocka_unit_test(test_token_defaults),
        cmocka_unit_test(test_control),
        cmocka_unit_test(test_decision),
        cmocka_unit_test(test_approval_ask),
        cmocka_unit_test(test_warm),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_snapshot_and_revert),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_stop),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
