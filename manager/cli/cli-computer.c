/* Computer actions from the command line: click, type, key, scroll, and do (raw JSON). */
#include <stdio.h>

#include "cli/cli.h"

/* The image of the last observation: the final screenshot, or the output of a last action
 * that was a screenshot or zoom. */
static JsonObject *
last_image(JsonObject *obj)
{
    JsonNode *shot = json_object_get_member(obj, "screenshot");
    JsonNode *results = json_object_get_member(obj, "results");
    JsonArray *list;
    JsonObject *last;
    JsonNode *out;

    if (shot && JSON_NODE_HOLDS_OBJECT(shot))
        return json_node_get_object(shot);
    if (!results || !JSON_NODE_HOLDS_ARRAY(results))
        return NULL;
    list = json_node_get_array(results);
    if (json_array_get_length(list) == 0)
        return NULL;
    last = json_array_get_object_element(list, json_array_get_length(list) - 1);
    out = last ? json_object_get_member(last, "output") : NULL;
    return out && JSON_NODE_HOLDS_OBJECT(out) ? json_node_get_object(out) : NULL;
}

/* Writes the last observation to file (when asked) and takes the image data out of reply. */
static gboolean
take_screenshot(JsonNode *reply, const char *file, GError **error)
{
    JsonObject *obj = carrel_cli_json_object(reply, NULL);
    JsonObject *sobj = obj ? last_image(obj) : NULL;
    const char *data = sobj ? carrel_cli_json_string(sobj, "data") : NULL;
    g_autofree guchar *png = NULL;
    gsize len = 0;

    if (file && !data) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "carreld sent no screenshot");
        return FALSE;
    }
    if (!data)
        return TRUE;
    png = g_base64_decode(data, &len);
    if (file && !g_file_set_contents(file, (const char *)png, (gssize)len, error))
        return FALSE;
    json_object_remove_member(sobj, "data");
    json_object_set_int_member(sobj, "bytes", (gint64)len);
    return TRUE;
}

/* Where the screenshot went, and how the screen settled before it (after HID events). */
static void
print_saved(JsonNode *reply, const char *output)
{
    JsonObject *obj = carrel_cli_json_object(reply, NULL);

    if (obj && json_object_has_member(obj, "settled_ms"))
        g_printerr(
            "screenshot saved to %s (%s %" G_GINT64_FORMAT " ms after the last event)\n", output,
            json_object_get_boolean_member_with_default(obj, "settled", FALSE) ? "settled"
                                                                               : "not settled",
            json_object_get_int_member_with_default(obj, "settled_ms", 0));
    else
        g_printerr("screenshot saved to %s\n", output);
}

