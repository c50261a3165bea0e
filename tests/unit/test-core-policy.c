/*
 * core's named policies: a create picks one (or gets "default"), a token may be limited to some,
 * forks keep their origin's, and the folder's files are checked at start.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "core-fixture.h"

/* An agent token limited to policies (NULL: any), and its principal as authenticate makes it. */
static CarrelPrincipal *
agent(Fixture *fx, const char *name, char **policies)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *secret =
        carrel_manager_token_create(fx->mgr, ADMIN, "agent", name, 0, policies, NULL, &error);
    CarrelPrincipal *who;

    if (!secret)
        fail_msg("token: %s", error->message);
    who = carrel_manager_authenticate(fx->mgr, secret, &error);
    assert_non_null(who);
    return who;
}

static CarrelSession *
create_under(Fixture *fx, const CarrelPrincipal *who, const char *policy, guint memory_mib,
             GError **error)
{
    CarrelSessionRequest req = {
        .template_name = (char *)"tiny", .policy = (char *)policy, .memory_mib = memory_mib};

    return carrel_manager_session_create(fx->mgr, who, &req, error);
}

static guint
session_count(Fixture *fx)
{
    g_autoptr(GPtrArray) all = carrel_manager_session_list(fx->mgr, ADMIN, TRUE, NULL);

    assert_non_null(all);
    return all->len;
}

