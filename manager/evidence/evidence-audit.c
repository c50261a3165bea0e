/*
 * evidence: a session's audit rows in a bundle, and their chain checked offline with the very
 * hash carrel computes (carrel_audit_record_hash), so a bundle can never disagree with
 * `carrel audit verify` about what a row's hash is.
 */
#include <string.h>

#include "evidence/evidence.h"

char *
carrel_evidence_audit_to_jsonl(GPtrArray *records)
{
    g_autoptr(GString) out = g_string_new(NULL);

    for (guint i = 0; records && i < records->len; i++) {
        const CarrelAuditRecord *rec = g_ptr_array_index(records, i);
        g_autoptr(JsonNode) node = carrel_audit_record_to_json(rec);
        g_autofree char *line = NULL;

        /* "time" is for people; the chain covers the exact microseconds. */
        json_object_set_int_member(json_node_get_object(node), "ts_us", rec->ts_us);
        line = json_to_string(node, FALSE);
        g_string_append(out, line);
        g_string_append_c(out, '\n');
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

/* o's member name when it is an object, else NULL. */
static JsonObject *
object_member(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

static char *
string_member(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
               ? g_strdup(json_node_get_string(n))
               : NULL;
}

static gboolean
int_member(JsonObject *o, const char *name, gint64 *ret)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    if (!n || !JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_INT64)
        return FALSE;
    *ret = json_node_get_int(n);
    return TRUE;
}

/* One line back into the record carrel hashed (the inverse of carrel_audit_record_to_json). */
static CarrelAuditRecord *
record_from_line(const char *line, guint lineno, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(CarrelAuditRecord) rec = carrel_audit_record_new();
    JsonObject *o, *who;

    /* A bundle is untrusted: json-glib must not see what it leaks or recurses on. */
    if (!carrel_util_json_structure_ok(line, strlen(line), CARREL_EVIDENCE_JSON_DEPTH) ||
        !json_parser_load_from_data(parser, line, -1, NULL) ||
        !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "line %u is not a JSON object",
                    lineno);
        return NULL;
    }
    o = json_node_get_object(json_parser_get_root(parser));
    who = object_member(o, "principal");
    if (!int_member(o, "seq", &rec->seq) || !int_member(o, "ts_us", &rec->ts_us)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "line %u lacks its seq or ts_us",
                    lineno);
        return NULL;
    }
    rec->principal_id = string_member(who, "id");
    rec->principal_label = string_member(who, "label");
    rec->role = string_member(o, "role");
    rec->operation = string_member(o, "operation");
    rec->session_id = string_member(o, "session");
    rec->params_digest = string_member(o, "params_digest");
    rec->result = string_member(o, "result");
    rec->error_code = string_member(o, "error_code");
    rec->prev_hash = string_member(o, "prev_hash");
    rec->hash = string_member(o, "hash");
    return g_steal_pointer(&rec);
}

/* What breaks the chain at rec given the row before it in the bundle (NULL for the first). */
static char *
check_row(const CarrelAuditRecord *rec, const CarrelAuditRecord *prev, const char *session_id)
{
    g_autofree char *hash = carrel_audit_record_hash(rec);

    if (g_strcmp0(hash, rec->hash) != 0)
        return g_strdup_printf("row %" G_GINT64_FORMAT ": hash does not match its contents",
                               rec->seq);
    if (g_strcmp0(rec->session_id, session_id) != 0)
        return g_strdup_printf("row %" G_GINT64_FORMAT ": not a row of session '%s'", rec->seq,
                               session_id);
    if (prev && rec->seq <= prev->seq)
        return g_strdup_printf("row %" G_GINT64_FORMAT " follows row %" G_GINT64_FORMAT
                               ": rows out of order",
                               rec->seq, prev->seq);
    /* Rows next to each other in the log: the later names the earlier's hash. */
    if (prev && rec->seq == prev->seq + 1 && g_strcmp0(rec->prev_hash, prev->hash) != 0)
        return g_strdup_printf("row %" G_GINT64_FORMAT
                               ": prev_hash does not match row %" G_GINT64_FORMAT,
                               rec->seq, prev->seq);
    if (rec->seq == 1 && g_strcmp0(rec->prev_hash, CARREL_AUDIT_GENESIS) != 0)
        return g_strdup_printf("row 1: prev_hash is not the genesis hash");
    return NULL;
}

gboolean
carrel_evidence_audit_check(const char *text, gsize len, const char *session_id, gint64 *ret_rows,
                            GError **error)
{
    g_autofree char *copy = g_strndup(text, len);
    g_auto(GStrv) lines = NULL;
    g_autoptr(CarrelAuditRecord) prev = NULL;
    gint64 rows = 0;

    if (strlen(copy) != len) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "a NUL byte in the rows");
        return FALSE;
    }
    lines = g_strsplit(copy, "\n", -1);
    for (guint i = 0; lines[i]; i++) {
        g_autoptr(CarrelAuditRecord) rec = NULL;
        g_autofree char *why = NULL;

        if (!*lines[i])
            continue;
        if (!(rec = record_from_line(lines[i], i + 1, error)))
            return FALSE;
        if ((why = check_row(rec, prev, session_id))) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "%s", why);
            return FALSE;
        }
        rows++;
        carrel_audit_record_free(prev);
        prev = g_steal_pointer(&rec);
    }
    *ret_rows = rows;
    return TRUE;
}
