/*
 * The guest-exec protocol of qemu-ga: the commands carrel sends and the parsers of the replies.
 * Every reply comes from the guest, so it is untrusted: bounded, depth-checked before json-glib
 * sees it, and every member type-checked. No I/O here.
 */
#include <string.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

/* Replies are {"return": {...}}: nothing legitimate nests deeper. */
#define REPLY_MAX_DEPTH 4
/* qemu-ga's pids are the guest's; Linux caps them at 2^22, any pid_t fits in 31 bits. */
#define PID_MAX G_MAXINT32
/* Ends the program: pid leads a process group (carrel-run's or timeout's) holding its children. */
#define KILL_SCRIPT "kill -KILL -- \"-$1\" \"$1\""

gboolean
carrel_hypervisor_exec_check_args(const char *const *argv, GBytes *stdin_bytes, guint timeout_s,
                                  gsize max_output, GError **error)
{
    gsize count = 0, bytes = 0;

    if (!argv || !argv[0] || !*argv[0]) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "program name is required");
        return FALSE;
    }
    for (; argv[count]; count++) {
        bytes += strlen(argv[count]) + 1;
        if (count >= CARREL_HYPERVISOR_EXEC_MAX_ARGS ||
            bytes > CARREL_HYPERVISOR_EXEC_MAX_ARGV_BYTES) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "arguments exceed %d items or %d bytes", CARREL_HYPERVISOR_EXEC_MAX_ARGS,
                        CARREL_HYPERVISOR_EXEC_MAX_ARGV_BYTES);
            return FALSE;
        }
        /* JSON strings are UTF-8; anything else would be mangled on its way to the guest. */
        if (!g_utf8_validate(argv[count], -1, NULL)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "argument %" G_GSIZE_FORMAT " is not valid UTF-8", count);
            return FALSE;
        }
    }
    if (stdin_bytes && g_bytes_get_size(stdin_bytes) > CARREL_HYPERVISOR_EXEC_MAX_INPUT) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "standard input exceeds %d bytes", CARREL_HYPERVISOR_EXEC_MAX_INPUT);
        return FALSE;
    }
    if (timeout_s == 0 || timeout_s > CARREL_HYPERVISOR_EXEC_MAX_TIMEOUT_S) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "timeout '%u' s is not between 1 and %d", timeout_s,
                    CARREL_HYPERVISOR_EXEC_MAX_TIMEOUT_S);
        return FALSE;
    }
    if (max_output > CARREL_HYPERVISOR_EXEC_MAX_OUTPUT) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "output limit '%" G_GSIZE_FORMAT "' exceeds %d bytes", max_output,
                    CARREL_HYPERVISOR_EXEC_MAX_OUTPUT);
        return FALSE;
    }
    return TRUE;
}

char *
carrel_hypervisor_json_text(JsonBuilder *builder)
{
    g_autoptr(JsonGenerator) generator = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(builder);

    json_generator_set_root(generator, root);
    return json_generator_to_data(generator, NULL);
}

/* {"execute": "guest-exec", "arguments": {"path": path, "arg": [...] ...; left open. */
static JsonBuilder *
begin_exec(const char *path)
{
    JsonBuilder *builder = json_builder_new();

    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "execute");
    json_builder_add_string_value(builder, "guest-exec");
    json_builder_set_member_name(builder, "arguments");
    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "path");
    json_builder_add_string_value(builder, path);
    json_builder_set_member_name(builder, "arg");
    json_builder_begin_array(builder);
    return builder;
}

char *
carrel_hypervisor_agent_exec_command(const char *const *argv, GBytes *stdin_bytes, guint timeout_s,
                                     gboolean with_runner)
{
    g_autoptr(JsonBuilder) builder =
        begin_exec(with_runner ? CARREL_HYPERVISOR_EXEC_RUNNER : "timeout");
    g_autofree char *seconds = g_strdup_printf("%u", timeout_s);

    /*
     * Both stop parsing options at the duration, so argv[0] is never taken for one of theirs;
     * timeout(1) without --foreground leads a new process group and kills all of it, as
     * carrel-run does.
     */
    if (!with_runner)
        json_builder_add_string_value(builder, "--signal=KILL");
    json_builder_add_string_value(builder, seconds);
    for (gsize i = 0; argv[i]; i++)
        json_builder_add_string_value(builder, argv[i]);
    json_builder_end_array(builder);
    json_builder_set_member_name(builder, "capture-output");
    json_builder_add_boolean_value(builder, TRUE);
    if (stdin_bytes) {
        gsize len = 0;
        const guchar *data = g_bytes_get_data(stdin_bytes, &len);
        g_autofree char *encoded = g_base64_encode(data, len);

        json_builder_set_member_name(builder, "input-data");
        json_builder_add_string_value(builder, encoded);
    }
    json_builder_end_object(builder);
    json_builder_end_object(builder);
    return carrel_hypervisor_json_text(builder);
}

