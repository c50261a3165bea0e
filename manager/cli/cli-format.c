#include "cli/cli-format.h"

#include <string.h>

#define MIB (G_GUINT64_CONSTANT(1024) * 1024)
#define GIB (MIB * 1024)

CarrelCliExit
carrel_cli_exit_code(const GError *error)
{
    if (!error)
        return CARREL_CLI_EXIT_OK;
    if (error->domain != CARREL_ERROR)
        return CARREL_CLI_EXIT_FAILED;
    switch ((CarrelErrorCode)error->code) {
    case CARREL_ERROR_NOT_FOUND:
    case CARREL_ERROR_GONE:
        return CARREL_CLI_EXIT_NOT_FOUND;
    case CARREL_ERROR_EXISTS:
    case CARREL_ERROR_WRONG_STATE:
    case CARREL_ERROR_BUSY:
    case CARREL_ERROR_RATE_LIMITED:
    case CARREL_ERROR_OVERLOADED:
        return CARREL_CLI_EXIT_CONFLICT;
    case CARREL_ERROR_UNAUTHORIZED:
    case CARREL_ERROR_FORBIDDEN:
    case CARREL_ERROR_POLICY_DENIED:
        return CARREL_CLI_EXIT_DENIED;
    case CARREL_ERROR_TIMEOUT:
        return CARREL_CLI_EXIT_TIMEOUT;
    case CARREL_ERROR_INVALID_ARG:
    case CARREL_ERROR_LIMIT:
        return CARREL_CLI_EXIT_INVALID;
    case CARREL_ERROR_FAILED:
    case CARREL_ERROR_UNSUPPORTED:
    case CARREL_ERROR_HYPERVISOR:
    case CARREL_ERROR_DISK:
    case CARREL_ERROR_STORE:
    case CARREL_ERROR_NO_SPACE:
    case CARREL_ERROR_INTERNAL:
    case CARREL_ERROR_LAST:
    default:
        return CARREL_CLI_EXIT_FAILED;
    }
}

char *
carrel_cli_format_size(guint64 bytes)
{
    if (bytes < 1024)
        return g_strdup_printf("%" G_GUINT64_FORMAT " B", bytes);
    if (bytes < MIB)
        return g_strdup_printf("%" G_GUINT64_FORMAT " KiB", (bytes + 1023) / 1024);
    if (bytes < 10 * GIB)
        return g_strdup_printf("%" G_GUINT64_FORMAT " MiB", (bytes + MIB / 2) / MIB);
    return g_strdup_printf("%.1f GiB", (double)bytes / (double)GIB);
}

char *
carrel_cli_format_age(const char *timestamp, gint64 now)
{
    g_autoptr(GDateTime) dt = NULL;
    gint64 age;

    if (!timestamp)
        return g_strdup("-");
    dt = g_date_time_new_from_iso8601(timestamp, NULL);
    if (!dt)
        return g_strdup("-");
    age = MAX(now - g_date_time_to_unix(dt), 0);
    if (age < 60)
        return g_strdup_printf("%" G_GINT64_FORMAT "s", age);
    if (age < 3600)
        return g_strdup_printf("%" G_GINT64_FORMAT "m", age / 60);
    if (age < 86400)
        return g_strdup_printf("%" G_GINT64_FORMAT "h", age / 3600);
    return g_strdup_printf("%" G_GINT64_FORMAT "d", age / 86400);
}

char *
carrel_cli_clean_text(const char *text)
{
    g_autofree char *valid = NULL;
    GString *out;

    if (!text)
        return g_strdup("-");
    valid = g_utf8_make_valid(text, -1);
    out = g_string_sized_new(strlen(valid));
    for (const char *p = valid; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);
        GUnicodeType type = g_unichar_type(c);

        /* Escape sequences or bidi overrides from a server could disguise what is shown. */
        if (g_unichar_iscntrl(c) || type == G_UNICODE_FORMAT || type == G_UNICODE_LINE_SEPARATOR ||
            type == G_UNICODE_PARAGRAPH_SEPARATOR)
            g_string_append_c(out, '?');
        else
            g_string_append_unichar(out, c);
    }
    return g_string_free(out, FALSE);
}

char *
carrel_cli_escape_segment(const char *text)
{
    /*
     * Dot segments cannot be sent at all: URL normalization decodes "%2E" (an unreserved
     * character) and then removes them. No id or name is "." or "..".
     */
    if (!text || !*text || g_str_equal(text, ".") || g_str_equal(text, ".."))
        return NULL;
    return g_uri_escape_string(text, NULL, FALSE);
}

