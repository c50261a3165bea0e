#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "policy/policy.h"

static void
test_default(void **state)
{
    g_autoptr(CarrelPolicy) p = carrel_policy_new_default();
    g_autoptr(GError) error = NULL;

    assert_true(carrel_policy_check_resources(p, 4, 8192, NULL));
    assert_false(carrel_policy_check_resources(p, 5, 1024, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED));
    assert_non_null(strstr(error->message, "at most 4"));
    g_clear_error(&error);
    assert_false(carrel_policy_check_resources(p, 1, 8193, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED));
}

static void
test_load(void **state)
{
    const char *text = "[resources]\nmax_vcpus=2\nmax_memory_mib=2048\n";
    g_autoptr(CarrelPolicy) p = carrel_policy_load_data(text, strlen(text), NULL);

    assert_non_null(p);
    assert_true(carrel_policy_check_resources(p, 2, 2048, NULL));
    assert_false(carrel_policy_check_resources(p, 3, 1024, NULL));
    assert_false(carrel_policy_check_resources(p, 1, 4096, NULL));
}

static void
test_load_refusals(void **state)
{
    const char *bad[] = {
        "[resources]\nmax_vcpus=0\n",       "[resources]\nmax_vcpus=many\n",
        "[resources]\nmax_vcpus=1000\n",    "not a key file",
        "[resources]\nmax_memory_mib=-5\n",
    };

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelPolicy) p = carrel_policy_load_data(bad[i], strlen(bad[i]), &error);
        assert_null(p);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    }
}

static void
test_recording(void **state)
{
    const char *text = "[recording]\nenabled=true\nfps=4\nmax_mib=8\nsegment_s=10\n";
    const char *bad[] = {"[recording]\nfps=0\n",         "[recording]\nfps=11\n",
                         "[recording]\nmax_mib=4097\n",  "[recording]\nsegment_s=9\n",
                         "[recording]\nsegment_s=601\n", "[recording]\nenabled=maybe\n",
                         "[recording]\nmax_mib=lots\n"};
    g_autoptr(CarrelPolicy) def = carrel_policy_new_default();
    g_autoptr(CarrelPolicy) p = carrel_policy_load_data(text, strlen(text), NULL);
    const CarrelRecordingPolicy *r = carrel_policy_recording(def);

    assert_false(r->enabled);
    assert_int_equal(r->fps, 2);
    assert_int_equal(r->max_mib, 256);
    assert_int_equal(r->segment_s, 60);
    assert_non_null(p);
    r = carrel_policy_recording(p);
    assert_true(r->enabled);
    assert_int_equal(r->fps, 4);
    assert_int_equal(r->max_mib, 8);
    assert_int_equal(r->segment_s, 10);
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelPolicy) q = carrel_policy_load_data(bad[i], strlen(bad[i]), &error);
        assert_null(q);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
        assert_non_null(strstr(error->message, "[recording]"));
    }
}

static void
test_exit_paths(void **state)
{
    const char *text = "[artifacts]\npaths=/home/agent/out;/tmp/result.json\n";
    const char *bad[] = {"[artifacts]\npaths=relative/x\n", "[artifacts]\npaths=/a/../b\n",
                         "[artifacts]\npaths=/\n"};
    g_autoptr(CarrelPolicy) p = carrel_policy_load_data(text, strlen(text), NULL);
    g_autoptr(CarrelPolicy) none = carrel_policy_new_default();
    char *requested[] = {(char *)"/tmp/result.json", (char *)"/home/agent/log", NULL};
    g_auto(GStrv) merged = NULL;
    g_auto(GStrv) only = NULL;

    assert_non_null(p);
    merged = carrel_policy_exit_paths(p, requested);
    /* The policy's first, then the request's, each once. */
    assert_int_equal(g_strv_length(merged), 3);
    assert_string_equal(merged[0], "/home/agent/out");
    assert_string_equal(merged[1], "/tmp/result.json");
    assert_string_equal(merged[2], "/home/agent/log");
    only = carrel_policy_exit_paths(none, NULL);
    assert_int_equal(g_strv_length(only), 0);
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelPolicy) refused = carrel_policy_load_data(bad[i], strlen(bad[i]), &error);
        assert_null(refused);
        assert_non_null(strstr(error->message, "[artifacts] paths"));
    }
}

