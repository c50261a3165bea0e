/* evidence: the manifest (what a bundle holds, the bytes the host key signs) and member names. */
#include <string.h>

#include "evidence/evidence.h"

void
carrel_evidence_file_free(CarrelEvidenceFile *file)
{
    if (!file)
        return;
    g_free(file->path);
    g_free(file->kind);
    g_free(file->sha256);
    g_free(file);
}

/* "recording": the members of kind "recording" (the index and the finished segments, each also
 * under "files" with its sha256), or null when the session was not recorded. */
static void
add_recording(JsonBuilder *b, GPtrArray *files)
{
    guint n = 0;

    json_builder_set_member_name(b, "recording");
    for (guint i = 0; files && i < files->len; i++)
        n += g_strcmp0(((CarrelEvidenceFile *)g_ptr_array_index(files, i))->kind, "recording") == 0;
    if (n == 0) {
        json_builder_add_null_value(b);
        return;
    }
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "files");
    json_builder_begin_array(b);
    for (guint i = 0; i < files->len; i++) {
        const CarrelEvidenceFile *f = g_ptr_array_index(files, i);
        if (g_strcmp0(f->kind, "recording") == 0)
            json_builder_add_string_value(b, f->path);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
}

CarrelEvidenceManifest *
carrel_evidence_manifest_new(void)
{
    CarrelEvidenceManifest *m = g_new0(CarrelEvidenceManifest, 1);

    m->files = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_evidence_file_free);
    return m;
}

void
carrel_evidence_manifest_free(CarrelEvidenceManifest *m)
{
    if (!m)
        return;
    g_free(m->session_id);
    g_free(m->session_name);
    g_free(m->template_name);
    g_free(m->state);
    g_free(m->policy);
    g_free(m->exported_by);
    g_free(m->carrel_version);
    g_free(m->host_key);
    g_free(m->host_fingerprint);
    g_clear_pointer(&m->files, g_ptr_array_unref);
    g_free(m);
}

static void
add_string(JsonBuilder *b, const char *name, const char *value)
{
    json_builder_set_member_name(b, name);
    if (value)
        json_builder_add_string_value(b, value);
    else
        json_builder_add_null_value(b);
}

static void
add_int(JsonBuilder *b, const char *name, gint64 value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, value);
}

static void
add_files(JsonBuilder *b, GPtrArray *files)
{
    json_builder_set_member_name(b, "files");
    json_builder_begin_array(b);
    for (guint i = 0; files && i < files->len; i++) {
        const CarrelEvidenceFile *f = g_ptr_array_index(files, i);

        json_builder_begin_object(b);
        add_string(b, "path", f->path);
        add_string(b, "kind", f->kind);
        add_int(b, "size", (gint64)f->size);
        add_string(b, "sha256", f->sha256);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

char *
carrel_evidence_manifest_to_text(const CarrelEvidenceManifest *m)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;
    g_autofree char *text = NULL;

    json_builder_begin_object(b);
    add_string(b, "format", CARREL_EVIDENCE_FORMAT);
    add_string(b, "carrel_version", m->carrel_version);
    json_builder_set_member_name(b, "session");
    json_builder_begin_object(b);
    add_string(b, "id", m->session_id);
    add_string(b, "name", m->session_name);
    add_string(b, "template", m->template_name);
    add_int(b, "template_version", m->template_version);
    add_string(b, "state", m->state);
    add_string(b, "policy", m->policy);
    add_int(b, "created_at", m->created_at);
    add_int(b, "updated_at", m->updated_at);
    json_builder_end_object(b);
    add_int(b, "exported_at", m->exported_at);
    add_string(b, "exported_by", m->exported_by);
    json_builder_set_member_name(b, "host_key");
    json_builder_begin_object(b);
    add_string(b, "algorithm", "ed25519");
    add_string(b, "public_key", m->host_key);
    add_string(b, "fingerprint", m->host_fingerprint);
    json_builder_end_object(b);
    add_recording(b, m->files);
    add_files(b, m->files);
    json_builder_end_object(b);
    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    json_generator_set_indent(gen, 2);
    text = json_generator_to_data(gen, NULL);
    return g_strconcat(text, "\n", NULL);
}

static gboolean
bad_manifest(GError **error, const char *what)
{
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "manifest: %s", what);
    return FALSE;
}

