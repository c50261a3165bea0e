/* Background processes: what carrel-guest proc says (untrusted) and the process routes' bodies. */
#include <signal.h>
#include <string.h>

#include "conf/conf-priv.h"

#define PROC_ARGV_MAX 32
#define PROC_ARG_BYTES 1024

gboolean
carrel_proc_handle_valid(const char *handle)
{
    gsize len = handle ? strlen(handle) : 0;

    if (len < 2 || len > 17 || handle[0] != 'p')
        return FALSE;
    for (gsize i = 1; i < len; i++) {
        if (!g_ascii_isdigit(handle[i]) && !(handle[i] >= 'a' && handle[i] <= 'f'))
            return FALSE;
    }
    return TRUE;
}

static gboolean
malformed(GError **error, const char *what)
{
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                "carrel-guest gave a malformed process record: %s", what);
    return FALSE;
}

static gboolean
get_int(JsonObject *obj, const char *member, gint64 min, gint64 max, gint64 *ret_value,
        GError **error)
{
    JsonNode *node = carrel_conf_get_node(obj, member);
    gint64 value;

    if (!carrel_conf_node_holds(node, G_TYPE_INT64))
        return malformed(error, member);
    value = json_node_get_int(node);
    if (value < min || value > max)
        return malformed(error, member);
    *ret_value = value;
    return TRUE;
}

/* handle, pid, state and exit_code: members of both list items and read replies. */
static gboolean
get_state(JsonObject *obj, char **ret_handle, gint64 *ret_pid, gboolean *ret_exited,
          int *ret_exit_code, GError **error)
{
    const char *handle = carrel_conf_peek_string(obj, "handle");
    const char *state = carrel_conf_peek_string(obj, "state");
    gint64 code = 0;

    if (!carrel_proc_handle_valid(handle))
        return malformed(error, "handle");
    if (!get_int(obj, "pid", -1, G_MAXINT32, ret_pid, error))
        return FALSE;
    if (g_strcmp0(state, "exited") == 0) {
        if (!get_int(obj, "exit_code", -1, 255, &code, error))
            return FALSE;
        *ret_exited = TRUE;
    } else if (g_strcmp0(state, "running") == 0) {
        *ret_exited = FALSE;
    } else {
        return malformed(error, "state");
    }
    *ret_exit_code = (int)code;
    *ret_handle = g_strdup(handle);
    return TRUE;
}

void
carrel_proc_info_free(CarrelProcInfo *info)
{
    if (!info)
        return;
    g_free(info->handle);
    g_strfreev(info->argv);
    g_free(info);
}

static gboolean
get_argv(JsonObject *obj, GStrv *ret_argv, GError **error)
{
    JsonNode *node = carrel_conf_get_node(obj, "argv");
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    JsonArray *arr;

    if (!node || !JSON_NODE_HOLDS_ARRAY(node) ||
        json_array_get_length(arr = json_node_get_array(node)) > PROC_ARGV_MAX)
        return malformed(error, "argv");
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        JsonNode *item = json_array_get_element(arr, i);
        const char *text =
            carrel_conf_node_holds(item, G_TYPE_STRING) ? json_node_get_string(item) : NULL;

        if (!text || strlen(text) > PROC_ARG_BYTES || !g_utf8_validate(text, -1, NULL))
            return malformed(error, "argv");
        g_strv_builder_add(b, text);
    }
    *ret_argv = g_strv_builder_end(b);
    return TRUE;
}

static CarrelProcInfo *
info_from_guest(JsonNode *node, GError **error)
{
    g_autoptr(CarrelProcInfo) info = g_new0(CarrelProcInfo, 1);
    JsonObject *obj = JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;

    if (!obj) {
        malformed(error, "not an object");
        return NULL;
    }
    if (!get_state(obj, &info->handle, &info->pid, &info->exited, &info->exit_code, error) ||
        !get_argv(obj, &info->argv, error) ||
        !get_int(obj, "started_at", 0, G_MAXINT64, &info->started_at, error) ||
        !get_int(obj, "stdout_bytes", 0, CARREL_PROC_OUTPUT_MAX, &info->stdout_size, error) ||
        !get_int(obj, "stderr_bytes", 0, CARREL_PROC_OUTPUT_MAX, &info->stderr_size, error))
        return NULL;
    return g_steal_pointer(&info);
}