static const CarrelPrincipal admin = {(char *)"t-admin", (char *)"admin", CARREL_ROLE_ADMIN};
static const CarrelPrincipal agent_a = {(char *)"t-a", (char *)"agent-a", CARREL_ROLE_AGENT};
static const CarrelPrincipal agent_b = {(char *)"t-b", (char *)"agent-b", CARREL_ROLE_AGENT};
static const CarrelPrincipal reviewer = {(char *)"t-r", (char *)"rita", CARREL_ROLE_REVIEWER};

/* The error code of a decision, or -1 when allowed. */
static int
decide(const CarrelPolicy *p, const CarrelPrincipal *who, CarrelOp op,
       const CarrelPolicyTarget *target)
{
    g_autoptr(GError) error = NULL;

    if (carrel_policy_authorize(p, who, op, target, &error)) {
        assert_null(error);
        return -1;
    }
    assert_true(error->domain == CARREL_ERROR);
    return error->code;
}

/* The matrix, spelled out: a change to the table must change this test too. */
static void
test_role_matrix(void **state)
{
    g_autoptr(CarrelPolicy) p = carrel_policy_new_default();
    CarrelPolicyTarget mine = {.id = "s-1", .owner_id = "t-a"};
    CarrelPolicyTarget nobodys = {.id = "s-0"};
    const CarrelOp reviewer_may[] = {
        CARREL_OP_SESSION_LIST,      CARREL_OP_SESSION_READ,    CARREL_OP_SESSION_SCREENSHOT,
        CARREL_OP_ARTIFACT_READ,     CARREL_OP_CONSOLE_VIEW,    CARREL_OP_CONTROL_TAKE,
        CARREL_OP_CONTROL_RELEASE,   CARREL_OP_SESSION_PAUSE,   CARREL_OP_SESSION_RESUME,
        CARREL_OP_SESSION_HIBERNATE, CARREL_OP_SNAPSHOT_CREATE, CARREL_OP_SESSION_EXTRACT,
        CARREL_OP_APPROVAL_DECIDE,   CARREL_OP_APPROVAL_LIST,   CARREL_OP_AUDIT_READ,
        CARREL_OP_METRICS_READ,
    };
    const CarrelOp reviewer_never[] = {
        CARREL_OP_SESSION_CREATE, CARREL_OP_SESSION_EXEC,   CARREL_OP_SESSION_FILE_WRITE,
        CARREL_OP_SESSION_INPUT,  CARREL_OP_UPLOAD_CREATE,  CARREL_OP_SESSION_DESTROY,
        CARREL_OP_TOKEN_CREATE,   CARREL_OP_TEMPLATE_BUILD, CARREL_OP_INPUT_HOST_PATH,
    };
    const CarrelOp agent_never[] = {
        CARREL_OP_TEMPLATE_IMPORT, CARREL_OP_TEMPLATE_BUILD,  CARREL_OP_TEMPLATE_WARM,
        CARREL_OP_TEMPLATE_REMOVE, CARREL_OP_POOL_SET,        CARREL_OP_INPUT_HOST_PATH,
        CARREL_OP_TOKEN_LIST,      CARREL_OP_TOKEN_CREATE,    CARREL_OP_TOKEN_REVOKE,
        CARREL_OP_CONTROL_TAKE,    CARREL_OP_CONTROL_RELEASE, CARREL_OP_AUDIT_READ,
        CARREL_OP_APPROVAL_DECIDE, CARREL_OP_METRICS_READ,
    };

    /* Admin: everything but what only carreld observes. */
    for (int op = 0; op < CARREL_OP_LAST; op++) {
        if (op != CARREL_OP_SESSION_OBSERVE)
            assert_int_equal(decide(p, &admin, op, &mine), -1);
    }
    assert_int_equal(decide(p, carrel_principal_daemon(), CARREL_OP_SESSION_OBSERVE, &mine), -1);
    for (guint i = 0; i < G_N_ELEMENTS(reviewer_may); i++)
        assert_int_equal(decide(p, &reviewer, reviewer_may[i], &mine), -1);
    for (guint i = 0; i < G_N_ELEMENTS(reviewer_never); i++)
        assert_int_equal(decide(p, &reviewer, reviewer_never[i], &mine), CARREL_ERROR_FORBIDDEN);
    for (guint i = 0; i < G_N_ELEMENTS(agent_never); i++)
        assert_int_equal(decide(p, &agent_a, agent_never[i], &mine), CARREL_ERROR_FORBIDDEN);
    /* An agent on its own session, and on someone else's: that one does not exist for it. */
    assert_int_equal(decide(p, &agent_a, CARREL_OP_SESSION_EXEC, &mine), -1);
    assert_int_equal(decide(p, &agent_a, CARREL_OP_SESSION_DESTROY, &mine), -1);
    assert_int_equal(decide(p, &agent_b, CARREL_OP_SESSION_EXEC, &mine), CARREL_ERROR_NOT_FOUND);
    assert_int_equal(decide(p, &agent_b, CARREL_OP_SESSION_READ, &mine), CARREL_ERROR_NOT_FOUND);
    assert_int_equal(decide(p, &agent_b, CARREL_OP_CONSOLE_VIEW, &mine), CARREL_ERROR_NOT_FOUND);
    assert_int_equal(decide(p, &agent_b, CARREL_OP_SESSION_CREATE, NULL), -1);
    /* Sessions of nobody (made before owners) are admins' and reviewers' only. */
    assert_int_equal(decide(p, &agent_a, CARREL_OP_SESSION_READ, &nobodys), CARREL_ERROR_NOT_FOUND);
    assert_int_equal(decide(p, &reviewer, CARREL_OP_SESSION_READ, &nobodys), -1);
    /* Lists: an agent sees its own. */
    assert_true(carrel_policy_may_see(p, &agent_a, CARREL_OP_SESSION_LIST, "t-a"));
    assert_false(carrel_policy_may_see(p, &agent_a, CARREL_OP_SESSION_LIST, "t-b"));
    assert_false(carrel_policy_may_see(p, &agent_a, CARREL_OP_SESSION_LIST, NULL));
    assert_true(carrel_policy_may_see(p, &reviewer, CARREL_OP_SESSION_LIST, "t-b"));
}

