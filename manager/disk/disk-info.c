#include <json-glib/json-glib.h>
#include <string.h>

#include "disk/disk.h"

/* qemu-img's own output is a few KiB and nests 3-4 levels; anything far beyond is hostile. */
#define INFO_MAX_BYTES CARREL_LIMIT_BODY_BYTES
#define INFO_MAX_DEPTH 32
#define INFO_MAX_FORMAT_LEN 32
#define INFO_MAX_PATH_LEN 4096

void
carrel_disk_info_free(CarrelDiskInfo *info)
{
    if (!info)
        return;
    g_free(info->format);
    g_free(info->backing_filename);
    g_free(info->backing_format);
    g_free(info->data_file);
    g_free(info);
}

static gboolean
get_string(JsonObject *obj, const char *member, gboolean required, gsize max_len, char **ret_value,
           GError **error)
{
    JsonNode *node = json_object_get_member(obj, member);
    const char *value;

    if (!node) {
        if (required) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' is missing", member);
            return FALSE;
        }
        *ret_value = NULL;
        return TRUE;
    }
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' is not a string", member);
        return FALSE;
    }
    value = json_node_get_string(node);
    if (strlen(value) == 0 || strlen(value) > max_len || !carrel_util_is_clean_text(value)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'%s' is empty, too long or not clean text", member);
        return FALSE;
    }
    *ret_value = g_strdup(value);
    return TRUE;
}

static gboolean
get_size(JsonObject *obj, const char *member, gboolean required, guint64 *ret_value, GError **error)
{
    JsonNode *node = json_object_get_member(obj, member);
    gint64 value;

    if (!node) {
        if (required) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' is missing", member);
            return FALSE;
        }
        *ret_value = 0;
        return TRUE;
    }
    /* Integers only: a double such as 1e30 must not be squeezed into a size. */
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' is not an integer",
                    member);
        return FALSE;
    }
    value = json_node_get_int(node);
    if (value < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' is negative", member);
        return FALSE;
    }
    *ret_value = (guint64)value;
    return TRUE;
}

static gboolean
get_bool(JsonObject *obj, const char *member, gboolean *ret_value, GError **error)
{
    JsonNode *node = obj ? json_object_get_member(obj, member) : NULL;

    *ret_value = FALSE;
    if (!node)
        return TRUE;
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_BOOLEAN) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' is not a boolean", member);
        return FALSE;
    }
    *ret_value = json_node_get_boolean(node);
    return TRUE;
}

/* An optional member that must be an object when present; *ret_obj NULL when absent. */
static gboolean
get_object(JsonObject *obj, const char *member, JsonObject **ret_obj, GError **error)
{
    JsonNode *node = obj ? json_object_get_member(obj, member) : NULL;

    *ret_obj = NULL;
    if (!node)
        return TRUE;
    if (!JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' is not an object", member);
        return FALSE;
    }
    *ret_obj = json_node_get_object(node);
    return TRUE;
}

static gboolean
read_format_specific(JsonObject *root, CarrelDiskInfo *info, GError **error)
{
    JsonObject *specific = NULL;
    JsonObject *data = NULL;

    if (!get_object(root, "format-specific", &specific, error) ||
        !get_object(specific, "data", &data, error) ||
        !get_bool(data, "corrupt", &info->corrupt, error))
        return FALSE;
    if (data && !get_string(data, "data-file", FALSE, INFO_MAX_PATH_LEN, &info->data_file, error))
        return FALSE;
    return TRUE;
}

static CarrelDiskInfo *
info_from_object(JsonObject *root, GError **error)
{
    g_autoptr(CarrelDiskInfo) info = g_new0(CarrelDiskInfo, 1);

    if (!get_string(root, "format", TRUE, INFO_MAX_FORMAT_LEN, &info->format, error) ||
        !get_size(root, "virtual-size", TRUE, &info->virtual_size, error) ||
        !get_size(root, "actual-size", FALSE, &info->actual_size, error) ||
        !get_string(root, "backing-filename", FALSE, INFO_MAX_PATH_LEN, &info->backing_filename,
                    error) ||
        !get_string(root, "backing-filename-format", FALSE, INFO_MAX_FORMAT_LEN,
                    &info->backing_format, error) ||
        !get_bool(root, "encrypted", &info->encrypted, error) ||
        !read_format_specific(root, info, error))
        return NULL;
    return g_steal_pointer(&info);
}

CarrelDiskInfo *
carrel_disk_info_parse(const char *json, gsize len, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) local = NULL;
    CarrelDiskInfo *info;
    JsonNode *root;

    if (!json || len == 0 || len > INFO_MAX_BYTES || memchr(json, '\0', len) ||
        !carrel_util_json_structure_ok(json, len, INFO_MAX_DEPTH)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "qemu-img info output is empty, over %d bytes, nested too deep or has NUL "
                    "characters",
                    INFO_MAX_BYTES);
        return NULL;
    }
    if (!json_parser_load_from_data(parser, json, (gssize)len, &local)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "qemu-img info output is not JSON: %s", local->message);
        return NULL;
    }
    root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "qemu-img info output is not a JSON object");
        return NULL;
    }
    info = info_from_object(json_node_get_object(root), error);
    if (!info)
        g_prefix_error(error, "qemu-img info output: ");
    return info;
}

typedef struct {
    const char *format;
    gsize offset;
    const char *magic;
    gsize len;
} DiskMagic;

/*
 * Every format QEMU's probing recognises from a file's first sector. A "raw" disk that starts
 * like one of these is refused: if anything ever probed it, the guest-written header (say a
 * qcow2 one naming /etc/shadow as backing file) would be obeyed.
 */
static const DiskMagic magics[] = {
    {"qcow2", 0, "QFI\xfb", 4},
    {"qed", 0, "QED\0", 4},
    {"vmdk", 0, "KDMV", 4},
    {"vmdk", 0, "COWD", 4},
    {"vmdk", 0, "# Disk DescriptorFile", 21},
    {"vdi", 0x40, "\x7f\x10\xda\xbe", 4},
    {"vhdx", 0, "vhdxfile", 8},
    {"vpc", 0, "conectix", 8},
    {"luks", 0, "LUKS\xba\xbe", 6},
    {"parallels", 0, "WithoutFreeSpace", 16},
    {"parallels", 0, "WithouFreSpacExt", 16},
    {"bochs", 0, "Bochs Virtual HD Image", 22},
    {"cloop", 0, "#!/bin/sh\n#V2.0 Format\n", 23},
};

const char *
carrel_disk_detect_format(const guint8 *head, gsize len)
{
    for (gsize i = 0; i < G_N_ELEMENTS(magics); i++) {
        const DiskMagic *m = &magics[i];

        if (m->offset + m->len <= len && memcmp(head + m->offset, m->magic, m->len) == 0)
            return m->format;
    }
    return NULL;
}