static int
send_actions(CarrelCli *cli, const char *id, JsonNode *body, const char *output)
{
    g_autofree char *path = carrel_cli_item_path("sessions", id, "computer");
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;

    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", id);
    if (!carrel_cli_call(cli, "POST", path, body, &reply, &error) ||
        !take_screenshot(reply, output, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json)
        carrel_cli_print_json(cli, reply);
    else if (output)
        print_saved(reply, output);
    return CARREL_CLI_EXIT_OK;
}

/* {"actions": [action], "observe": final|none} around one action object. */
static JsonNode *
wrap(JsonObject *action, const char *output)
{
    JsonObject *batch = json_object_new();
    JsonArray *list = json_array_new();
    JsonNode *node = json_node_alloc();

    json_array_add_object_element(list, action);
    json_object_set_array_member(batch, "actions", list);
    json_object_set_string_member(batch, "observe", output ? "final" : "none");
    json_node_init_object(node, batch);
    json_object_unref(batch);
    return node;
}

static gboolean
parse_coord(CarrelCli *cli, const char *text, gint64 *ret)
{
    if (!g_ascii_string_to_signed(text, 10, 0, 65535, ret, NULL)) {
        carrel_cli_usage(cli, "'%s' is not a coordinate (0..65535)", text);
        return FALSE;
    }
    return TRUE;
}

int
carrel_cli_click(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *button = NULL, *modifiers = NULL, *output = NULL;
    int count = 1;
    const GOptionEntry entries[] = {
        {"button", 'b', 0, G_OPTION_ARG_STRING, &button, "left (default), middle or right", "B"},
        {"count", 'n', 0, G_OPTION_ARG_INT, &count, "1, 2 (double) or 3 (triple) clicks", "N"},
        {"modifiers", 'm', 0, G_OPTION_ARG_STRING, &modifiers, "Keys held, e.g. ctrl+shift", "K"},
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Save the screenshot after it", "FILE"},
        G_OPTION_ENTRY_NULL,
    };
    JsonObject *action;
    g_autoptr(JsonNode) body = NULL;
    gint64 x = 0, y = 0;

    if (!carrel_cli_parse_options(cli, "click ID X Y", "Clicks at X,Y (screen pixels).", entries, 3,
                                  3, &argc, &argv) ||
        !parse_coord(cli, argv[2], &x) || !parse_coord(cli, argv[3], &y))
        return CARREL_CLI_EXIT_USAGE;
    action = json_object_new();
    json_object_set_string_member(action, "action", "click");
    json_object_set_int_member(action, "x", x);
    json_object_set_int_member(action, "y", y);
    json_object_set_int_member(action, "count", count);
    if (button)
        json_object_set_string_member(action, "button", button);
    if (modifiers)
        json_object_set_string_member(action, "modifiers", modifiers);
    body = wrap(action, output);
    return send_actions(cli, argv[1], body, output);
}

/* The method the guest was typed to with, from the reply's first result (NULL if none). */
static const char *
typed_method(JsonNode *reply)
{
    JsonObject *obj = carrel_cli_json_object(reply, NULL);
    JsonNode *results = obj ? json_object_get_member(obj, "results") : NULL;
    JsonArray *list =
        results && JSON_NODE_HOLDS_ARRAY(results) ? json_node_get_array(results) : NULL;
    JsonObject *first =
        list && json_array_get_length(list) ? json_array_get_object_element(list, 0) : NULL;
    JsonNode *out = first ? json_object_get_member(first, "output") : NULL;

    return out && JSON_NODE_HOLDS_OBJECT(out)
               ? carrel_cli_json_string(json_node_get_object(out), "method")
               : NULL;
}

int
carrel_cli_type(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *output = NULL;
    g_autofree char *method = NULL;
    g_autofree char *paste_keys = NULL;
    const GOptionEntry entries[] = {
        {"method", 'm', 0, G_OPTION_ARG_STRING, &method,
         "auto (default), keys, guest_keysyms or clipboard", "METHOD"},
        {"paste-keys", 0, 0, G_OPTION_ARG_STRING, &paste_keys,
         "Keys that paste, with --method clipboard (default shift+Insert)", "COMBO"},
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Save the screenshot after it", "FILE"},
        G_OPTION_ENTRY_NULL,
    };
    JsonObject *action;
    g_autoptr(JsonNode) body = NULL;
    g_autofree char *path = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;

    if (!carrel_cli_parse_options(
            cli, "type ID TEXT",
            "Types TEXT, any Unicode text (newline and tab too, no other control characters). "
            "Text the US keymap can type goes as key presses through the hypervisor; other text "
            "is typed by carrel-guest in the guest (its keysyms through XTest), or pasted with "
            "--method clipboard. The method used is printed.",
            entries, 2, 2, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!(path = carrel_cli_item_path("sessions", argv[1], "computer")))
        return carrel_cli_usage(cli, "invalid session '%s'", argv[1]);
    action = json_object_new();
    json_object_set_string_member(action, "action", "type");
    json_object_set_string_member(action, "text", argv[2]);
    if (method)
        json_object_set_string_member(action, "method", method);
    if (paste_keys)
        json_object_set_string_member(action, "paste_keys", paste_keys);
    body = wrap(action, output);
    if (!carrel_cli_call(cli, "POST", path, body, &reply, &error) ||
        !take_screenshot(reply, output, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    g_print("typed with %s\n", typed_method(reply) ? typed_method(reply) : "?");
    if (output)
        g_printerr("screenshot saved to %s\n", output);
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_key(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *output = NULL;
    const GOptionEntry entries[] = {
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Save the screenshot after it", "FILE"},
        G_OPTION_ENTRY_NULL,
    };
    JsonObject *action;
    g_autoptr(JsonNode) body = NULL;
    g_autofree char *combo = NULL;

    if (!carrel_cli_parse_options(cli, "key ID COMBO...",
                                  "Presses key combinations one after another, xdotool style: "
                                  "ctrl+shift+t Return F5 super.",
                                  entries, 2, G_MAXUINT, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    combo = g_strjoinv(" ", argv + 2);
    action = json_object_new();
    json_object_set_string_member(action, "action", "key");
    json_object_set_string_member(action, "combo", combo);
    body = wrap(action, output);
    return send_actions(cli, argv[1], body, output);
}

int
carrel_cli_scroll(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *output = NULL;
    int dx = 0, dy = 0;
    const GOptionEntry entries[] = {
        {"dy", 0, 0, G_OPTION_ARG_INT, &dy, "Notches down (negative: up)", "N"},
        {"dx", 0, 0, G_OPTION_ARG_INT, &dx, "Notches right (negative: left)", "N"},
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Save the screenshot after it", "FILE"},
        G_OPTION_ENTRY_NULL,
    };
    JsonObject *action;
    g_autoptr(JsonNode) body = NULL;
    gint64 x = 0, y = 0;

    if (!carrel_cli_parse_options(cli, "scroll ID X Y --dy N [--dx N]", "Scrolls the wheel at X,Y.",
                                  entries, 3, 3, &argc, &argv) ||
        !parse_coord(cli, argv[2], &x) || !parse_coord(cli, argv[3], &y))
        return CARREL_CLI_EXIT_USAGE;
    action = json_object_new();
    json_object_set_string_member(action, "action", "scroll");
    json_object_set_int_member(action, "x", x);
    json_object_set_int_member(action, "y", y);
    json_object_set_int_member(action, "dx", dx);
    json_object_set_int_member(action, "dy", dy);
    body = wrap(action, output);
    return send_actions(cli, argv[1], body, output);
}

int
carrel_cli_do(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *output = NULL;
    const GOptionEntry entries[] = {
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "Save the final screenshot", "FILE"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) body = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *text = NULL;
    gsize len = 0;

    if (!carrel_cli_parse_options(cli, "do ID JSON|-",
                                  "Sends raw action JSON (one action in any supported format, "
                                  "or {\"actions\": [...]}); '-' reads it from stdin.",
                                  entries, 2, 2, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (g_str_equal(argv[2], "-")) {
        g_autoptr(GIOChannel) in = g_io_channel_unix_new(0);
        if (g_io_channel_read_to_end(in, &text, &len, &error) != G_IO_STATUS_NORMAL)
            return carrel_cli_fail(cli, error);
    } else {
        text = g_strdup(argv[2]);
        len = strlen(text);
    }
    if (len > CARREL_LIMIT_BODY_BYTES)
        return carrel_cli_usage(cli, "the action JSON is larger than %d bytes",
                                CARREL_LIMIT_BODY_BYTES);
    body = json_from_string(text, &error);
    if (!body)
        return carrel_cli_usage(cli, "the action is not JSON: %s", error->message);
    /* Printed as JSON always: do is for programs and people who speak the API. */
    cli->json = TRUE;
    return send_actions(cli, argv[1], body, output);
}
