/* Artifacts, extractions, extract requests and file diffs: records and their JSON. */
#include "conf/conf-priv.h"

static const char *const file_type_names[CARREL_FILE_LAST] = {
    [CARREL_FILE_REGULAR] = "file",    [CARREL_FILE_DIR] = "dir",
    [CARREL_FILE_SYMLINK] = "symlink", [CARREL_FILE_HARDLINK] = "hardlink",
    [CARREL_FILE_OTHER] = "other",
};

const char *
carrel_file_type_to_string(CarrelFileType type)
{
    return type < CARREL_FILE_LAST ? file_type_names[type] : "other";
}

CarrelFileType
carrel_file_type_from_string(const char *name)
{
    for (guint i = 0; i < CARREL_FILE_LAST; i++)
        if (g_strcmp0(name, file_type_names[i]) == 0)
            return (CarrelFileType)i;
    return CARREL_FILE_LAST;
}

CarrelArtifact *
carrel_artifact_new(void)
{
    return g_new0(CarrelArtifact, 1);
}

void
carrel_artifact_free(CarrelArtifact *artifact)
{
    if (!artifact)
        return;
    g_free(artifact->id);
    g_free(artifact->extraction_id);
    g_free(artifact->session_id);
    g_free(artifact->guest_path);
    g_free(artifact->path);
    g_free(artifact->sha256);
    g_free(artifact->link_target);
    g_free(artifact->skipped);
    g_free(artifact);
}

static void
add_int(JsonBuilder *b, const char *member, gint64 value)
{
    json_builder_set_member_name(b, member);
    json_builder_add_int_value(b, value);
}

JsonNode *
carrel_artifact_to_json(const CarrelArtifact *artifact)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *mode = g_strdup_printf("%04o", artifact->mode);
    g_autofree char *created = carrel_util_format_time(artifact->created_at);

    json_builder_begin_object(b);
    carrel_conf_add_optional_string(b, "id", artifact->id);
    carrel_conf_add_optional_string(b, "extraction_id", artifact->extraction_id);
    carrel_conf_add_optional_string(b, "session_id", artifact->session_id);
    carrel_conf_add_optional_string(b, "guest_path", artifact->guest_path);
    carrel_conf_add_optional_string(b, "path", artifact->path);
    carrel_conf_add_optional_string(b, "type", carrel_file_type_to_string(artifact->type));
    add_int(b, "size", (gint64)artifact->size);
    carrel_conf_add_optional_string(b, "mode", mode);
    add_int(b, "uid", artifact->uid);
    add_int(b, "gid", artifact->gid);
    add_int(b, "mtime", artifact->mtime);
    carrel_conf_add_optional_string(b, "sha256", artifact->sha256);
    carrel_conf_add_optional_string(b, "link_target", artifact->link_target);
    carrel_conf_add_optional_string(b, "skipped", artifact->skipped);
    carrel_conf_add_optional_string(b, "created_at", created);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

CarrelExtraction *
carrel_extraction_new(void)
{
    CarrelExtraction *x = g_new0(CarrelExtraction, 1);

    x->artifacts = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_artifact_free);
    return x;
}

void
carrel_extraction_free(CarrelExtraction *x)
{
    if (!x)
        return;
    g_free(x->id);
    g_free(x->session_id);
    g_free(x->reason);
    g_free(x->source);
    g_free(x->dir);
    g_strfreev(x->paths);
    if (x->missing)
        json_node_unref(x->missing);
    g_free(x->error);
    g_ptr_array_unref(x->artifacts);
    g_free(x);
}

static void
add_strv(JsonBuilder *b, const char *member, char **strv)
{
    json_builder_set_member_name(b, member);
    json_builder_begin_array(b);
    for (guint i = 0; strv && strv[i]; i++)
        json_builder_add_string_value(b, strv[i]);
    json_builder_end_array(b);
}

/* The members stored as the extraction's detail, and shown by the API. */
static void
add_detail(JsonBuilder *b, const CarrelExtraction *x)
{
    add_strv(b, "paths", x->paths);
    json_builder_set_member_name(b, "missing");
    if (x->missing)
        json_builder_add_value(b, json_node_copy(x->missing));
    else {
        json_builder_begin_array(b);
        json_builder_end_array(b);
    }
    carrel_conf_add_optional_string(b, "error", x->error);
    add_int(b, "bytes", (gint64)x->bytes);
    add_int(b, "count", x->count);
    add_int(b, "duration_ms", x->duration_ms);
}

char *
carrel_extraction_detail_to_text(const CarrelExtraction *x)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) root = NULL;

    json_builder_begin_object(b);
    add_detail(b, x);
    json_builder_end_object(b);
    root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

