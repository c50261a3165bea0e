/* store: a session's screen size and a template's defaults (the v11 migration and round trips). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

typedef struct {
    char *dir;
    char *db;
} TmpDb;

static int
tmp_setup(void **state)
{
    TmpDb *t = g_new0(TmpDb, 1);

    t->dir = g_dir_make_tmp("carrel-screen-XXXXXX", NULL);
    assert_non_null(t->dir);
    t->db = g_build_filename(t->dir, "state.db", NULL);
    *state = t;
    return 0;
}

static int
tmp_teardown(void **state)
{
    TmpDb *t = *state;

    carrel_util_remove_tree(t->dir, NULL);
    g_free(t->dir);
    g_free(t->db);
    g_free(t);
    return 0;
}

static void
raw_exec(CarrelStore *store, const char *sql)
{
    char *msg = NULL;

    if (sqlite3_exec(store->db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("'%s' failed: %s", sql, msg);
}

static CarrelTemplate *
make_template(guint vcpus, guint memory_mib, guint width, guint height)
{
    CarrelTemplate *t = carrel_template_new();

    t->name = g_strdup("desktop");
    t->version = 1;
    t->sha256 = g_strdup("0123456789abcdef");
    t->format = g_strdup("qcow2");
    t->boot = CARREL_BOOT_DIRECT;
    t->dir = g_strdup("templates/desktop/1");
    t->disk_path = g_strdup("templates/desktop/1/base.qcow2");
    t->default_vcpus = vcpus;
    t->default_memory_mib = memory_mib;
    t->default_screen_width = width;
    t->default_screen_height = height;
    t->created_at = 1700000000;
    return t;
}

static CarrelSession *
make_session(const char *id, guint width, guint height)
{
    CarrelSession *s = carrel_session_new();

    s->id = g_strdup(id);
    s->name = g_strdup(id + 2);
    s->template_name = g_strdup("desktop");
    s->template_version = 1;
    s->state = CARREL_SESSION_RUNNING;
    s->vcpus = 2;
    s->memory_mib = 2048;
    s->dir = g_strdup("d");
    s->overlay_path = g_strdup("o");
    s->screen_width = width;
    s->screen_height = height;
    s->created_at = s->updated_at = 1700000000;
    return s;
}

/* Rows of a v10 database keep working: no screen (the image's own), no template defaults. */
static void
test_migrate_v10(void **state)
{
    TmpDb *t = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelStore) old = carrel_store_open_full(t->db, 10, &error);
    g_autoptr(CarrelStore) store = NULL;
    g_autoptr(CarrelTemplate) tmpl = NULL;
    g_autoptr(CarrelSession) s = NULL;
    g_autoptr(JsonNode) json = NULL;

    assert_non_null(old);
    raw_exec(old, "INSERT INTO templates (name, version, sha256, format, size_bytes,"
                  " virtual_size_bytes, boot, dir, disk_path, created_at) VALUES"
                  " ('desktop', 1, 'ab', 'qcow2', 0, 0, 'direct', 'd', 'd/base.qcow2', 1);"
                  "INSERT INTO template_versions (name, last_version) VALUES ('desktop', 1);"
                  "INSERT INTO sessions (id, name, template_name, template_version, state,"
                  " vcpus, memory_mib, dir, overlay_path, created_at, updated_at) VALUES"
                  " ('s-000000000001', 'one', 'desktop', 1, 'running', 1, 1024, 'd', 'o', 1, 1);");
    g_clear_pointer(&old, carrel_store_free);
    store = carrel_store_open(t->db, &error);
    assert_non_null(store);
    assert_int_equal(carrel_store_schema_version(store), carrel_store_latest_schema_version());
    tmpl = carrel_store_template_get(store, "desktop", 1, &error);
    assert_non_null(tmpl);
    assert_int_equal(tmpl->default_vcpus + tmpl->default_memory_mib + tmpl->default_screen_width +
                         tmpl->default_screen_height,
                     0);
    s = carrel_store_session_get(store, "one", &error);
    assert_non_null(s);
    assert_int_equal(s->screen_width, 0);
    assert_int_equal(s->screen_height, 0);
    json = carrel_session_to_json(s);
    assert_true(json_object_get_null_member(json_node_get_object(json), "screen"));
}

/* What is written comes back: the template's defaults, a session's screen, and a pool member's
 * screen set when it is adopted. */
static void
test_round_trip(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelStore) store = carrel_store_open(":memory:", &error);
    g_autoptr(CarrelTemplate) in = make_template(2, 2048, 1280, 800);
    g_autoptr(CarrelTemplate) out = NULL;
    g_autoptr(CarrelSession) s = make_session("s-000000000001", 800, 600);
    g_autoptr(CarrelSession) member = make_session("s-000000000002", 0, 0);
    g_autoptr(CarrelSession) got = NULL;

    (void)state;
    assert_non_null(store);
    assert_true(carrel_store_template_insert(store, in, &error));
    out = carrel_store_template_get(store, "desktop", 0, &error);
    assert_non_null(out);
    assert_int_equal(out->default_vcpus, 2);
    assert_int_equal(out->default_memory_mib, 2048);
    assert_int_equal(out->default_screen_width, 1280);
    assert_int_equal(out->default_screen_height, 800);
    assert_true(carrel_store_session_insert(store, s, &error));
    got = carrel_store_session_get(store, s->id, &error);
    assert_non_null(got);
    assert_int_equal(got->screen_width, 800);
    assert_int_equal(got->screen_height, 600);
    g_clear_pointer(&got, carrel_session_free);

    member->pool = g_strdup("desktop");
    assert_true(carrel_store_session_insert(store, member, &error));
    member->screen_width = 1024;
    member->screen_height = 768;
    assert_true(carrel_store_session_adopt_member(store, member, &error));
    got = carrel_store_session_get(store, member->id, &error);
    assert_non_null(got);
    assert_null(got->pool);
    assert_int_equal(got->screen_width, 1024);
    assert_int_equal(got->screen_height, 768);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_migrate_v10, tmp_setup, tmp_teardown),
        cmocka_unit_test(test_round_trip),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