gboolean
carrel_hypervisor_agent_runner_missing(const char *message)
{
    /* qemu-ga passes GLib's "Failed to execute child process “PATH” (REASON)" on. */
    return message && strstr(message, "Failed to execute child process") &&
           strstr(message, CARREL_HYPERVISOR_EXEC_RUNNER);
}

char *
carrel_hypervisor_agent_status_command(gint64 pid)
{
    return g_strdup_printf(
        "{\"execute\":\"guest-exec-status\",\"arguments\":{\"pid\":%" G_GINT64_FORMAT "}}", pid);
}

char *
carrel_hypervisor_agent_kill_command(gint64 pid)
{
    g_autoptr(JsonBuilder) builder = begin_exec("/bin/sh");
    g_autofree char *text = g_strdup_printf("%" G_GINT64_FORMAT, pid);

    json_builder_add_string_value(builder, "-c");
    json_builder_add_string_value(builder, KILL_SCRIPT);
    json_builder_add_string_value(builder, "carrel-kill");
    json_builder_add_string_value(builder, text);
    json_builder_end_array(builder);
    json_builder_end_object(builder);
    json_builder_end_object(builder);
    return carrel_hypervisor_json_text(builder);
}

JsonNode *
carrel_hypervisor_agent_reply_return(JsonParser *parser, const char *reply, GError **error)
{
    g_autoptr(GError) local = NULL;
    gsize len = reply ? strnlen(reply, CARREL_HYPERVISOR_AGENT_REPLY_MAX + 1) : 0;
    JsonNode *root, *ret;

    if (len > CARREL_HYPERVISOR_AGENT_REPLY_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "guest agent reply exceeds %d bytes",
                    CARREL_HYPERVISOR_AGENT_REPLY_MAX);
        return NULL;
    }
    if (len == 0 || !carrel_util_json_structure_ok(reply, len, REPLY_MAX_DEPTH)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest agent reply is empty, not JSON, nested too deep or has NUL characters");
        return NULL;
    }
    if (!json_parser_load_from_data(parser, reply, (gssize)len, &local)) {
        /* json-glib's message may quote the guest's text: keep it out of our logs. */
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "guest agent reply is not JSON");
        return NULL;
    }
    root = json_parser_get_root(parser);
    ret = root && JSON_NODE_HOLDS_OBJECT(root)
              ? json_object_get_member(json_node_get_object(root), "return")
              : NULL;
    if (!ret) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest agent reply has no 'return'");
        return NULL;
    }
    return ret;
}

/* The object under "return" in reply; the parser owns it. */
static JsonObject *
parse_return(JsonParser *parser, const char *reply, GError **error)
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

/* A member of the given scalar type; *ret_node is NULL when it is absent. */
static gboolean
get_member(JsonObject *obj, const char *name, GType type, JsonNode **ret_node, GError **error)
{
    JsonNode *node = json_object_get_member(obj, name);

    *ret_node = NULL;
    if (!node)
        return TRUE;
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != type) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest agent reply member '%s' is not a %s", name, g_type_name(type));
        return FALSE;
    }
    *ret_node = node;
    return TRUE;
}

gboolean
carrel_hypervisor_agent_get_int(JsonObject *obj, const char *name, gint64 min, gint64 max,
                                gboolean *ret_present, gint64 *ret_value, GError **error)
{
    JsonNode *node;
    gint64 value;

    if (!get_member(obj, name, G_TYPE_INT64, &node, error))
        return FALSE;
    *ret_present = node != NULL;
    if (!node)
        return TRUE;
    value = json_node_get_int(node);
    if (value < min || value > max) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest agent reply member '%s' is out of range", name);
        return FALSE;
    }
    *ret_value = value;
    return TRUE;
}