static void
test_create_under_a_policy(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) plain = create_under(fx, ADMIN, NULL, 2048, &error);
    g_autoptr(CarrelSession) small = NULL;

    assert_non_null(plain);
    assert_string_equal(plain->policy, "default");
    assert_int_equal(plain->expires_at, 0);
    /* The small policy's limits, time limit and exit paths apply; a bigger machine is refused. */
    assert_null(create_under(fx, ADMIN, "small", 2048, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED));
    assert_non_null(strstr(error->message, "at most 1024"));
    g_clear_error(&error);
    small = create_under(fx, ADMIN, "small", 0, &error);
    assert_non_null(small);
    assert_string_equal(small->policy, "small");
    assert_true(small->expires_at > 0 && small->expires_at <= small->created_at + 600);
    assert_true(g_strv_contains((const char *const *)small->exit_paths, "/tmp/out"));
    /* An unknown policy: nothing is made. */
    assert_null(create_under(fx, ADMIN, "nope", 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    assert_non_null(strstr(error->message, "no policy named 'nope'"));
    assert_int_equal(session_count(fx), 2);
}

static void
test_token_limited_to_policies(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    char *only_small[] = {(char *)"small", NULL};
    g_autoptr(CarrelPrincipal) limited = agent(fx, "limited", only_small);
    g_autoptr(CarrelPrincipal) free_agent = agent(fx, "free", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) implied = NULL;
    g_autoptr(CarrelSession) any = NULL;
    g_autoptr(CarrelSnapshot) snap = NULL;
    g_autoptr(GPtrArray) forks = NULL;
    g_autoptr(JsonNode) seen = NULL;
    g_autoptr(JsonNode) all = NULL;

    assert_non_null(limited->policies);
    /* Without a policy named, the token's only one; "default" is refused, naming the allowed. */
    implied = create_under(fx, limited, NULL, 0, &error);
    assert_non_null(implied);
    assert_string_equal(implied->policy, "small");
    assert_null(create_under(fx, limited, "default", 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED));
    assert_non_null(strstr(error->message, "only under the policies small"));
    g_clear_error(&error);
    any = create_under(fx, free_agent, "small", 0, &error);
    assert_non_null(any);
    /* A fork keeps its origin's policy. */
    snap = carrel_manager_snapshot_create(fx->mgr, limited, implied->id, "s1", &error);
    assert_non_null(snap);
    forks = carrel_manager_session_fork(fx->mgr, limited, implied->id, "s1", 1, &error);
    if (!forks)
        fail_msg("fork: %s", error->message);
    assert_string_equal(((CarrelSession *)forks->pdata[0])->policy, "small");
    /* The limited token sees its policies alone. */
    seen = carrel_manager_policy_list(fx->mgr, limited, &error);
    assert_int_equal(
        json_array_get_length(json_object_get_array_member(json_node_get_object(seen), "policies")),
        1);
    all = carrel_manager_policy_list(fx->mgr, free_agent, &error);
    assert_int_equal(
        json_array_get_length(json_object_get_array_member(json_node_get_object(all), "policies")),
        2);
    assert_null(carrel_manager_policy_show(fx->mgr, limited, "default", &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
}

static void
test_token_policy_refusals(void **state)
{
    Fixture *fx = *state;
    char *unknown[] = {(char *)"nope", NULL};
    char *small[] = {(char *)"small", NULL};
    char *none[] = {NULL};
    g_autoptr(GError) error = NULL;

    assert_null(
        carrel_manager_token_create(fx->mgr, ADMIN, "agent", "a1", 0, unknown, NULL, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    g_clear_error(&error);
    assert_null(carrel_manager_token_create(fx->mgr, ADMIN, "agent", "a2", 0, none, NULL, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    g_clear_error(&error);
    assert_null(
        carrel_manager_token_create(fx->mgr, ADMIN, "reviewer", "r1", 0, small, NULL, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
}

/* A policy with network needs carreld's egress path: without one (no --egress-dns) the create
 * fails, saying so, and leaves nothing; its address is not kept either. */
static void
test_network_without_path(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autofree char *dir = g_build_filename(fx->dir, "policies", NULL);
    g_autofree char *web = g_build_filename(dir, "web.policy", NULL);
    g_autoptr(CarrelPolicySet) set = NULL;
    g_autoptr(GError) error = NULL;

    assert_true(carrel_util_write_file(web, "[network]\nmode=allowlist\nallow=allowed.test\n", -1,
                                       0644, NULL));
    set = carrel_manager_load_policies(dir, NULL, &error);
    assert_non_null(set);
    carrel_policy_set_free(fx->mgr->policies);
    fx->mgr->policies = g_steal_pointer(&set);
    fx->mgr->policy = carrel_policy_set_get_default(fx->mgr->policies);
    for (int i = 0; i < 2; i++) {
        assert_null(create_under(fx, ADMIN, "web", 0, &error));
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_FAILED));
        assert_non_null(strstr(error->message, "--egress-dns"));
        g_clear_error(&error);
    }
    assert_int_equal(session_count(fx), 0);
    assert_int_equal(g_hash_table_size(fx->mgr->egress_sources), 0);
}

/* A secret's value comes from a root-only file or the environment; anything else stops the
 * start, naming the secret and never its value. */
static void
test_secret_values(void **state)
{
    Fixture *fx = *state;
    g_autofree char *dir = g_build_filename(fx->dir, "secret-policies", NULL);
    g_autofree char *file = g_build_filename(fx->dir, "api-secret", NULL);
    g_autofree char *policy = g_build_filename(dir, "web.policy", NULL);
    g_autofree char *text = g_strdup_printf(
        "[network]\nmode=allowlist\nallow=secret.test\n[secrets]\napi.source=file:%s\n"
        "api.destinations=secret.test\napi.header=Authorization\nenv.source=env:CARREL_TEST_S\n",
        file);
    g_autoptr(CarrelPolicySet) set = NULL;
    g_autoptr(GHashTable) values = NULL;
    g_autoptr(GError) error = NULL;

    assert_int_equal(g_mkdir_with_parents(dir, 0755), 0);
    assert_true(carrel_util_write_file(policy, text, -1, 0644, NULL));
    assert_true(carrel_util_write_file(file, "s3cret-value\n", -1, 0644, NULL));
    set = carrel_manager_load_policies(dir, NULL, &error);
    assert_non_null(set);
    g_setenv("CARREL_TEST_S", "from-env", TRUE);
    /* Readable by others: refused, naming the file, not the value. */
    assert_null(carrel_manager_load_secret_values(set, &error));
    assert_non_null(strstr(error->message, "readable by others"));
    assert_null(strstr(error->message, "s3cret"));
    g_clear_error(&error);
    assert_int_equal(chmod(file, 0600), 0);
    values = carrel_manager_load_secret_values(set, &error);
    if (!values)
        fail_msg("values: %s", error->message);
    assert_string_equal(g_hash_table_lookup(values, "web/api"), "s3cret-value");
    assert_string_equal(g_hash_table_lookup(values, "web/env"), "from-env");
    g_clear_pointer(&values, g_hash_table_unref);
    /* A variable carreld does not have. */
    g_unsetenv("CARREL_TEST_S");
    assert_null(carrel_manager_load_secret_values(set, &error));
    assert_non_null(strstr(error->message, "has no CARREL_TEST_S"));
    g_clear_error(&error);
    /* A link is not a file of root's own. */
    {
        g_autofree char *link = g_build_filename(fx->dir, "link", NULL);
        g_setenv("CARREL_TEST_S", "from-env", TRUE);
        assert_int_equal(symlink(file, link), 0);
        assert_int_equal(g_unlink(file), 0);
        assert_int_equal(symlink(link, file), 0);
        assert_null(carrel_manager_load_secret_values(set, &error));
        assert_non_null(strstr(error->message, "not a regular file"));
    }
}

/* type_secret types the value of a secret of the session's policy; the reply, the timeline and
 * the audit log name it and never hold the value. */
static void
test_type_secret(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autofree char *dir = g_build_filename(fx->dir, "typing-policies", NULL);
    g_autofree char *file = g_build_filename(dir, "typing.policy", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = NULL;
    g_autoptr(JsonNode) one = NULL, batch = NULL, unknown = NULL, reply = NULL, again = NULL;
    g_autoptr(GPtrArray) events = NULL;
    g_autoptr(JsonNode) audit = NULL;
    g_autoptr(GString) all = g_string_new(NULL);
    g_autofree char *text = NULL;
    const char *value = "Typed-Secret-42";

    g_setenv("CARREL_TEST_TYPED", value, TRUE);
    assert_int_equal(g_mkdir_with_parents(dir, 0755), 0);
    assert_true(carrel_util_write_file(file, "[secrets]\ntyped.source=env:CARREL_TEST_TYPED\n", -1,
                                       0644, NULL));
    carrel_policy_set_free(fx->mgr->policies);
    fx->mgr->policies = carrel_manager_load_policies(dir, NULL, &error);
    assert_non_null(fx->mgr->policies);
    fx->mgr->policy = carrel_policy_set_get_default(fx->mgr->policies);
    g_hash_table_unref(fx->mgr->secret_values);
    fx->mgr->secret_values = carrel_manager_load_secret_values(fx->mgr->policies, &error);
    assert_non_null(fx->mgr->secret_values);
    s = create_under(fx, ADMIN, "typing", 0, &error);
    if (!s)
        fail_msg("create: %s", error->message);
    one = json_from_string("{\"action\":\"type_secret\",\"name\":\"typed\"}", NULL);
    reply = carrel_manager_session_computer(fx->mgr, ADMIN, s->id, one, &error);
    if (!reply)
        fail_msg("type_secret: %s", error->message);
    text = json_to_string(reply, FALSE);
    assert_null(strstr(text, value));
    assert_non_null(strstr(text, "\"action\":\"type_secret\",\"duration_ms\""));
    assert_non_null(strstr(text, "\"secret\":\"typed\""));
    g_free(text);
    /* After it, in the same batch, what is looked at is marked. */
    batch = json_from_string("{\"actions\":[{\"action\":\"type_secret\",\"name\":\"typed\"},"
                             "{\"action\":\"screenshot\"}]}",
                             NULL);
    again = carrel_manager_session_computer(fx->mgr, ADMIN, s->id, batch, &error);
    if (!again)
        fail_msg("batch: %s", error->message);
    text = json_to_string(again, FALSE);
    assert_null(strstr(text, value));
    assert_non_null(strstr(text, "\"after_type_secret\":\"typed\""));
    /* A name the policy does not have. */
    unknown = json_from_string("{\"action\":\"type_secret\",\"name\":\"nope\"}", NULL);
    assert_null(carrel_manager_session_computer(fx->mgr, ADMIN, s->id, unknown, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    assert_non_null(strstr(error->message, "no secret 'nope'"));
    /* Neither the timeline nor the audit log hold the value. */
    events = carrel_manager_session_events(fx->mgr, ADMIN, s->id, 0, 1000, NULL);
    assert_non_null(events);
    for (guint i = 0; i < events->len; i++) {
        g_autoptr(JsonNode) ev = carrel_event_to_json(g_ptr_array_index(events, i));
        g_autofree char *t = json_to_string(ev, FALSE);
        g_string_append(all, t);
    }
    assert_non_null(strstr(all->str, "type_secret"));
    assert_null(strstr(all->str, value));
    {
        CarrelAuditQuery q = {0};
        g_autofree char *a = NULL;
        audit = carrel_manager_audit_list(fx->mgr, ADMIN, &q, NULL);
        assert_non_null(audit);
        a = json_to_string(audit, FALSE);
        assert_null(strstr(a, value));
    }
}

/* Each bad folder stops the start, naming the file. */
static void
test_load_refusals(void **state)
{
    Fixture *fx = *state;
    static const struct {
        const char *file;
        const char *text;
        const char *says;
    } cases[] = {
        {"bad.policy", "[resources]\nmax_vcpus=0\n", "bad.policy"},
        {"roles.policy", "[roles]\nagent.session.exec=no\n", "[roles] belongs in default.policy"},
        {"Upper.policy", "", "policy name 'Upper' is not valid"},
        {"broken.policy", "not a key file", "malformed policy"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *dir = g_build_filename(fx->dir, cases[i].file, NULL);
        g_autofree char *path = g_build_filename(dir, cases[i].file, NULL);
        g_autoptr(GError) error = NULL;

        assert_int_equal(g_mkdir_with_parents(dir, 0755), 0);
        assert_true(carrel_util_write_file(path, cases[i].text, -1, 0644, NULL));
        assert_null(carrel_manager_load_policies(dir, NULL, &error));
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
        if (!strstr(error->message, cases[i].says))
            fail_msg("%s: %s", cases[i].file, error->message);
    }
    {
        g_autoptr(GError) error = NULL;
        g_autofree char *missing = g_build_filename(fx->dir, "no-such-folder", NULL);

        assert_null(carrel_manager_load_policies(missing, NULL, &error));
        assert_non_null(strstr(error->message, "policy folder"));
    }
}

/* --policy FILE stands in for the folder's default.policy, whose [roles] set the matrix. */
static void
test_default_file_over_folder(void **state)
{
    Fixture *fx = *state;
    g_autofree char *dir = g_build_filename(fx->dir, "both", NULL);
    g_autofree char *in_dir = g_build_filename(dir, "default.policy", NULL);
    g_autofree char *file = g_build_filename(fx->dir, "mine.policy", NULL);
    g_autoptr(CarrelPolicySet) set = NULL;
    g_autoptr(GError) error = NULL;

    assert_int_equal(g_mkdir_with_parents(dir, 0755), 0);
    assert_true(carrel_util_write_file(in_dir, "[resources]\nmax_vcpus=0\n", -1, 0644, NULL));
    assert_true(carrel_util_write_file(file,
                                       "[resources]\nmax_vcpus=2\n[roles]\n"
                                       "agent.session.exec=no\n",
                                       -1, 0644, NULL));
    set = carrel_manager_load_policies(dir, file, &error);
    if (!set)
        fail_msg("load: %s", error->message);
    assert_false(carrel_policy_check_resources(carrel_policy_set_get_default(set), 3, 512, NULL));
    assert_int_equal(carrel_policy_grant(carrel_policy_set_get_default(set), CARREL_ROLE_AGENT,
                                         CARREL_OP_SESSION_EXEC),
                     CARREL_GRANT_NONE);
}

/* [limits] in core: creates running at once and sessions owned, per token; admins are free. */
static void
test_token_limits(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(CarrelPrincipal) a = agent(fx, "busy-agent", NULL);
    g_autoptr(CarrelPrincipal) b = agent(fx, "calm-agent", NULL);
    g_autoptr(CarrelSession) made = NULL;
    g_autoptr(GError) error = NULL;

    assert_null(carrel_manager_limits_for(fx->mgr, ADMIN));
    assert_null(carrel_manager_limits_for(fx->mgr, carrel_principal_daemon()));
    assert_int_equal(carrel_manager_limits_for(fx->mgr, a)->creates, 8);
    /* Eight creates of a's at once; a ninth waits, through the verb too, and b goes on. */
    for (int i = 0; i < 8; i++)
        assert_true(carrel_manager_limits_enter(fx->mgr, a, 1, NULL));
    assert_false(carrel_manager_limits_enter(fx->mgr, a, 1, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_RATE_LIMITED));
    assert_non_null(strstr(error->message, "[limits] creates allows 8"));
    g_clear_error(&error);
    assert_null(create_under(fx, a, NULL, 0, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_RATE_LIMITED));
    g_clear_error(&error);
    assert_true(carrel_manager_limits_enter(fx->mgr, b, 1, NULL));
    carrel_manager_limits_leave(fx->mgr, b);
    assert_true(carrel_manager_limits_enter(fx->mgr, ADMIN, 1000, NULL));
    carrel_manager_limits_leave(fx->mgr, ADMIN);
    carrel_manager_limits_leave(fx->mgr, a);
    made = create_under(fx, a, NULL, 0, &error);
    assert_non_null(made);
    for (int i = 0; i < 7; i++)
        carrel_manager_limits_leave(fx->mgr, a);
    /* Sessions owned: a has one, so a fork of 64 would pass the 64 allowed; 63 fit. */
    assert_false(carrel_manager_limits_enter(fx->mgr, a, 64, &error));
    assert_non_null(strstr(error->message, "owns 1 sessions and [limits] sessions allows 64"));
    assert_true(carrel_manager_limits_enter(fx->mgr, a, 63, NULL));
    carrel_manager_limits_leave(fx->mgr, a);
    assert_true(carrel_manager_limits_enter(fx->mgr, b, 64, NULL));
    carrel_manager_limits_leave(fx->mgr, b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_under_a_policy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_limited_to_policies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_policy_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_network_without_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_secret_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_type_secret, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_file_over_folder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_limits, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