GPtrArray *
carrel_proc_list_from_guest(JsonNode *node, GError **error)
{
    JsonObject *obj = node && JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
    JsonNode *items = carrel_conf_get_node(obj, "processes");
    g_autoptr(GPtrArray) list =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_proc_info_free);
    JsonArray *arr;

    if (!items || !JSON_NODE_HOLDS_ARRAY(items) ||
        json_array_get_length(arr = json_node_get_array(items)) > CARREL_PROC_LIST_MAX) {
        malformed(error, "processes");
        return NULL;
    }
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        CarrelProcInfo *info = info_from_guest(json_array_get_element(arr, i), error);

        if (!info)
            return NULL;
        g_ptr_array_add(list, info);
    }
    return g_steal_pointer(&list);
}

static void
add_state(JsonBuilder *b, const char *handle, gint64 pid, gboolean exited, int exit_code)
{
    json_builder_set_member_name(b, "handle");
    json_builder_add_string_value(b, handle);
    json_builder_set_member_name(b, "pid");
    json_builder_add_int_value(b, pid);
    json_builder_set_member_name(b, "state");
    json_builder_add_string_value(b, exited ? "exited" : "running");
    json_builder_set_member_name(b, "exit_code");
    if (exited)
        json_builder_add_int_value(b, exit_code);
    else
        json_builder_add_null_value(b);
}

JsonNode *
carrel_proc_info_to_json(const CarrelProcInfo *info)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    add_state(b, info->handle, info->pid, info->exited, info->exit_code);
    json_builder_set_member_name(b, "argv");
    json_builder_begin_array(b);
    for (guint i = 0; info->argv && info->argv[i]; i++)
        json_builder_add_string_value(b, info->argv[i]);
    json_builder_end_array(b);
    carrel_conf_add_optional_time(b, "started_at", info->started_at);
    json_builder_set_member_name(b, "stdout_bytes");
    json_builder_add_int_value(b, info->stdout_size);
    json_builder_set_member_name(b, "stderr_bytes");
    json_builder_add_int_value(b, info->stderr_size);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

void
carrel_proc_read_free(CarrelProcRead *read)
{
    if (!read)
        return;
    g_free(read->handle);
    g_clear_pointer(&read->stdout_data, g_bytes_unref);
    g_clear_pointer(&read->stderr_data, g_bytes_unref);
    g_free(read);
}

static gboolean
get_stream(JsonObject *obj, const char *member, gint64 offset, GBytes **ret_data, gint64 *ret_size,
           GError **error)
{
    JsonNode *node = carrel_conf_get_node(obj, member);
    JsonObject *s = node && JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
    const char *b64 = s ? carrel_conf_peek_string(s, "data") : NULL;
    gint64 at = -1, size = -1;
    gsize len = 0;
    guchar *data;

    if (!s || !get_int(s, "offset", 0, CARREL_PROC_OUTPUT_MAX, &at, error) ||
        !get_int(s, "size", 0, CARREL_PROC_OUTPUT_MAX, &size, error))
        return s ? FALSE : malformed(error, member);
    /* Checked before decoding: base64 of the bound is all a reply may carry. */
    if (at != offset || !b64 || strlen(b64) > (CARREL_PROC_CHUNK_MAX / 3 + 1) * 4 ||
        !carrel_util_is_base64(b64, strlen(b64)))
        return malformed(error, member);
    data = g_base64_decode(b64, &len);
    if (len > CARREL_PROC_CHUNK_MAX || at + (gint64)len > size) {
        g_free(data);
        return malformed(error, member);
    }
    *ret_data = g_bytes_new_take(data, len);
    *ret_size = size;
    return TRUE;
}