static gboolean
progress_overlaps(const char *const *prev, guint n_prev, const char *const *cur, guint k)
{
    for (guint i = 0; i < k; i++) {
        if (g_strcmp0(prev[n_prev - k + i], cur[i]) != 0)
            return FALSE;
    }
    return TRUE;
}

guint
carrel_cli_progress_first_new(const char *const *prev, guint n_prev, const char *const *cur,
                              guint n_cur)
{
    for (guint k = MIN(n_prev, n_cur); k > 0; k--) {
        if (progress_overlaps(prev, n_prev, cur, k))
            return k;
    }
    return 0;
}

const char *
carrel_cli_json_string(JsonObject *obj, const char *member)
{
    JsonNode *node = obj ? json_object_get_member(obj, member) : NULL;

    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING)
        return NULL;
    return json_node_get_string(node);
}

gint64
carrel_cli_json_int(JsonObject *obj, const char *member, gint64 fallback)
{
    JsonNode *node = obj ? json_object_get_member(obj, member) : NULL;

    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64)
        return fallback;
    return json_node_get_int(node);
}

JsonObject *
carrel_cli_json_object(JsonNode *node, const char *member)
{
    JsonNode *child;

    if (!node || !JSON_NODE_HOLDS_OBJECT(node))
        return NULL;
    if (!member)
        return json_node_get_object(node);
    child = json_object_get_member(json_node_get_object(node), member);
    return child && JSON_NODE_HOLDS_OBJECT(child) ? json_node_get_object(child) : NULL;
}

JsonArray *
carrel_cli_json_array(JsonNode *node, const char *member)
{
    JsonNode *child;

    if (!node || !JSON_NODE_HOLDS_OBJECT(node))
        return NULL;
    child = json_object_get_member(json_node_get_object(node), member);
    return child && JSON_NODE_HOLDS_ARRAY(child) ? json_node_get_array(child) : NULL;
}

JsonNode *
carrel_cli_json_new_object(void)
{
    JsonNode *node = json_node_new(JSON_NODE_OBJECT);

    json_node_take_object(node, json_object_new());
    return node;
}

char *
carrel_cli_format_value(JsonNode *node)
{
    GType type;

    if (!node || JSON_NODE_HOLDS_NULL(node))
        return g_strdup("-");
    if (!JSON_NODE_HOLDS_VALUE(node))
        return json_to_string(node, FALSE);
    type = json_node_get_value_type(node);
    if (type == G_TYPE_STRING)
        return g_strdup(json_node_get_string(node));
    if (type == G_TYPE_INT64)
        return g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(node));
    if (type == G_TYPE_BOOLEAN)
        return g_strdup(json_node_get_boolean(node) ? "true" : "false");
    return g_strdup_printf("%g", json_node_get_double(node));
}

/* An array of objects (template versions) is shown by their "ref" or "id"; else as JSON. */
static char *
format_array(JsonArray *array)
{
    g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func(g_free);
    guint n = json_array_get_length(array);

    for (guint i = 0; i < n; i++) {
        JsonNode *item = json_array_get_element(array, i);
        JsonObject *obj = carrel_cli_json_object(item, NULL);
        const char *label = carrel_cli_json_string(obj, "ref");

        if (obj && !label)
            label = carrel_cli_json_string(obj, "id");
        g_ptr_array_add(items, label ? g_strdup(label) : carrel_cli_format_value(item));
    }
    g_ptr_array_add(items, NULL);
    return g_strjoinv(", ", (char **)items->pdata);
}

static char *
format_member(const char *key, JsonNode *node)
{
    g_autofree char *text = NULL;

    if (JSON_NODE_HOLDS_ARRAY(node))
        return format_array(json_node_get_array(node));
    text = carrel_cli_format_value(node);
    if (g_str_has_suffix(key, "_bytes") && JSON_NODE_HOLDS_VALUE(node) &&
        json_node_get_value_type(node) == G_TYPE_INT64 && json_node_get_int(node) >= 0) {
        g_autofree char *human = carrel_cli_format_size((guint64)json_node_get_int(node));

        return g_strdup_printf("%s (%s)", text, human);
    }
    return g_steal_pointer(&text);
}