/* While a person holds the session, agents' mutating verbs and anyone else's input wait. */
static void
test_lease_binds(void **state)
{
    g_autoptr(CarrelPolicy) p = carrel_policy_new_default();
    CarrelPolicyTarget held = {.id = "s-1",
                               .owner_id = "t-a",
                               .lease_holder_id = "t-r",
                               .lease_holder_label = "rita",
                               .lease_since = 1764583200};
    const CarrelOp bound[] = {
        CARREL_OP_SESSION_INPUT,   CARREL_OP_SESSION_EXEC,  CARREL_OP_SESSION_FILE_WRITE,
        CARREL_OP_SNAPSHOT_REVERT, CARREL_OP_SESSION_PAUSE, CARREL_OP_SESSION_HIBERNATE,
        CARREL_OP_SESSION_STOP,    CARREL_OP_SESSION_FORK,  CARREL_OP_SESSION_DESTROY,
    };
    g_autoptr(GError) error = NULL;

    for (guint i = 0; i < G_N_ELEMENTS(bound); i++)
        assert_int_equal(decide(p, &agent_a, bound[i], &held), CARREL_ERROR_WRONG_STATE);
    assert_false(carrel_policy_authorize(p, &agent_a, CARREL_OP_SESSION_DESTROY, &held, &error));
    assert_non_null(strstr(error->message, "session under human control: 'rita'"));
    /* Looking stays allowed; an admin may still inspect, never type; nor may the holder's own
     * token (the person is at the console). */
    assert_int_equal(decide(p, &agent_a, CARREL_OP_SESSION_SCREENSHOT, &held), -1);
    assert_int_equal(decide(p, &agent_a, CARREL_OP_SESSION_READ, &held), -1);
    assert_int_equal(decide(p, &reviewer, CARREL_OP_SESSION_PAUSE, &held), -1);
    assert_int_equal(decide(p, &admin, CARREL_OP_SESSION_EXEC, &held), -1);
    assert_int_equal(decide(p, &admin, CARREL_OP_SESSION_INPUT, &held), CARREL_ERROR_WRONG_STATE);
    assert_int_equal(decide(p, &reviewer, CARREL_OP_SESSION_INPUT, &held), CARREL_ERROR_FORBIDDEN);
    assert_int_equal(decide(p, carrel_principal_daemon(), CARREL_OP_SESSION_DESTROY, &held), -1);
}

