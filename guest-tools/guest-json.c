/* Errors and JSON output: every command prints exactly one object on stdout. */
#include <stdio.h>

#include "guest.h"

G_DEFINE_QUARK(carrel - guest - error - quark, carrel_guest_error)

static const char *const error_names[CARREL_GUEST_ERROR_LAST] = {
    [CARREL_GUEST_ERROR_FAILED] = "failed",
    [CARREL_GUEST_ERROR_INVALID_ARG] = "invalid_argument",
    [CARREL_GUEST_ERROR_NOT_FOUND] = "not_found",
    [CARREL_GUEST_ERROR_FORBIDDEN] = "forbidden",
    [CARREL_GUEST_ERROR_LIMIT] = "limit_exceeded",
    [CARREL_GUEST_ERROR_TIMEOUT] = "timeout",
    [CARREL_GUEST_ERROR_DISPLAY] = "display_unavailable",
    [CARREL_GUEST_ERROR_X11] = "x11_error",
    [CARREL_GUEST_ERROR_LAUNCH] = "launch_failed",
    [CARREL_GUEST_ERROR_INTERNAL] = "internal",
    [CARREL_GUEST_ERROR_EXISTS] = "exists",
    [CARREL_GUEST_ERROR_NOT_EMPTY] = "not_empty",
    [CARREL_GUEST_ERROR_WRONG_STATE] = "wrong_state",
};

const char *
carrel_guest_error_code_to_string(CarrelGuestErrorCode code)
{
    if ((int)code < 0 || code >= CARREL_GUEST_ERROR_LAST)
        return error_names[CARREL_GUEST_ERROR_FAILED];
    return error_names[code];
}

CarrelGuestErrorCode
carrel_guest_error_code_from_string(const char *name)
{
    for (int i = 0; name && i < CARREL_GUEST_ERROR_LAST; i++) {
        if (g_str_equal(error_names[i], name))
            return (CarrelGuestErrorCode)i;
    }
    return CARREL_GUEST_ERROR_FAILED;
}

int
carrel_guest_error_exit_status(const GError *error)
{
    if (error && g_error_matches(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG))
        return 2;
    return 1;
}

CarrelGuestWindow *
carrel_guest_window_new(gulong id)
{
    CarrelGuestWindow *window = g_new0(CarrelGuestWindow, 1);

    window->id = id;
    window->pid = -1;
    return window;
}

void
carrel_guest_window_free(CarrelGuestWindow *window)
{
    if (!window)
        return;
    g_free(window->title);
    g_free(window->wm_class);
    g_free(window->instance);
    g_free(window);
}

JsonBuilder *
carrel_guest_json_begin(void)
{
    JsonBuilder *builder = json_builder_new();

    json_builder_begin_object(builder);
    return builder;
}

JsonNode *
carrel_guest_json_end(JsonBuilder *builder)
{
    json_builder_end_object(builder);
    return json_builder_get_root(builder);
}

static void
add_string_or_null(JsonBuilder *builder, const char *name, const char *value)
{
    json_builder_set_member_name(builder, name);
    if (value)
        json_builder_add_string_value(builder, value);
    else
        json_builder_add_null_value(builder);
}

static void
add_window(JsonBuilder *builder, const CarrelGuestWindow *window)
{
    g_autofree char *id = g_strdup_printf("0x%lx", window->id);

    json_builder_begin_object(builder);
    add_string_or_null(builder, "id", id);
    add_string_or_null(builder, "title", window->title ? window->title : "");
    add_string_or_null(builder, "class", window->wm_class);
    add_string_or_null(builder, "instance", window->instance);
    json_builder_set_member_name(builder, "pid");
    if (window->pid > 0)
        json_builder_add_int_value(builder, window->pid);
    else
        json_builder_add_null_value(builder);
    json_builder_set_member_name(builder, "x");
    json_builder_add_int_value(builder, window->x);
    json_builder_set_member_name(builder, "y");
    json_builder_add_int_value(builder, window->y);
    json_builder_set_member_name(builder, "width");
    json_builder_add_int_value(builder, window->width);
    json_builder_set_member_name(builder, "height");
    json_builder_add_int_value(builder, window->height);
    json_builder_set_member_name(builder, "focused");
    json_builder_add_boolean_value(builder, window->focused);
    json_builder_set_member_name(builder, "visible");
    json_builder_add_boolean_value(builder, window->visible);
    json_builder_end_object(builder);
}

JsonNode *
carrel_guest_windows_to_json(GPtrArray *windows, gboolean truncated)
{
    g_autoptr(JsonBuilder) builder = carrel_guest_json_begin();

    json_builder_set_member_name(builder, "windows");
    json_builder_begin_array(builder);
    for (guint i = 0; windows && i < windows->len; i++)
        add_window(builder, g_ptr_array_index(windows, i));
    json_builder_end_array(builder);
    json_builder_set_member_name(builder, "truncated");
    json_builder_add_boolean_value(builder, truncated);
    return carrel_guest_json_end(builder);
}

JsonNode *
carrel_guest_error_to_json(const GError *error)
{
    g_autoptr(JsonBuilder) builder = carrel_guest_json_begin();
    const char *code = error_names[CARREL_GUEST_ERROR_INTERNAL];
    g_autofree char *message = NULL;

    if (error && error->domain == CARREL_GUEST_ERROR)
        code = carrel_guest_error_code_to_string((CarrelGuestErrorCode)error->code);
    /* Messages may quote guest text (program names, paths): keep the JSON valid. */
    message = g_utf8_make_valid(error && error->message ? error->message : "unknown error", -1);
    json_builder_set_member_name(builder, "error");
    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "code");
    json_builder_add_string_value(builder, code);
    json_builder_set_member_name(builder, "message");
    json_builder_add_string_value(builder, message);
    json_builder_end_object(builder);
    return carrel_guest_json_end(builder);
}

char *
carrel_guest_json_to_string(JsonNode *node)
{
    g_autoptr(JsonGenerator) generator = json_generator_new();
    g_autofree char *text = NULL;

    json_generator_set_root(generator, node);
    json_generator_set_pretty(generator, FALSE);
    text = json_generator_to_data(generator, NULL);
    return g_strconcat(text, "\n", NULL);
}

gboolean
carrel_guest_json_print(JsonNode *node)
{
    g_autofree char *text = carrel_guest_json_to_string(node);
    size_t len = strlen(text);

    if (fwrite(text, 1, len, stdout) != len)
        return FALSE;
    return fflush(stdout) == 0;
}