/* o's member name when it is an object, else NULL. */
static JsonObject *
object_member(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

static char *
dup_member(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
               ? g_strdup(json_node_get_string(n))
               : NULL;
}

static gint64
int_member(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_INT64
               ? json_node_get_int(n)
               : -1;
}

static gboolean
is_sha256(const char *text)
{
    return text && strlen(text) == 64 && strspn(text, "0123456789abcdef") == 64;
}

static gboolean
parse_files(JsonArray *files, CarrelEvidenceManifest *m, GError **error)
{
    guint n = json_array_get_length(files);

    if (n > CARREL_EVIDENCE_MAX_MEMBERS)
        return bad_manifest(error, "too many files");
    for (guint i = 0; i < n; i++) {
        JsonNode *node = json_array_get_element(files, i);
        JsonObject *o = JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
        g_autoptr(CarrelEvidenceFile) f = g_new0(CarrelEvidenceFile, 1);
        gint64 size = int_member(o, "size");

        f->path = dup_member(o, "path");
        f->kind = dup_member(o, "kind");
        f->sha256 = dup_member(o, "sha256");
        if (!f->path || !carrel_evidence_check_name(f->path, error)) {
            if (error && *error)
                g_prefix_error(error, "manifest: ");
            return f->path ? FALSE : bad_manifest(error, "a file without a path");
        }
        if (size < 0 || !is_sha256(f->sha256)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "manifest: file '%s' lacks a size or a sha256", f->path);
            return FALSE;
        }
        f->size = (guint64)size;
        g_ptr_array_add(m->files, g_steal_pointer(&f));
    }
    return TRUE;
}

CarrelEvidenceManifest *
carrel_evidence_manifest_parse(const char *text, gsize len, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(CarrelEvidenceManifest) m = carrel_evidence_manifest_new();
    g_autofree char *format = NULL;
    JsonObject *root, *session, *key;
    JsonNode *files;

    if (len > CARREL_EVIDENCE_MAX_MEMORY_MEMBER ||
        !carrel_util_json_structure_ok(text, len, CARREL_EVIDENCE_JSON_DEPTH) ||
        !json_parser_load_from_data(parser, text, (gssize)len, NULL) ||
        !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        bad_manifest(error, "not a JSON object");
        return NULL;
    }
    root = json_node_get_object(json_parser_get_root(parser));
    format = dup_member(root, "format");
    if (g_strcmp0(format, CARREL_EVIDENCE_FORMAT) != 0) {
        bad_manifest(error, "format is not '" CARREL_EVIDENCE_FORMAT "'");
        return NULL;
    }
    session = object_member(root, "session");
    key = object_member(root, "host_key");
    m->carrel_version = dup_member(root, "carrel_version");
    m->session_id = dup_member(session, "id");
    m->session_name = dup_member(session, "name");
    m->template_name = dup_member(session, "template");
    m->template_version = (guint)MAX(int_member(session, "template_version"), 0);
    m->state = dup_member(session, "state");
    m->policy = dup_member(session, "policy");
    m->created_at = int_member(session, "created_at");
    m->updated_at = int_member(session, "updated_at");
    m->exported_at = int_member(root, "exported_at");
    m->exported_by = dup_member(root, "exported_by");
    m->host_key = dup_member(key, "public_key");
    m->host_fingerprint = dup_member(key, "fingerprint");
    files = json_object_get_member(root, "files");
    if (!m->session_id || !m->host_key || !files || !JSON_NODE_HOLDS_ARRAY(files)) {
        bad_manifest(error, "session id, host key or files missing");
        return NULL;
    }
    if (!parse_files(json_node_get_array(files), m, error))
        return NULL;
    return g_steal_pointer(&m);
}

static gboolean
name_char_ok(char c)
{
    return g_ascii_isalnum(c) || strchr("._@+=,-", c) != NULL;
}

gboolean
carrel_evidence_check_name(const char *name, GError **error)
{
    g_auto(GStrv) segments = NULL;
    const char *why = NULL;
    gsize len = name ? strlen(name) : 0;

    if (len == 0 || len > CARREL_EVIDENCE_MAX_NAME)
        why = "empty or too long";
    for (gsize i = 0; !why && i < len; i++)
        if (name[i] != '/' && !name_char_ok(name[i]))
            why = "a character outside [A-Za-z0-9._@+=,-/]";
    if (!why) {
        segments = g_strsplit(name, "/", -1);
        for (guint i = 0; !why && segments[i]; i++)
            if (!*segments[i] || g_str_equal(segments[i], ".") || g_str_equal(segments[i], ".."))
                why = "an absolute path, or an empty, '.' or '..' segment";
    }
    if (!why)
        return TRUE;
    {
        g_autofree char *clean = g_strescape(name ? name : "", NULL);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "member name '%.200s' has %s",
                    clean, why);
    }
    return FALSE;
}
