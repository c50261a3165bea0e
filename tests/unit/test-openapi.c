/*
 * Unit: the OpenAPI description built into carreld (manager/api/openapi.json) against the route
 * table. Every route has an operation of the same method and path, and every operation a route:
 * the table's '*' segments are OpenAPI's {name} parameters. A route added without its entry, or
 * an entry left behind by a removed route, fails here. The negative cases show the check fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "api/api-priv.h"

static const char *const methods[] = {"get",   "put",  "post",    "delete",
                                      "patch", "head", "options", NULL};

/* An OpenAPI path in the route table's syntax: each {name} segment becomes '*'. */
static char *
pattern_of(const char *path)
{
    g_auto(GStrv) parts = g_strsplit(path, "/", -1);

    for (guint i = 0; parts[i]; i++) {
        if (parts[i][0] == '{' && g_str_has_suffix(parts[i], "}")) {
            g_free(parts[i]);
            parts[i] = g_strdup("*");
        }
    }
    return g_strjoinv("/", parts);
}

/* "METHOD PATTERN" of every operation in doc. */
static GHashTable *
operations_of(JsonNode *doc)
{
    JsonObject *paths = json_object_get_object_member(json_node_get_object(doc), "paths");
    GHashTable *ops = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GList) names = json_object_get_members(paths);

    for (GList *l = names; l; l = l->next) {
        JsonObject *item = json_object_get_object_member(paths, l->data);
        g_autofree char *pattern = pattern_of(l->data);
        for (guint m = 0; methods[m]; m++) {
            if (json_object_has_member(item, methods[m])) {
                g_autofree char *upper = g_ascii_strup(methods[m], -1);
                g_hash_table_add(ops, g_strdup_printf("%s %s", upper, pattern));
            }
        }
    }
    return ops;
}

/*
 * What differs between routes (terminated by a NULL method) and doc's operations, one line per
 * route without an operation and per operation without a route; empty when they agree.
 */
static char *
openapi_mismatch(const CarrelApiRoute *routes, JsonNode *doc)
{
    g_autoptr(GHashTable) ops = operations_of(doc);
    g_autoptr(GString) out = g_string_new(NULL);
    GHashTableIter iter;
    gpointer key;

    for (const CarrelApiRoute *r = routes; r->method; r++) {
        g_autofree char *k = g_strdup_printf("%s %s", r->method, r->pattern);
        if (!g_hash_table_remove(ops, k))
            g_string_append_printf(out, "route %s has no operation in openapi.json\n", k);
    }
    g_hash_table_iter_init(&iter, ops);
    while (g_hash_table_iter_next(&iter, &key, NULL))
        g_string_append_printf(out, "openapi.json's %s has no route\n", (const char *)key);
    return g_string_free(g_steal_pointer(&out), FALSE);
}

static JsonNode *
built_in_doc(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) bytes = carrel_api_openapi_bytes(&error);
    gsize len = 0;
    const char *data = bytes ? g_bytes_get_data(bytes, &len) : NULL;
    JsonNode *doc = data ? carrel_conf_parse_json(data, len, &error) : NULL;

    if (!doc)
        fail_msg("openapi.json does not parse: %s", error->message);
    return doc;
}

static void
test_routes_match(void **state)
{
    g_autoptr(JsonNode) doc = built_in_doc();
    g_autofree char *mismatch = openapi_mismatch(carrel_api_routes, doc);

    if (*mismatch)
        fail_msg("%s", mismatch);
}

/* The built-in bytes are the file in the tree, and say OpenAPI 3.1. */
static void
test_file_built_in(void **state)
{
    g_autoptr(JsonNode) doc = built_in_doc();
    g_autoptr(GBytes) bytes = carrel_api_openapi_bytes(NULL);
    const char *path = g_getenv("CARREL_OPENAPI");
    g_autofree char *text = NULL;
    gsize len = 0;

    if (!path) {
        print_message("CARREL_OPENAPI is not set (meson test sets it): no file to compare\n");
        skip();
    }
    assert_non_null(bytes);
    assert_true(g_file_get_contents(path, &text, &len, NULL));
    assert_int_equal(len, g_bytes_get_size(bytes));
    assert_memory_equal(text, g_bytes_get_data(bytes, NULL), len);
    assert_true(g_str_has_prefix(
        json_object_get_string_member(json_node_get_object(doc), "openapi"), "3.1."));
}

static CarrelApiReply *
no_handler(CarrelApiRequest *req, GError **error)
{
    return NULL;
}

/* A route the description does not have is named. */
static void
test_extra_route_fails(void **state)
{
    const CarrelApiRoute routes[] = {
        {"GET", "/v1/healthz", no_handler, CARREL_OP_LAST, 0, NULL},
        {"POST", "/v1/sessions/*/teleport", no_handler, CARREL_OP_LAST, 0, NULL},
        {NULL, NULL, NULL, CARREL_OP_LAST, 0, NULL},
    };
    const char *json = "{\"paths\": {\"/v1/healthz\": {\"get\": {}}}}";
    g_autoptr(JsonNode) doc = carrel_conf_parse_json(json, strlen(json), NULL);
    g_autofree char *mismatch = openapi_mismatch(routes, doc);

    assert_string_equal(mismatch,
                        "route POST /v1/sessions/*/teleport has no operation in openapi.json\n");
}

/* An operation without a route is named, and so is one whose method differs. */
static void
test_extra_operation_fails(void **state)
{
    const CarrelApiRoute routes[] = {
        {"GET", "/v1/sessions/*", no_handler, CARREL_OP_LAST, 0, NULL},
        {NULL, NULL, NULL, CARREL_OP_LAST, 0, NULL},
    };
    const char *json = "{\"paths\": {\"/v1/sessions/{id}\": {\"get\": {}, \"patch\": {}}}}";
    g_autoptr(JsonNode) doc = carrel_conf_parse_json(json, strlen(json), NULL);
    g_autofree char *mismatch = openapi_mismatch(routes, doc);

    assert_string_equal(mismatch, "openapi.json's PATCH /v1/sessions/* has no route\n");
}

/* The whole table with one route more fails; the real table without it passes above. */
static void
test_table_plus_one_fails(void **state)
{
    g_autoptr(JsonNode) doc = built_in_doc();
    g_autoptr(GArray) table = g_array_new(FALSE, TRUE, sizeof(CarrelApiRoute));
    const CarrelApiRoute extra = {"DELETE", "/v1/pools", no_handler, CARREL_OP_LAST, 0, NULL};
    const CarrelApiRoute end = {NULL, NULL, NULL, CARREL_OP_LAST, 0, NULL};
    g_autofree char *mismatch = NULL;

    for (const CarrelApiRoute *r = carrel_api_routes; r->method; r++)
        g_array_append_val(table, *r);
    g_array_append_val(table, extra);
    g_array_append_val(table, end);
    mismatch = openapi_mismatch((const CarrelApiRoute *)(void *)table->data, doc);
    assert_string_equal(mismatch, "route DELETE /v1/pools has no operation in openapi.json\n");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes_match),         cmocka_unit_test(test_file_built_in),
        cmocka_unit_test(test_extra_route_fails),    cmocka_unit_test(test_extra_operation_fails),
        cmocka_unit_test(test_table_plus_one_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