char *
carrel_cli_format_timings(JsonObject *timings)
{
    g_autoptr(GList) members = NULL;
    g_autoptr(GString) phases = g_string_new(NULL);
    JsonNode *total = timings ? json_object_get_member(timings, "total_ms") : NULL;

    if (!total || json_node_get_value_type(total) != G_TYPE_INT64)
        return NULL;
    members = json_object_get_members(timings);
    for (GList *l = members; l; l = l->next) {
        const char *name = l->data;
        JsonNode *ms = json_object_get_member(timings, name);
        g_autofree char *phase = NULL;

        if (g_str_equal(name, "total_ms") || !g_str_has_suffix(name, "_ms") ||
            !JSON_NODE_HOLDS_VALUE(ms) || json_node_get_value_type(ms) != G_TYPE_INT64)
            continue;
        phase = carrel_cli_clean_text(name);
        phase[strlen(phase) - 3] = '\0';
        g_string_append_printf(phases, "%s%s %" G_GINT64_FORMAT " ms", phases->len ? ", " : "",
                               phase, json_node_get_int(ms));
    }
    return g_strdup_printf("took %.2f s%s%s%s", (double)json_node_get_int(total) / 1000,
                           phases->len ? " (" : "", phases->str, phases->len ? ")" : "");
}

char *
carrel_cli_format_fields(JsonObject *obj)
{
    g_autoptr(GList) members = json_object_get_members(obj);
    GString *out = g_string_new(NULL);
    glong width = 0;

    for (GList *l = members; l; l = l->next) {
        g_autofree char *key = carrel_cli_clean_text(l->data);

        width = MAX(width, g_utf8_strlen(key, -1));
    }
    for (GList *l = members; l; l = l->next) {
        g_autofree char *key = carrel_cli_clean_text(l->data);
        g_autofree char *raw = format_member(l->data, json_object_get_member(obj, l->data));
        g_autofree char *value = carrel_cli_clean_text(raw);

        g_string_append_printf(out, "%s:%*s %s\n", key, (int)(width - g_utf8_strlen(key, -1)), "",
                               value);
    }
    return g_string_free(out, FALSE);
}

struct _CarrelCliTable {
    guint n_columns;
    GPtrArray *rows; /* of GStrv, the header first */
};

CarrelCliTable *
carrel_cli_table_new(const char *const *columns)
{
    CarrelCliTable *table = g_new0(CarrelCliTable, 1);

    table->n_columns = g_strv_length((char **)columns);
    table->rows = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
    carrel_cli_table_add(table, columns);
    return table;
}

void
carrel_cli_table_free(CarrelCliTable *table)
{
    if (!table)
        return;
    g_ptr_array_unref(table->rows);
    g_free(table);
}

void
carrel_cli_table_add(CarrelCliTable *table, const char *const *cells)
{
    char **row = g_new0(char *, table->n_columns + 1);

    for (guint i = 0; i < table->n_columns; i++)
        row[i] = carrel_cli_clean_text(cells[i]);
    g_ptr_array_add(table->rows, row);
}

char *
carrel_cli_table_render(const CarrelCliTable *table)
{
    g_autofree glong *widths = g_new0(glong, table->n_columns);
    GString *out = g_string_new(NULL);

    for (guint r = 0; r < table->rows->len; r++) {
        char **row = g_ptr_array_index(table->rows, r);

        for (guint c = 0; c < table->n_columns; c++)
            widths[c] = MAX(widths[c], g_utf8_strlen(row[c], -1));
    }
    for (guint r = 0; r < table->rows->len; r++) {
        char **row = g_ptr_array_index(table->rows, r);

        for (guint c = 0; c < table->n_columns; c++) {
            gboolean last = c + 1 == table->n_columns;

            g_string_append(out, row[c]);
            if (!last)
                g_string_append_printf(out, "%*s", (int)(widths[c] - g_utf8_strlen(row[c], -1) + 2),
                                       "");
        }
        g_string_append_c(out, '\n');
    }
    return g_string_free(out, FALSE);
}

CarrelCliTable *
carrel_cli_table_new_sessions(void)
{
    static const char *const columns[] = {"ID",    "NAME", "TEMPLATE", "STATE",
                                          "VCPUS", "MEM",  "AGE",      NULL};

    return carrel_cli_table_new(columns);
}

