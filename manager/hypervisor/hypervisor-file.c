/*
 * Files through qemu-guest-agent's guest-file-* commands: the command texts and the parsers of
 * their untrusted replies. The transfer loops live in the backends.
 */
#include <string.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

/* qemu-ga hands out handles from 1000 upwards as int64; anything else is not its. */
#define HANDLE_MIN 1
#define HANDLE_MAX G_MAXINT64

/* {"execute": name, "arguments": {"handle": handle ...; left open. */
static JsonBuilder *
begin_handle_command(const char *name, gint64 handle)
{
    JsonBuilder *builder = json_builder_new();

    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "execute");
    json_builder_add_string_value(builder, name);
    json_builder_set_member_name(builder, "arguments");
    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "handle");
    json_builder_add_int_value(builder, handle);
    return builder;
}

static char *
end_command(JsonBuilder *builder)
{
    json_builder_end_object(builder);
    json_builder_end_object(builder);
    return carrel_hypervisor_json_text(builder);
}

char *
carrel_hypervisor_agent_file_open_command(const char *path, const char *mode)
{
    g_autoptr(JsonBuilder) builder = json_builder_new();

    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "execute");
    json_builder_add_string_value(builder, "guest-file-open");
    json_builder_set_member_name(builder, "arguments");
    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "path");
    json_builder_add_string_value(builder, path);
    json_builder_set_member_name(builder, "mode");
    json_builder_add_string_value(builder, mode);
    return end_command(builder);
}

char *
carrel_hypervisor_agent_file_read_command(gint64 handle, gsize count)
{
    g_autoptr(JsonBuilder) builder = begin_handle_command("guest-file-read", handle);

    json_builder_set_member_name(builder, "count");
    json_builder_add_int_value(builder, (gint64)count);
    return end_command(builder);
}

char *
carrel_hypervisor_agent_file_write_command(gint64 handle, const guint8 *data, gsize len)
{
    g_autoptr(JsonBuilder) builder = begin_handle_command("guest-file-write", handle);
    g_autofree char *b64 = g_base64_encode(data, len);

    json_builder_set_member_name(builder, "buf-b64");
    json_builder_add_string_value(builder, b64);
    return end_command(builder);
}

char *
carrel_hypervisor_agent_file_close_command(gint64 handle)
{
    g_autoptr(JsonBuilder) builder = begin_handle_command("guest-file-close", handle);

    return end_command(builder);
}

CarrelErrorCode
carrel_hypervisor_agent_file_open_code(CarrelErrorCode code, const char *libvirt_text)
{
    /* The suffix, not anywhere: the path the caller chose is in the text too. */
    if (code == CARREL_ERROR_HYPERVISOR && libvirt_text &&
        g_str_has_suffix(libvirt_text, ": No such file or directory"))
        return CARREL_ERROR_NOT_FOUND;
    return code;
}

gboolean
carrel_hypervisor_agent_parse_file_handle(const char *reply, gint64 *ret_handle, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    JsonNode *ret = carrel_hypervisor_agent_reply_return(parser, reply, error);
    gint64 handle;

    if (!ret)
        return FALSE;
    if (!JSON_NODE_HOLDS_VALUE(ret) || json_node_get_value_type(ret) != G_TYPE_INT64 ||
        (handle = json_node_get_int(ret)) < HANDLE_MIN || handle > HANDLE_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest agent reply has no valid file handle");
        return FALSE;
    }
    *ret_handle = handle;
    return TRUE;
}

static JsonObject *
return_object(JsonParser *parser, const char *reply, GError **error)
{
    JsonNode *ret = carrel_hypervisor_agent_reply_return(parser, reply, error);

    if (!ret)
        return NULL;
    if (!JSON_NODE_HOLDS_OBJECT(ret)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest agent reply has no 'return' object");
        return NULL;
    }
    return json_node_get_object(ret);
}

gboolean
carrel_hypervisor_agent_parse_file_read(const char *reply, gsize max, GBytes **ret_data,
                                        gboolean *ret_eof, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GBytes) data = NULL;
    JsonObject *ret = return_object(parser, reply, error);
    gboolean eof = FALSE, cut = FALSE, present = FALSE;
    gint64 count = 0;

    if (!ret || !carrel_hypervisor_agent_get_bool(ret, "eof", &eof, error) ||
        !carrel_hypervisor_agent_get_int(ret, "count", 0, (gint64)max, &present, &count, error) ||
        !carrel_hypervisor_agent_get_base64(ret, "buf-b64", max, &data, &cut, error))
        return FALSE;
    /* More than asked for, or a count that disagrees with the data: not a qemu-ga we know. */
    if (cut || !present || (gsize)count != g_bytes_get_size(data)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest agent file read reply is inconsistent");
        return FALSE;
    }
    *ret_data = g_steal_pointer(&data);
    *ret_eof = eof;
    return TRUE;
}

gboolean
carrel_hypervisor_agent_parse_file_write(const char *reply, gsize max, gsize *ret_count,
                                         GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    JsonObject *ret = return_object(parser, reply, error);
    gboolean present = FALSE;
    gint64 count = 0;

    if (!ret ||
        !carrel_hypervisor_agent_get_int(ret, "count", 0, (gint64)max, &present, &count, error))
        return FALSE;
    if (!present) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest agent file write reply has no 'count'");
        return FALSE;
    }
    *ret_count = (gsize)count;
    return TRUE;
}