CarrelProcRead *
carrel_proc_read_from_guest(JsonNode *node, gint64 stdout_offset, gint64 stderr_offset,
                            GError **error)
{
    g_autoptr(CarrelProcRead) read = g_new0(CarrelProcRead, 1);
    JsonObject *obj = node && JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;

    if (!obj) {
        malformed(error, "not an object");
        return NULL;
    }
    read->stdout_offset = stdout_offset;
    read->stderr_offset = stderr_offset;
    if (!get_state(obj, &read->handle, &read->pid, &read->exited, &read->exit_code, error) ||
        !get_stream(obj, "stdout", stdout_offset, &read->stdout_data, &read->stdout_size, error) ||
        !get_stream(obj, "stderr", stderr_offset, &read->stderr_data, &read->stderr_size, error))
        return NULL;
    return g_steal_pointer(&read);
}

gboolean
carrel_proc_read_is_last(const CarrelProcRead *read)
{
    return read->exited &&
           read->stdout_offset + (gint64)g_bytes_get_size(read->stdout_data) >= read->stdout_size &&
           read->stderr_offset + (gint64)g_bytes_get_size(read->stderr_data) >= read->stderr_size;
}

static void
add_stream(JsonBuilder *b, const char *member, gint64 offset, GBytes *bytes, gint64 size)
{
    gsize len = 0;
    const char *data = g_bytes_get_data(bytes, &len);
    g_autofree char *text = g_utf8_make_valid(data ? data : "", (gssize)len);
    g_autofree char *b64 = g_base64_encode((const guchar *)data, len);
    g_autofree char *b64_member = g_strconcat(member, "_base64", NULL);
    g_autofree char *next_member = g_strconcat(member, "_next", NULL);
    g_autofree char *size_member = g_strconcat(member, "_bytes", NULL);

    json_builder_set_member_name(b, member);
    json_builder_add_string_value(b, text);
    json_builder_set_member_name(b, b64_member);
    json_builder_add_string_value(b, b64);
    json_builder_set_member_name(b, next_member);
    json_builder_add_int_value(b, offset + (gint64)len);
    json_builder_set_member_name(b, size_member);
    json_builder_add_int_value(b, size);
}

JsonNode *
carrel_proc_read_to_json(const CarrelProcRead *read)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    add_state(b, read->handle, read->pid, read->exited, read->exit_code);
    add_stream(b, "stdout", read->stdout_offset, read->stdout_data, read->stdout_size);
    add_stream(b, "stderr", read->stderr_offset, read->stderr_data, read->stderr_size);
    json_builder_set_member_name(b, "more");
    json_builder_add_boolean_value(
        b, !carrel_proc_read_is_last(read) &&
               (read->stdout_offset + (gint64)g_bytes_get_size(read->stdout_data) <
                    read->stdout_size ||
                read->stderr_offset + (gint64)g_bytes_get_size(read->stderr_data) <
                    read->stderr_size));
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

void
carrel_proc_input_free(CarrelProcInput *input)
{
    if (!input)
        return;
    g_clear_pointer(&input->data, g_bytes_unref);
    g_free(input);
}

CarrelProcInput *
carrel_proc_input_from_json(JsonNode *node, GError **error)
{
    static const char *const allowed[] = {"data", "data_base64", "close", NULL};
    g_autoptr(CarrelProcInput) input = g_new0(CarrelProcInput, 1);
    g_autofree char *text = NULL;
    g_autofree char *b64 = NULL;
    JsonObject *obj;
    gsize len = 0;

    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "expected a JSON object");
        return NULL;
    }
    obj = json_node_get_object(node);
    if (!carrel_conf_check_members(obj, allowed, error) ||
        !carrel_conf_get_string(obj, "data", FALSE, &text, error) ||
        !carrel_conf_get_string(obj, "data_base64", FALSE, &b64, error) ||
        !carrel_conf_get_bool(obj, "close", &input->close, error))
        return NULL;
    if (text && b64) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "give 'data' or 'data_base64', not both");
        return NULL;
    }
    if (b64 && !carrel_util_is_base64(b64, strlen(b64))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'data_base64' is not valid padded base64");
        return NULL;
    }
    if (b64)
        text = (char *)g_base64_decode(b64, &len);
    else if (text)
        len = strlen(text);
    if (len > CARREL_PROC_INPUT_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "input is over %d bytes",
                    CARREL_PROC_INPUT_MAX);
        return NULL;
    }
    if (!text && !input->close) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "give 'data', 'data_base64' or 'close'");
        return NULL;
    }
    if (text && len)
        input->data = g_bytes_new_take(g_steal_pointer(&text), len);
    return g_steal_pointer(&input);
}