void
carrel_cli_table_add_session(CarrelCliTable *table, JsonObject *session, gint64 now)
{
    const char *tmpl = carrel_cli_json_string(session, "template");
    gint64 version = carrel_cli_json_int(session, "template_version", 0);
    gint64 vcpus = carrel_cli_json_int(session, "vcpus", -1);
    gint64 memory = carrel_cli_json_int(session, "memory_mib", -1);
    g_autofree char *ref = NULL;
    g_autofree char *vcpus_text = vcpus >= 0 ? g_strdup_printf("%" G_GINT64_FORMAT, vcpus) : NULL;
    g_autofree char *mem_text =
        memory >= 0 ? g_strdup_printf("%" G_GINT64_FORMAT " MiB", memory) : NULL;
    g_autofree char *age =
        carrel_cli_format_age(carrel_cli_json_string(session, "created_at"), now);
    const char *cells[8];

    if (tmpl)
        ref = version > 0 ? g_strdup_printf("%s@%" G_GINT64_FORMAT, tmpl, version) : g_strdup(tmpl);
    cells[0] = carrel_cli_json_string(session, "id");
    cells[1] = carrel_cli_json_string(session, "name");
    cells[2] = ref;
    cells[3] = carrel_cli_json_string(session, "state");
    cells[4] = vcpus_text;
    cells[5] = mem_text;
    cells[6] = age;
    cells[7] = NULL;
    carrel_cli_table_add(table, cells);
}

CarrelCliTable *
carrel_cli_table_new_templates(void)
{
    static const char *const columns[] = {"NAME", "VERSION",  "BOOT",    "FORMAT", "SIZE",
                                          "WARM", "SESSIONS", "CREATED", NULL};

    return carrel_cli_table_new(columns);
}

void
carrel_cli_table_add_template(CarrelCliTable *table, JsonObject *tmpl)
{
    gint64 version = carrel_cli_json_int(tmpl, "version", -1);
    gint64 size = carrel_cli_json_int(tmpl, "size_bytes", -1);
    gint64 sessions = carrel_cli_json_int(tmpl, "sessions", -1);
    g_autofree char *version_text =
        version >= 0 ? g_strdup_printf("%" G_GINT64_FORMAT, version) : NULL;
    g_autofree char *size_text = size >= 0 ? carrel_cli_format_size((guint64)size) : NULL;
    g_autofree char *sessions_text =
        sessions >= 0 ? g_strdup_printf("%" G_GINT64_FORMAT, sessions) : NULL;
    JsonNode *warm_node = json_object_get_member(tmpl, "warm");
    JsonObject *warm = carrel_cli_json_object(warm_node, NULL);
    gint64 warm_bytes = warm ? carrel_cli_json_int(warm, "memory_bytes", -1) : -1;
    g_autofree char *warm_text =
        warm_bytes >= 0 ? carrel_cli_format_size((guint64)warm_bytes) : g_strdup("no");
    const char *cells[9];

    cells[0] = carrel_cli_json_string(tmpl, "name");
    cells[1] = version_text;
    cells[2] = carrel_cli_json_string(tmpl, "boot");
    cells[3] = carrel_cli_json_string(tmpl, "format");
    cells[4] = size_text;
    cells[5] = warm_text;
    cells[6] = sessions_text;
    cells[7] = carrel_cli_json_string(tmpl, "created_at");
    cells[8] = NULL;
    carrel_cli_table_add(table, cells);
}

CarrelCliTable *
carrel_cli_table_new_tokens(void)
{
    static const char *const columns[] = {"NAME",      "ID",      "ROLE",     "STATE", "CREATED",
                                          "LAST-USED", "EXPIRES", "POLICIES", NULL};

    return carrel_cli_table_new(columns);
}

void
carrel_cli_table_add_token(CarrelCliTable *table, JsonObject *token)
{
    JsonNode *list = json_object_get_member(token, "policies");
    JsonArray *policies = list && JSON_NODE_HOLDS_ARRAY(list) ? json_node_get_array(list) : NULL;
    g_autoptr(GString) names = g_string_new(NULL);
    const char *cells[9];

    for (guint i = 0; policies && i < json_array_get_length(policies); i++)
        g_string_append_printf(names, "%s%s", i ? "," : "",
                               json_array_get_string_element(policies, i));
    cells[0] = carrel_cli_json_string(token, "name");
    cells[1] = carrel_cli_json_string(token, "id");
    cells[2] = carrel_cli_json_string(token, "role");
    cells[3] = carrel_cli_json_string(token, "state");
    cells[4] = carrel_cli_json_string(token, "created_at");
    cells[5] = carrel_cli_json_string(token, "last_used_at");
    cells[6] = carrel_cli_json_string(token, "expires_at");
    cells[7] = policies ? names->str : "any";
    cells[8] = NULL;
    carrel_cli_table_add(table, cells);
}