gboolean
carrel_extraction_detail_from_text(CarrelExtraction *x, const char *text, GError **error)
{
    g_autoptr(JsonNode) root = carrel_conf_parse_json(text, strlen(text), error);
    JsonObject *obj;
    JsonNode *missing;

    if (!root)
        return FALSE;
    if (!JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "extraction detail is not an object");
        return FALSE;
    }
    obj = json_node_get_object(root);
    if (!carrel_conf_get_string_array(obj, "paths", G_MAXUINT, &x->paths, error) ||
        !carrel_conf_get_string(obj, "error", FALSE, &x->error, error))
        return FALSE;
    missing = carrel_conf_get_node(obj, "missing");
    x->missing = missing && JSON_NODE_HOLDS_ARRAY(missing) ? json_node_copy(missing) : NULL;
    x->bytes = (guint64)MAX(0, json_object_get_int_member_with_default(obj, "bytes", 0));
    x->count = (guint)CLAMP(json_object_get_int_member_with_default(obj, "count", 0), 0, G_MAXUINT);
    x->duration_ms = json_object_get_int_member_with_default(obj, "duration_ms", 0);
    return TRUE;
}

JsonNode *
carrel_extraction_to_json(const CarrelExtraction *x)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *created = carrel_util_format_time(x->created_at);

    json_builder_begin_object(b);
    carrel_conf_add_optional_string(b, "id", x->id);
    carrel_conf_add_optional_string(b, "session_id", x->session_id);
    carrel_conf_add_optional_string(b, "reason", x->reason);
    carrel_conf_add_optional_string(b, "source", x->source);
    add_detail(b, x);
    carrel_conf_add_optional_string(b, "created_at", created);
    json_builder_set_member_name(b, "artifacts");
    json_builder_begin_array(b);
    for (guint i = 0; i < x->artifacts->len; i++)
        json_builder_add_value(b, carrel_artifact_to_json(g_ptr_array_index(x->artifacts, i)));
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

void
carrel_extract_request_free(CarrelExtractRequest *req)
{
    if (!req)
        return;
    g_strfreev(req->paths);
    g_free(req);
}

gboolean
carrel_extract_check_paths(char **paths, GError **error)
{
    if (!paths || !paths[0]) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "no paths to extract");
        return FALSE;
    }
    for (guint i = 0; paths[i]; i++) {
        if (!carrel_util_check_guest_path(paths[i], error))
            return FALSE;
        if (g_str_equal(paths[i], "/")) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "extracting the whole disk ('/') is refused: name the folders to take");
            return FALSE;
        }
    }
    return TRUE;
}

CarrelExtractRequest *
carrel_extract_request_from_json(JsonNode *node, GError **error)
{
    static const char *const allowed[] = {"paths", "max_bytes_mib", "max_files", NULL};
    g_autoptr(CarrelExtractRequest) req = g_new0(CarrelExtractRequest, 1);
    guint max_mib = CARREL_LIMIT_EXTRACT_BYTES / (1024 * 1024);
    JsonObject *obj;

    req->max_files = CARREL_LIMIT_EXTRACT_FILES;
    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "expected a JSON object");
        return NULL;
    }
    obj = json_node_get_object(node);
    if (!carrel_conf_check_members(obj, allowed, error) ||
        !carrel_conf_get_string_array(obj, "paths", CARREL_LIMIT_EXTRACT_PATHS, &req->paths,
                                      error) ||
        !carrel_conf_get_uint(obj, "max_bytes_mib", 1, CARREL_LIMIT_EXTRACT_MAX_MIB, &max_mib,
                              error) ||
        !carrel_conf_get_uint(obj, "max_files", 1, CARREL_LIMIT_EXTRACT_MAX_FILES, &req->max_files,
                              error) ||
        !carrel_extract_check_paths(req->paths, error))
        return NULL;
    req->max_bytes = (guint64)max_mib * 1024 * 1024;
    return g_steal_pointer(&req);
}

void
carrel_diff_entry_free(CarrelDiffEntry *entry)
{
    if (!entry)
        return;
    g_free(entry->path);
    g_free(entry->sha256);
    g_free(entry);
}

static const char *const change_names[] = {"added", "changed", "removed"};

JsonNode *
carrel_diff_to_json(GPtrArray *entries)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    for (guint c = 0; c < G_N_ELEMENTS(change_names); c++) {
        json_builder_set_member_name(b, change_names[c]);
        json_builder_begin_array(b);
        for (guint i = 0; i < entries->len; i++) {
            CarrelDiffEntry *e = g_ptr_array_index(entries, i);
            g_autofree char *mode = g_strdup_printf("%04o", e->mode);
            if ((guint)e->change != c)
                continue;
            json_builder_begin_object(b);
            carrel_conf_add_optional_string(b, "path", e->path);
            carrel_conf_add_optional_string(b, "type", carrel_file_type_to_string(e->type));
            add_int(b, "size", (gint64)e->size);
            carrel_conf_add_optional_string(b, "mode", mode);
            if (e->sha256)
                carrel_conf_add_optional_string(b, "sha256", e->sha256);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