static const struct {
    const char *name;
    int number;
} signal_names[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL}, {"USR1", SIGUSR1},
    {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP},
};

int
carrel_proc_signal_parse(const char *text)
{
    guint64 number = 0;
    const char *name = text && g_str_has_prefix(text, "SIG") ? text + 3 : text;

    if (!text)
        return -1;
    if (g_ascii_string_to_unsigned(text, 10, 1, 64, &number, NULL))
        return (int)number;
    for (guint i = 0; i < G_N_ELEMENTS(signal_names); i++) {
        if (g_ascii_strcasecmp(signal_names[i].name, name) == 0)
            return signal_names[i].number;
    }
    return -1;
}

void
carrel_proc_signal_free(CarrelProcSignal *sig)
{
    g_free(sig);
}

CarrelProcSignal *
carrel_proc_signal_from_json(JsonNode *node, GError **error)
{
    static const char *const allowed[] = {"signal", NULL};
    g_autoptr(CarrelProcSignal) sig = g_new0(CarrelProcSignal, 1);
    JsonObject *obj = node && JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
    JsonNode *value;

    sig->signal = SIGTERM;
    if (node && !obj) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "expected a JSON object");
        return NULL;
    }
    if (obj && !carrel_conf_check_members(obj, allowed, error))
        return NULL;
    value = carrel_conf_get_node(obj, "signal");
    if (carrel_conf_node_holds(value, G_TYPE_INT64)) {
        g_autofree char *text = g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(value));

        sig->signal = carrel_proc_signal_parse(text);
    } else if (carrel_conf_node_holds(value, G_TYPE_STRING)) {
        sig->signal = carrel_proc_signal_parse(json_node_get_string(value));
    } else if (value) {
        sig->signal = -1;
    }
    if (sig->signal < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'signal' must be TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT or a "
                    "number from 1 to 64");
        return NULL;
    }
    return g_steal_pointer(&sig);
}

void
carrel_shell_control_free(CarrelShellControl *control)
{
    g_free(control);
}

CarrelShellControl *
carrel_shell_control_from_json(JsonNode *node, GError **error)
{
    static const char *const allowed[] = {"type", "rows", "cols", NULL};
    g_autoptr(CarrelShellControl) control = g_new0(CarrelShellControl, 1);
    g_autofree char *type = NULL;
    JsonObject *obj;

    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "expected a JSON object");
        return NULL;
    }
    obj = json_node_get_object(node);
    if (!carrel_conf_check_members(obj, allowed, error) ||
        !carrel_conf_get_string(obj, "type", TRUE, &type, error) ||
        !carrel_conf_get_uint(obj, "rows", 1, CARREL_SHELL_SIZE_MAX, &control->rows, error) ||
        !carrel_conf_get_uint(obj, "cols", 1, CARREL_SHELL_SIZE_MAX, &control->cols, error))
        return NULL;
    control->eof = g_str_equal(type, "eof");
    if (control->eof ? control->rows || control->cols
                     : !g_str_equal(type, "resize") || !control->rows || !control->cols) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "expected {\"type\":\"resize\",\"rows\":R,\"cols\":C} or {\"type\":\"eof\"}");
        return NULL;
    }
    return g_steal_pointer(&control);
}