CarrelCliTable *
carrel_cli_table_new_audit(void)
{
    static const char *const columns[] = {"SEQ",       "TIME",    "PRINCIPAL", "ROLE",
                                          "OPERATION", "SESSION", "RESULT",    NULL};

    return carrel_cli_table_new(columns);
}

/* An entry's time to the second: the microseconds matter to the chain, not to a reader. */
static char *
format_audit_time(const char *timestamp)
{
    g_autoptr(GDateTime) dt = timestamp ? g_date_time_new_from_iso8601(timestamp, NULL) : NULL;

    if (!dt)
        return g_strdup(timestamp);
    return carrel_util_format_time(g_date_time_to_unix(dt));
}

void
carrel_cli_table_add_audit(CarrelCliTable *table, JsonObject *entry)
{
    JsonObject *who = carrel_cli_json_object(json_object_get_member(entry, "principal"), NULL);
    const char *principal = carrel_cli_json_string(who, "label");
    const char *result = carrel_cli_json_string(entry, "result");
    const char *code = carrel_cli_json_string(entry, "error_code");
    gint64 seq = carrel_cli_json_int(entry, "seq", -1);
    g_autofree char *seq_text = seq >= 0 ? g_strdup_printf("%" G_GINT64_FORMAT, seq) : NULL;
    g_autofree char *time = format_audit_time(carrel_cli_json_string(entry, "time"));
    g_autofree char *result_text =
        result && code ? g_strdup_printf("%s (%s)", result, code) : g_strdup(result);
    const char *cells[8];

    cells[0] = seq_text;
    cells[1] = time;
    cells[2] = principal ? principal : carrel_cli_json_string(who, "id");
    cells[3] = carrel_cli_json_string(entry, "role");
    cells[4] = carrel_cli_json_string(entry, "operation");
    cells[5] = carrel_cli_json_string(entry, "session");
    cells[6] = result_text;
    cells[7] = NULL;
    carrel_cli_table_add(table, cells);
}

static void
query_add(GString *path, const char *key, const char *value)
{
    g_autofree char *escaped = NULL;

    if (!value)
        return;
    /* Values are the user's: '&', '=', '+' and '#' would otherwise change the query. */
    escaped = g_uri_escape_string(value, NULL, FALSE);
    g_string_append_printf(path, "%c%s=%s", strchr(path->str, '?') ? '&' : '?', key, escaped);
}

char *
carrel_cli_audit_path(const CarrelCliAuditFilter *filter, gint64 after_seq, guint limit)
{
    GString *path = g_string_new("/v1/audit");
    g_autofree char *after = after_seq > 0 ? g_strdup_printf("%" G_GINT64_FORMAT, after_seq) : NULL;
    g_autofree char *limit_text = limit ? g_strdup_printf("%u", limit) : NULL;

    query_add(path, "after", after);
    query_add(path, "since", filter->since);
    query_add(path, "session", filter->session);
    query_add(path, "principal", filter->principal);
    query_add(path, "operation", filter->operation);
    query_add(path, "result", filter->result);
    query_add(path, "limit", limit_text);
    return g_string_free(path, FALSE);
}

char *
carrel_cli_format_audit_verdict(JsonObject *verdict, gboolean *ret_intact)
{
    JsonNode *intact = verdict ? json_object_get_member(verdict, "intact") : NULL;
    gint64 rows = carrel_cli_json_int(verdict, "rows", 0);
    gint64 bad_seq = carrel_cli_json_int(verdict, "bad_seq", -1);
    g_autofree char *why = carrel_cli_clean_text(carrel_cli_json_string(verdict, "why"));
    g_autofree char *seq_text =
        bad_seq >= 0 ? g_strdup_printf("%" G_GINT64_FORMAT, bad_seq) : g_strdup("?");

    /* Anything but an explicit true is a broken log: a garbled verdict must not read as "ok". */
    *ret_intact = intact && JSON_NODE_HOLDS_VALUE(intact) &&
                  json_node_get_value_type(intact) == G_TYPE_BOOLEAN &&
                  json_node_get_boolean(intact);
    if (*ret_intact)
        return g_strdup_printf("audit log intact: %" G_GINT64_FORMAT " rows", rows);
    return g_strdup_printf("audit log broken at seq %s: %s", seq_text, why);
}