gboolean
carrel_hypervisor_agent_get_bool(JsonObject *obj, const char *name, gboolean *ret_value,
                                 GError **error)
{
    JsonNode *node;

    if (!get_member(obj, name, G_TYPE_BOOLEAN, &node, error))
        return FALSE;
    *ret_value = node ? json_node_get_boolean(node) : FALSE;
    return TRUE;
}

gboolean
carrel_hypervisor_agent_parse_pid(const char *reply, gint64 *ret_pid, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    JsonObject *ret = parse_return(parser, reply, error);
    gboolean present = FALSE;
    gint64 pid = 0;

    if (!ret || !carrel_hypervisor_agent_get_int(ret, "pid", 1, PID_MAX, &present, &pid, error))
        return FALSE;
    if (!present) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest agent reply has no 'pid'");
        return FALSE;
    }
    *ret_pid = pid;
    return TRUE;
}

gboolean
carrel_hypervisor_agent_get_base64(JsonObject *obj, const char *name, gsize max_output,
                                   GBytes **ret_bytes, gboolean *truncated, GError **error)
{
    JsonNode *node;
    const char *text;
    gsize len, decoded_len, groups, out_len = 0;
    g_autofree char *prefix = NULL;
    guchar *decoded;

    if (!get_member(obj, name, G_TYPE_STRING, &node, error))
        return FALSE;
    text = node ? json_node_get_string(node) : "";
    len = strlen(text);
    if (!carrel_util_is_base64(text, len)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "guest agent reply member '%s' is not base64", name);
        return FALSE;
    }
    decoded_len = len / 4 * 3 - (len && text[len - 1] == '=') - (len > 1 && text[len - 2] == '=');
    if (decoded_len > max_output)
        *truncated = TRUE;
    /* Decode only the groups that max_output needs, never the whole of a large reply. */
    groups = MIN(len / 4, (max_output + 2) / 3);
    prefix = g_strndup(text, groups * 4);
    decoded = groups ? g_base64_decode(prefix, &out_len) : NULL;
    *ret_bytes = g_bytes_new_take(decoded, MIN(out_len, max_output));
    return TRUE;
}

static gboolean
get_ending(JsonObject *ret, CarrelExecStatus *status, GError **error)
{
    gboolean has_code = FALSE, has_signal = FALSE;
    gint64 code = 0, sig = 0;

    /* Exit statuses are 8 bits on POSIX; Windows guests are not carrel's. */
    if (!carrel_hypervisor_agent_get_int(ret, "exitcode", 0, 255, &has_code, &code, error) ||
        !carrel_hypervisor_agent_get_int(ret, "signal", 1, 127, &has_signal, &sig, error))
        return FALSE;
    status->exit_code = -1;
    if (has_code)
        status->exit_code = (int)code;
    else if (has_signal)
        status->exit_code = 128 + (int)sig;
    status->signal = has_signal ? (int)sig : 0;
    return TRUE;
}

gboolean
carrel_hypervisor_agent_parse_status(const char *reply, gsize max_output,
                                     CarrelExecStatus *ret_status, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_auto(CarrelExecStatus) status = {0};
    gboolean out_cut = FALSE, err_cut = FALSE;
    JsonObject *ret = parse_return(parser, reply, error);

    if (!ret || !carrel_hypervisor_agent_get_bool(ret, "exited", &status.exited, error))
        return FALSE;
    if (status.exited && !get_ending(ret, &status, error))
        return FALSE;
    if (!carrel_hypervisor_agent_get_bool(ret, "out-truncated", &out_cut, error) ||
        !carrel_hypervisor_agent_get_bool(ret, "err-truncated", &err_cut, error) ||
        !carrel_hypervisor_agent_get_base64(ret, "out-data", max_output, &status.out,
                                            &status.truncated, error) ||
        !carrel_hypervisor_agent_get_base64(ret, "err-data", max_output, &status.err,
                                            &status.truncated, error))
        return FALSE;
    status.truncated = status.truncated || out_cut || err_cut;
    *ret_status = status;
    memset(&status, 0, sizeof(status));
    return TRUE;
}

void
carrel_exec_status_clear(CarrelExecStatus *status)
{
    g_clear_pointer(&status->out, g_bytes_unref);
    g_clear_pointer(&status->err, g_bytes_unref);
    memset(status, 0, sizeof(*status));
}
