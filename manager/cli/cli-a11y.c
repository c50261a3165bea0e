/* carrel a11y: the accessibility tree of a session's desktop (GET /v1/sessions/{id}/accessibility),
 * as an indented tree of elements with the ids that click_element takes, or as JSON. */
#include <stdio.h>

#include "cli/cli.h"

#define INDENT_MAX 32

static char *
a11y_path(const char *id, gboolean desktop, const char *app, int depth, int max_nodes)
{
    g_autofree char *session = carrel_cli_escape_segment(id);
    GString *path;

    if (!session)
        return NULL;
    path = g_string_new(NULL);
    g_string_printf(path, "/v1/sessions/%s/accessibility?scope=%s", session,
                    desktop ? "desktop" : "focused");
    if (depth >= 0)
        g_string_append_printf(path, "&depth=%d", depth);
    if (max_nodes > 0)
        g_string_append_printf(path, "&max_nodes=%d", max_nodes);
    if (app) {
        g_autofree char *escaped = g_uri_escape_string(app, NULL, FALSE);

        g_string_append_printf(path, "&app=%s", escaped);
    }
    return g_string_free(path, FALSE);
}

/* "enabled focusable" from the states array. */
static char *
states_text(JsonObject *node)
{
    JsonArray *states = json_object_get_array_member(node, "states");
    g_autoptr(GString) text = g_string_new(NULL);

    for (guint i = 0; states && i < json_array_get_length(states); i++) {
        JsonNode *s = json_array_get_element(states, i);

        if (JSON_NODE_HOLDS_VALUE(s) && json_node_get_value_type(s) == G_TYPE_STRING)
            g_string_append_printf(text, "%s%s", text->len ? " " : "", json_node_get_string(s));
    }
    return carrel_cli_clean_text(text->str);
}

/* One line per element: [ID] role "name" at X,Y WxH {states} action=A, children indented. */
static void
print_node(JsonObject *node, guint level)
{
    JsonObject *b = carrel_cli_json_object(json_object_get_member(node, "bounds"), NULL);
    JsonArray *children = json_object_get_array_member(node, "children");
    const char *id = carrel_cli_json_string(node, "id");
    const char *action = carrel_cli_json_string(node, "action");
    g_autofree char *role = carrel_cli_clean_text(carrel_cli_json_string(node, "role"));
    g_autofree char *name = carrel_cli_clean_text(carrel_cli_json_string(node, "name"));
    g_autofree char *states = states_text(node);
    g_autofree char *where =
        b ? g_strdup_printf(" at %" G_GINT64_FORMAT ",%" G_GINT64_FORMAT " %" G_GINT64_FORMAT
                            "x%" G_GINT64_FORMAT,
                            carrel_cli_json_int(b, "x", 0), carrel_cli_json_int(b, "y", 0),
                            carrel_cli_json_int(b, "width", 0), carrel_cli_json_int(b, "height", 0))
          : g_strdup("");
    g_autofree char *act = action ? carrel_cli_clean_text(action) : NULL;

    g_print("%*s[%s] %s \"%s\"%s%s%s%s%s%s\n", (int)MIN(level, INDENT_MAX) * 2, "",
            id && *id ? id : "desktop", role, name, where, *states ? " {" : "", states,
            *states ? "}" : "", act ? " action=" : "", act ? act : "");
    for (guint i = 0; children && i < json_array_get_length(children); i++) {
        JsonNode *c = json_array_get_element(children, i);

        if (JSON_NODE_HOLDS_OBJECT(c))
            print_node(json_node_get_object(c), level + 1);
    }
}

int
carrel_cli_a11y(CarrelCli *cli, int argc, char **argv)
{
    gboolean desktop = FALSE;
    int depth = -1;
    int max_nodes = 0;
    g_autofree char *app = NULL;
    const GOptionEntry entries[] = {
        {"desktop", 0, 0, G_OPTION_ARG_NONE, &desktop,
         "Every application's tree (default: the focused window's)", NULL},
        {"depth", 0, 0, G_OPTION_ARG_INT, &depth, "Levels below the root (default 12, at most 32)",
         "N"},
        {"max-nodes", 0, 0, G_OPTION_ARG_INT, &max_nodes,
         "Elements at most, breadth first, documents first (default 500, at most 5000)", "N"},
        {"app", 0, 0, G_OPTION_ARG_STRING, &app,
         "The desktop with only this application (its accessibility name, e.g. Firefox)", "NAME"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;
    JsonObject *obj;
    JsonObject *root;

    if (!carrel_cli_parse_options(cli, "a11y ID",
                                  "Prints the accessibility (AT-SPI) tree of the session's focused "
                                  "window or desktop: each element's id (for the click_element "
                                  "action), role, name, bounds, states and default action.",
                                  entries, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (depth < -1 || max_nodes < 0)
        return carrel_cli_usage(cli, "--depth and --max-nodes take counts");
    if (!(path = a11y_path(argv[1], desktop || app, app, depth, max_nodes)))
        return carrel_cli_usage(cli, "invalid session '%s'", argv[1]);
    if (!carrel_cli_call(cli, "GET", path, NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    obj = carrel_cli_json_object(reply, NULL);
    root = obj ? carrel_cli_json_object(reply, "root") : NULL;
    if (root)
        print_node(root, 0);
    if (obj && json_object_get_boolean_member_with_default(obj, "truncated", FALSE))
        g_printerr("carrel: the tree was cut (%" G_GINT64_FORMAT
                   " elements); --depth and --max-nodes show more\n",
                   carrel_cli_json_int(obj, "count", 0));
    return CARREL_CLI_EXIT_OK;
}