/* [roles] overrides one cell; nonsense is refused with the key named. */
static void
test_role_overrides(void **state)
{
    const char *text = "[roles]\nreviewer.session.exec=yes\nagent.session.create=no\n";
    const char *bad[] = {
        "[roles]\nadmin.session.exec=no\n",    "[roles]\nagent.session.fly=yes\n",
        "[roles]\nagent.session.exec=maybe\n", "[roles]\nagent=yes\n",
        "[roles]\ncarreld.session.exec=no\n",
    };
    g_autoptr(CarrelPolicy) p = carrel_policy_load_data(text, strlen(text), NULL);
    g_autoptr(JsonNode) matrix = NULL;
    JsonObject *row;

    assert_non_null(p);
    assert_int_equal(carrel_policy_grant(p, CARREL_ROLE_REVIEWER, CARREL_OP_SESSION_EXEC),
                     CARREL_GRANT_ANY);
    assert_int_equal(decide(p, &agent_a, CARREL_OP_SESSION_CREATE, NULL), CARREL_ERROR_FORBIDDEN);
    matrix = carrel_policy_matrix_to_json(p);
    row = json_object_get_object_member(json_node_get_object(matrix), "session.exec");
    assert_string_equal(json_object_get_string_member(row, "reviewer"), "yes");
    assert_string_equal(json_object_get_string_member(row, "agent"), "own");
    assert_string_equal(json_object_get_string_member(row, "lease"), "agents");
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelPolicy) refused = carrel_policy_load_data(bad[i], strlen(bad[i]), &error);
        assert_null(refused);
        assert_non_null(strstr(error->message, "[roles]"));
    }
}

/* The default matrix as README.md prints it, one row per operation in the enum's order. */
static char *
matrix_markdown(void)
{
    g_autoptr(CarrelPolicy) p = carrel_policy_new_default();
    g_autoptr(JsonNode) matrix = carrel_policy_matrix_to_json(p);
    GString *md = g_string_new("| operation | admin | agent | reviewer | control lease binds |\n"
                               "| --- | --- | --- | --- | --- |\n");

    for (int op = 0; op < CARREL_OP_LAST; op++) {
        JsonObject *row = json_object_get_object_member(json_node_get_object(matrix),
                                                        carrel_op_to_string((CarrelOp)op));
        const char *lease = json_object_get_string_member(row, "lease");

        g_string_append_printf(
            md, "| `%s` | %s | %s | %s | %s |\n", carrel_op_to_string((CarrelOp)op),
            json_object_get_string_member(row, "admin"),
            json_object_get_string_member(row, "agent"),
            json_object_get_string_member(row, "reviewer"), g_str_equal(lease, "no") ? "" : lease);
    }
    return g_string_free(md, FALSE);
}

/* README.md prints the matrix in force: a change to one without the other fails here
 * (CARREL_TEST_REGENERATE=1 rewrites the README's table). */
