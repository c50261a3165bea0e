/* The index of a recording folder: what its segments are, read back for the API and export. */
#include <string.h>

#include "record/record-priv.h"

void
carrel_record_segment_free(CarrelRecordSegment *seg)
{
    if (!seg)
        return;
    g_free(seg->name);
    g_free(seg->sha256);
    g_free(seg);
}

void
carrel_record_index_free(CarrelRecordIndex *index)
{
    if (!index)
        return;
    g_clear_pointer(&index->segments, g_ptr_array_unref);
    g_free(index);
}

CarrelRecordIndex *
carrel_record_index_new(void)
{
    CarrelRecordIndex *index = g_new0(CarrelRecordIndex, 1);

    index->segments = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_record_segment_free);
    index->next = 1;
    return index;
}

gboolean
carrel_record_name_ok(const char *name)
{
    if (!name || strlen(name) != strlen("seg-000000.webm") || !g_str_has_prefix(name, "seg-") ||
        !g_str_has_suffix(name, ".webm"))
        return FALSE;
    for (guint i = 4; i < 10; i++)
        if (!g_ascii_isdigit(name[i]))
            return FALSE;
    return TRUE;
}

const CarrelRecordSegment *
carrel_record_index_finished(const CarrelRecordIndex *index, const char *name)
{
    for (guint i = 0; i < index->segments->len; i++) {
        const CarrelRecordSegment *seg = g_ptr_array_index(index->segments, i);
        if (!seg->open && g_str_equal(seg->name, name))
            return seg;
    }
    return NULL;
}

CarrelRecordIndex *
carrel_record_index_copy(const CarrelRecordIndex *index)
{
    CarrelRecordIndex *copy = carrel_record_index_new();

    copy->dropped = index->dropped;
    copy->next = index->next;
    for (guint i = 0; i < index->segments->len; i++) {
        const CarrelRecordSegment *seg = g_ptr_array_index(index->segments, i);
        CarrelRecordSegment *c = g_memdup2(seg, sizeof(*seg));
        c->name = g_strdup(seg->name);
        c->sha256 = g_strdup(seg->sha256);
        g_ptr_array_add(copy->segments, c);
    }
    return copy;
}

static void
add_int(JsonBuilder *b, const char *name, gint64 value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, value);
}

gboolean
carrel_record_index_save(const CarrelRecordIndex *index, const char *dir, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) root = NULL;
    g_autofree char *text = NULL;
    g_autofree char *path = g_build_filename(dir, CARREL_RECORD_INDEX, NULL);

    json_builder_begin_object(b);
    add_int(b, "dropped", index->dropped);
    add_int(b, "next", index->next);
    json_builder_set_member_name(b, "segments");
    json_builder_begin_array(b);
    for (guint i = 0; i < index->segments->len; i++) {
        const CarrelRecordSegment *seg = g_ptr_array_index(index->segments, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, seg->name);
        add_int(b, "started_at", seg->started_ms);
        add_int(b, "ended_at", seg->ended_ms);
        add_int(b, "frames", seg->frames);
        add_int(b, "bytes", (gint64)seg->bytes);
        json_builder_set_member_name(b, "sha256");
        json_builder_add_string_value(b, seg->sha256);
        json_builder_set_member_name(b, "open");
        json_builder_add_boolean_value(b, seg->open);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    root = json_builder_get_root(b);
    text = json_to_string(root, TRUE);
    /* Atomic: a reader (the API) sees the old index or the new one, never half of one. */
    return carrel_util_write_file(path, text, -1, 0600, error);
}

static gboolean
bad_index(const char *path, const char *why, GError **error)
{
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "recording index '%s': %s", path,
                why);
    return FALSE;
}

/* One entry of the index's segments; FALSE (and error) when it is not a well-formed one. */
static gboolean
parse_segment(JsonNode *node, const char *path, CarrelRecordSegment **ret_seg, GError **error)
{
    JsonObject *o = JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
    g_autoptr(CarrelRecordSegment) seg = g_new0(CarrelRecordSegment, 1);
    const char *name = o ? json_object_get_string_member_with_default(o, "name", NULL) : NULL;
    const char *sha = o ? json_object_get_string_member_with_default(o, "sha256", NULL) : NULL;

    if (!o || !carrel_record_name_ok(name))
        return bad_index(path, "a segment without a valid name", error);
    seg->name = g_strdup(name);
    seg->started_ms = json_object_get_int_member_with_default(o, "started_at", 0);
    seg->ended_ms = json_object_get_int_member_with_default(o, "ended_at", 0);
    seg->frames =
        (guint)CLAMP(json_object_get_int_member_with_default(o, "frames", 0), 0, G_MAXUINT);
    seg->bytes = (guint64)MAX(json_object_get_int_member_with_default(o, "bytes", 0), 0);
    seg->open = json_object_get_boolean_member_with_default(o, "open", FALSE);
    if (sha && strlen(sha) == 64)
        seg->sha256 = g_strdup(sha);
    *ret_seg = g_steal_pointer(&seg);
    return TRUE;
}

CarrelRecordIndex *
carrel_record_index_load(const char *dir, GError **error)
{
    g_autofree char *path = g_build_filename(dir, CARREL_RECORD_INDEX, NULL);
    g_autoptr(CarrelRecordIndex) index = carrel_record_index_new();
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *text = NULL;
    gsize len = 0;
    JsonObject *root;
    JsonArray *segs;
    JsonNode *member;

    if (!g_file_test(path, G_FILE_TEST_EXISTS))
        return g_steal_pointer(&index);
    if (!g_file_get_contents(path, &text, &len, error))
        return NULL;
    if (len > 4 * 1024 * 1024 || !carrel_util_json_structure_ok(text, len, 8) ||
        !json_parser_load_from_data(parser, text, (gssize)len, NULL) ||
        !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        bad_index(path, "not a JSON object", error);
        return NULL;
    }
    root = json_node_get_object(json_parser_get_root(parser));
    index->dropped =
        (guint)CLAMP(json_object_get_int_member_with_default(root, "dropped", 0), 0, G_MAXUINT);
    index->next = (guint)CLAMP(json_object_get_int_member_with_default(root, "next", 1), 1, 999999);
    member = json_object_get_member(root, "segments");
    segs = member && JSON_NODE_HOLDS_ARRAY(member) ? json_node_get_array(member) : NULL;
    for (guint i = 0; segs && i < json_array_get_length(segs); i++) {
        CarrelRecordSegment *seg = NULL;
        if (!parse_segment(json_array_get_element(segs, i), path, &seg, error))
            return NULL;
        g_ptr_array_add(index->segments, seg);
    }
    return g_steal_pointer(&index);
}