static void
test_readme_matrix(void **state)
{
    g_autofree char *readme =
        g_build_filename(g_getenv("CARREL_TEST_DATA"), "..", "..", "README.md", NULL);
    g_autofree char *text = NULL;
    g_autofree char *table = matrix_markdown();
    const char *begin_mark = "<!-- roles:begin -->\n";
    char *begin, *end;

    assert_true(g_file_get_contents(readme, &text, NULL, NULL));
    begin = strstr(text, begin_mark);
    end = begin ? strstr(begin, "<!-- roles:end -->") : NULL;
    assert_non_null(end);
    begin += strlen(begin_mark);
    if (g_getenv("CARREL_TEST_REGENERATE")) {
        g_autofree char *head = g_strndup(text, begin - text);
        g_autofree char *out = g_strconcat(head, table, end, NULL);
        assert_true(g_file_set_contents(readme, out, -1, NULL));
        return;
    }
    if ((gsize)(end - begin) != strlen(table) || strncmp(begin, table, end - begin) != 0)
        fail_msg("README.md's role matrix differs from the policy's; expected:\n%s", table);
}

/* A set: files by name, the built-in default until a file called default comes, sorted lists,
 * and the JSON `carrel policy show` prints. */
static void
test_policy_set(void **state)
{
    g_autoptr(CarrelPolicySet) set = carrel_policy_set_new();
    g_autoptr(GPtrArray) list = NULL;
    g_autoptr(JsonNode) json = NULL;
    g_autofree char *text = NULL;
    g_autoptr(GError) error = NULL;
    const char *small = "[resources]\nmax_vcpus=1\n[timeouts]\nttl_s=60\non_expiry=stop\n"
                        "[artifacts]\npaths=/tmp/out\n";
    const char *wide = "[resources]\nmax_vcpus=8\n";
    const char *roles = "[roles]\nagent.session.exec=no\n";

    assert_string_equal(carrel_policy_get_name(carrel_policy_set_get_default(set)), "default");
    assert_true(carrel_policy_set_add(set, "wide", wide, strlen(wide), &error));
    assert_true(carrel_policy_set_add(set, "small", small, strlen(small), &error));
    assert_false(carrel_policy_set_add(set, "small", small, strlen(small), &error));
    assert_non_null(strstr(error->message, "loaded twice"));
    g_clear_error(&error);
    assert_false(carrel_policy_set_add(set, "s-x/../y", small, strlen(small), &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    assert_false(carrel_policy_set_add(set, "wide2", roles, strlen(roles), &error));
    assert_non_null(strstr(error->message, "[roles] belongs in default.policy"));
    g_clear_error(&error);
    assert_false(carrel_policy_set_add(set, "wide3", "[limits]\nrate=1\n", 16, &error));
    assert_non_null(strstr(error->message, "[limits] belongs in default.policy"));
    g_clear_error(&error);
    assert_null(carrel_policy_set_lookup(set, "nope"));
    list = carrel_policy_set_list(set);
    assert_int_equal(list->len, 3);
    assert_string_equal(carrel_policy_get_name(list->pdata[0]), "default");
    assert_string_equal(carrel_policy_get_name(list->pdata[1]), "small");
    assert_string_equal(carrel_policy_get_name(list->pdata[2]), "wide");
    json = carrel_policy_to_json(carrel_policy_set_lookup(set, "small"));
    text = json_to_string(json, FALSE);
    assert_string_equal(
        text,
        "{\"name\":\"small\",\"resources\":{\"max_vcpus\":1,"
        "\"max_memory_mib\":8192,\"max_disk_gib\":null},\"artifacts\":{\"paths\":[\"/tmp/out\"]},"
        "\"timeouts\":{\"ttl_s\":60,\"idle_timeout_s\":null,"
        "\"on_expiry\":\"stop\"},\"network\":{\"mode\":\"none\",\"allow\":[],"
        "\"deny\":[],\"ask\":[],\"ask_timeout_s\":120},\"secrets\":[],\"console\":{\"record_typed_"
        "text\":false},"
        "\"recording\":{\"enabled\":false,\"fps\":2,\"max_mib\":256,\"segment_s\":60}}");
    /* A file called default takes the built-in one's place, [roles] and all. */
    assert_true(carrel_policy_set_add(set, "default", roles, strlen(roles), &error));
    assert_int_equal(carrel_policy_grant(carrel_policy_set_get_default(set), CARREL_ROLE_AGENT,
                                         CARREL_OP_SESSION_EXEC),
                     CARREL_GRANT_NONE);
    g_clear_pointer(&list, g_ptr_array_unref);
    list = carrel_policy_set_list(set);
    assert_int_equal(list->len, 3);
}

/* [network]: what loads, what is refused and why, and the JSON of a loaded one. */
static void
test_network_load(void **state)
{
    static const struct {
        const char *text;
        const char *says; /* NULL: loads */
    } cases[] = {
        {"[network]\nmode=allowlist\nallow=example.com, *.example.org, api.example.net:8443\n",
         NULL},
        {"[network]\nmode=open\ndeny=bad.test\nask=ask.test\nask_timeout_s=30\n", NULL},
        {"[network]\nmode=allowlist\nallow=Example.COM.;b.test\n", NULL},
        {"[network]\nmode=everything\n", "mode must be none, allowlist or open"},
        {"[network]\nmode=allowlist\nallow=10.0.0.1\n", "private or special address"},
        {"[network]\nmode=allowlist\nallow=192.168.0.0/16\n", "private or special address"},
        {"[network]\nmode=allowlist\nallow=169.254.169.254:80\n", "private or special address"},
        {"[network]\nmode=allowlist\nallow=fd00::1\n", "private or special address"},
        {"[network]\nmode=allowlist\nallow=8.8.8.8\n", "names, not addresses"},
        {"[network]\nmode=allowlist\nallow=exa mple.com\n", "expected NAME"},
        {"[network]\nmode=allowlist\nallow=*\n", "expected NAME"},
        {"[network]\nmode=allowlist\nallow=a.*.example.com\n", "expected NAME"},
        {"[network]\nmode=allowlist\nallow=-a.example.com\n", "expected NAME"},
        {"[network]\nmode=allowlist\nallow=example.com:0\n", "port must be a number"},
        {"[network]\nmode=allowlist\nallow=example.com:http\n", "port must be a number"},
        {"[network]\nallow=example.com\n", "need mode=allowlist or mode=open"},
        {"[network]\nmode=open\nask_timeout_s=0\n", "ask_timeout_s must be an integer"},
        {"[network]\nmode=open\nproxy=x\n", "has no key 'proxy'"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelPolicy) p =
            carrel_policy_load_data(cases[i].text, strlen(cases[i].text), &error);

        if (!cases[i].says) {
            if (!p)
                fail_msg("case %zu: %s", i, error->message);
            continue;
        }
        assert_null(p);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
        if (!strstr(error->message, cases[i].says))
            fail_msg("case %zu: '%s' does not say '%s'", i, error->message, cases[i].says);
    }
    {
        const char *text = "[network]\nmode=allowlist\nallow=Example.COM., *.b.test:8443\n"
                           "ask=ask.test\n";
        g_autoptr(CarrelPolicy) p = carrel_policy_load_data(text, strlen(text), NULL);
        g_autoptr(JsonNode) json = NULL;
        g_autofree char *out = NULL;
        JsonObject *network;

        assert_non_null(p);
        json = carrel_policy_to_json(p);
        network = json_object_get_object_member(json_node_get_object(json), "network");
        out = json_to_string(json_object_get_member(json_node_get_object(json), "network"), FALSE);
        assert_non_null(network);
        assert_string_equal(out, "{\"mode\":\"allowlist\",\"allow\":[\"example.com\","
                                 "\"*.b.test:8443\"],\"deny\":[],\"ask\":[\"ask.test\"],"
                                 "\"ask_timeout_s\":120}");
    }
}

/* The decision, case by case: deny wins, then allow, then ask, then the mode. */
static void
test_network_decide(void **state)
{
    const char *allowlist = "[network]\nmode=allowlist\n"
                            "allow=allowed.test, *.wild.test, api.test:8443, both.test\n"
                            "deny=bad.wild.test, both.test\nask=ask.test\n";
    const char *open = "[network]\nmode=open\ndeny=other.test\n";
    g_autoptr(CarrelPolicy) a = carrel_policy_load_data(allowlist, strlen(allowlist), NULL);
    g_autoptr(CarrelPolicy) o = carrel_policy_load_data(open, strlen(open), NULL);
    g_autoptr(CarrelPolicy) none = carrel_policy_new_default();
    static const struct {
        int which; /* 0 allowlist, 1 open, 2 none */
        const char *host;
        guint port;
        CarrelEgressVerdict want;
    } cases[] = {
        {0, "allowed.test", 443, CARREL_EGRESS_ALLOW},
        {0, "allowed.test", 80, CARREL_EGRESS_ALLOW},
        {0, "ALLOWED.test.", 443, CARREL_EGRESS_ALLOW},
        {0, "allowed.test", 0, CARREL_EGRESS_ALLOW},
        {0, "allowed.test", 8080, CARREL_EGRESS_DENY},
        {0, "x.allowed.test", 443, CARREL_EGRESS_DENY},
        {0, "a.wild.test", 443, CARREL_EGRESS_ALLOW},
        {0, "a.b.wild.test", 80, CARREL_EGRESS_ALLOW},
        {0, "wild.test", 443, CARREL_EGRESS_DENY},
        {0, "xwild.test", 443, CARREL_EGRESS_DENY},
        {0, "bad.wild.test", 443, CARREL_EGRESS_DENY},
        {0, "api.test", 8443, CARREL_EGRESS_ALLOW},
        {0, "api.test", 443, CARREL_EGRESS_DENY},
        {0, "both.test", 443, CARREL_EGRESS_DENY},
        {0, "ask.test", 443, CARREL_EGRESS_ASK},
        {0, "other.test", 443, CARREL_EGRESS_DENY},
        {0, "203.0.113.7", 443, CARREL_EGRESS_DENY},
        {0, "", 443, CARREL_EGRESS_DENY},
        {0, "a..test", 443, CARREL_EGRESS_DENY},
        {1, "anything.example", 443, CARREL_EGRESS_ALLOW},
        {1, "other.test", 443, CARREL_EGRESS_DENY},
        {1, "8.8.8.8", 53, CARREL_EGRESS_DENY},
        {2, "allowed.test", 443, CARREL_EGRESS_DENY},
    };
    const CarrelPolicy *policies[] = {a, o, none};

    assert_non_null(a);
    assert_non_null(o);
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        CarrelEgressVerdict got =
            carrel_policy_egress(policies[cases[i].which], cases[i].host, cases[i].port);
        if (got != cases[i].want)
            fail_msg("case %zu (%s:%u): %d, not %d", i, cases[i].host, cases[i].port, got,
                     cases[i].want);
    }
    assert_null(carrel_policy_egress(a, NULL, 443) == CARREL_EGRESS_DENY ? NULL : "x");
    assert_int_equal(carrel_policy_network_mode(none), CARREL_NETWORK_NONE);
    assert_int_equal(carrel_policy_ask_timeout_s(a), 120);
}

/* [secrets]: what loads, what is refused, and where a header goes. */
static void
test_secrets(void **state)
{
    static const char net[] = "[network]\nmode=allowlist\nallow=secret.test, api.test:8443\n";
    static const struct {
        const char *secrets;
        const char *says; /* NULL: loads */
    } cases[] = {
        {"api.source=file:/etc/carrel/api\napi.destinations=secret.test\napi.header=Authorization\n"
         "api.format=Bearer {value}\n",
         NULL},
        {"typed.source=env:TYPED_SECRET\n", NULL},
        {"api.source=file:relative\n", "must be file:/ABSOLUTE/PATH"},
        {"api.source=env:lower\n", "must be file:/ABSOLUTE/PATH"},
        {"api.destinations=secret.test\n", "needs api.source"},
        {"api.source=env:A\napi.header=Host\napi.destinations=secret.test\n",
         "not a header a credential goes in"},
        {"api.source=env:A\napi.header=X Y\napi.destinations=secret.test\n",
         "not a header a credential goes in"},
        {"api.source=env:A\napi.header=Authorization\n", "has a header but no destinations"},
        {"api.source=env:A\napi.header=Authorization\napi.destinations=other.test\n",
         "which [network] does not allow"},
        {"api.source=env:A\napi.header=Authorization\napi.destinations=10.0.0.1\n",
         "private or special address"},
        {"api.source=env:A\napi.header=A\napi.destinations=secret.test\napi.format=Bearer\n",
         "must hold {value} once"},
        {"api.source=env:A\napi.header=A\napi.destinations=secret.test\napi.format=%{value}\n",
         "must hold {value} once"},
        {"Bad.source=env:A\n", "keys are NAME.source"},
        {"api.value=x\n", "keys are NAME.source"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *text = g_strconcat(net, "[secrets]\n", cases[i].secrets, NULL);
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelPolicy) p = carrel_policy_load_data(text, strlen(text), &error);

        if (!cases[i].says) {
            if (!p)
                fail_msg("case %zu: %s", i, error->message);
            continue;
        }
        assert_null(p);
        if (!strstr(error->message, cases[i].says))
            fail_msg("case %zu: '%s' does not say '%s'", i, error->message, cases[i].says);
    }
    {
        g_autofree char *text = g_strconcat(net, "[secrets]\n", cases[0].secrets, NULL);
        g_autoptr(CarrelPolicy) p = carrel_policy_load_data(text, strlen(text), NULL);
        const CarrelPolicySecret *s = carrel_policy_secret_for(p, "secret.test", 443);
        g_autofree char *value = NULL;
        g_autoptr(JsonNode) json = carrel_policy_to_json(p);
        g_autofree char *shown = json_to_string(json, FALSE);

        assert_non_null(s);
        assert_null(carrel_policy_secret_for(p, "api.test", 8443));
        assert_null(carrel_policy_secret_for(p, "x.secret.test", 443));
        value = carrel_policy_secret_header_value(s, "XYZ");
        assert_string_equal(value, "Bearer XYZ");
        assert_ptr_equal(carrel_policy_secret_named(p, "api"), s);
        assert_non_null(strstr(shown, "\"secrets\":[{\"name\":\"api\",\"source\":"
                                      "\"file:/etc/carrel/api\",\"header\":\"Authorization\","
                                      "\"destinations\":[\"secret.test\"]}]"));
    }
}

/* [limits]: generous defaults, each key read, nonsense refused with the key named. */
static void
test_limits(void **state)
{
    g_autoptr(CarrelPolicy) builtin = carrel_policy_new_default();
    const char *text = "[limits]\nsessions=3\ncreates=2\nrate=7\nburst=9\n";
    g_autoptr(CarrelPolicy) set = carrel_policy_load_data(text, strlen(text), NULL);
    const char *bad[] = {"[limits]\nsessions=0\n", "[limits]\ncreates=-1\n",
                         "[limits]\nrate=fast\n", "[limits]\nburst=99999999999\n"};
    const CarrelLimits *l = carrel_policy_limits(builtin);

    assert_int_equal(l->sessions, 64);
    assert_int_equal(l->creates, 8);
    assert_int_equal(l->rate, 50);
    assert_int_equal(l->burst, 200);
    assert_non_null(set);
    l = carrel_policy_limits(set);
    assert_int_equal(l->sessions, 3);
    assert_int_equal(l->creates, 2);
    assert_int_equal(l->rate, 7);
    assert_int_equal(l->burst, 9);
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(CarrelPolicy) p = carrel_policy_load_data(bad[i], strlen(bad[i]), &error);

        assert_null(p);
        assert_non_null(strstr(error->message, "[limits] "));
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default),        cmocka_unit_test(test_load),
        cmocka_unit_test(test_load_refusals),  cmocka_unit_test(test_exit_paths),
        cmocka_unit_test(test_role_matrix),    cmocka_unit_test(test_lease_binds),
        cmocka_unit_test(test_role_overrides), cmocka_unit_test(test_readme_matrix),
        cmocka_unit_test(test_policy_set),     cmocka_unit_test(test_limits),
        cmocka_unit_test(test_network_load),   cmocka_unit_test(test_network_decide),
        cmocka_unit_test(test_secrets),        cmocka_unit_test(test_recording),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
