/*
 * carrel fs ID ls|stat|mkdir|rm|mv: file operations in a running session's guest (the /fs
 * routes). Names the guest could not give as clean text come back escaped; they are shown with
 * a '?' mark and the escaped form, never raw on the terminal.
 */
#include "cli/cli.h"

static const char fs_usage[] =
    "usage: carrel fs ID COMMAND [OPTIONS] PATH...\n"
    "\n"
    "File operations in a running session's guest, as root (like cp). Paths are absolute.\n"
    "\n"
    "  ls PATH          list a directory: type, mode, size, mtime (UTC), name (-> target)\n"
    "  stat PATH        one path (a symlink itself, not its target)\n"
    "  mkdir [-p] PATH  create a directory (-p: with its parents; no error if it exists)\n"
    "  rm [-r] PATH     remove a file, symlink or empty directory (-r: a whole tree)\n"
    "  mv FROM TO       rename; TO must not exist\n"
    "\n"
    "All take --json (the API's reply).\n";

static char *
fs_path(const char *id, const char *action, const char *guest)
{
    g_autofree char *base = carrel_cli_item_path("sessions", id, action);
    g_autofree char *query = guest ? g_uri_escape_string(guest, NULL, FALSE) : NULL;

    if (!base)
        return NULL;
    return query ? g_strdup_printf("%s?path=%s", base, query) : g_steal_pointer(&base);
}

/* An entry's name (or target) for a terminal: clean text, or "?<escaped>" with the reason. */
static char *
shown_text(JsonObject *e, const char *key)
{
    g_autofree char *escaped_key = g_strconcat(key, "_escaped", NULL);
    const char *text = carrel_cli_json_string(e, key);

    if (text)
        return carrel_cli_clean_text(text);
    text = carrel_cli_json_string(e, escaped_key);
    return g_strdup_printf("?%s", text ? text : "");
}

static void
print_entry(JsonObject *e)
{
    g_autofree char *name = shown_text(e, "name");
    const char *type = carrel_cli_json_string(e, "type");
    gboolean link = type && g_str_equal(type, "symlink");
    g_autofree char *target = link ? shown_text(e, "target") : NULL;
    g_autoptr(GDateTime) t =
        g_date_time_new_from_unix_utc(json_object_get_int_member_with_default(e, "mtime", 0));
    g_autofree char *when = t ? g_date_time_format(t, "%Y-%m-%d %H:%M") : g_strdup("?");

    g_print("%-7s %s %12" G_GINT64_FORMAT " %s %s%s%s\n", type ? type : "?",
            carrel_cli_json_string(e, "mode") ? carrel_cli_json_string(e, "mode") : "?",
            json_object_get_int_member_with_default(e, "size", 0), when, name, link ? " -> " : "",
            link ? target : "");
}

static int
fs_get(CarrelCli *cli, const char *id, const char *action, const char *guest)
{
    g_autofree char *path = fs_path(id, action, guest);
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    JsonObject *o;

    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", id);
    if (!carrel_cli_call(cli, "GET", path, NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    o = carrel_cli_json_object(reply, NULL);
    if (g_str_equal(action, "fs/stat")) {
        JsonNode *entry = json_object_get_member(o, "entry");
        if (entry && JSON_NODE_HOLDS_OBJECT(entry))
            print_entry(json_node_get_object(entry));
        return CARREL_CLI_EXIT_OK;
    }
    {
        JsonArray *list = json_object_get_array_member(o, "entries");
        for (guint i = 0; list && i < json_array_get_length(list); i++)
            print_entry(json_array_get_object_element(list, i));
        if (json_object_get_boolean_member_with_default(o, "truncated", FALSE))
            g_printerr("carrel: the listing was cut (more entries than the guest reports)\n");
    }
    return CARREL_CLI_EXIT_OK;
}

static int
fs_post(CarrelCli *cli, const char *id, const char *action, JsonNode *body, const char *done)
{
    g_autofree char *path = fs_path(id, action, NULL);
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *shown = NULL;

    if (!path)
        return carrel_cli_usage(cli, "invalid session '%s'", id);
    if (!carrel_cli_call(cli, "POST", path, body, &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    shown =
        carrel_cli_clean_text(carrel_cli_json_string(carrel_cli_json_object(reply, NULL), "path"));
    g_print("%s %s\n", shown, done);
    return CARREL_CLI_EXIT_OK;
}

static JsonNode *
body_of(const char *k1, const char *v1, const char *k2, const char *v2, const char *flag,
        gboolean on)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, k1);
    json_builder_add_string_value(b, v1);
    if (k2) {
        json_builder_set_member_name(b, k2);
        json_builder_add_string_value(b, v2);
    }
    if (flag) {
        json_builder_set_member_name(b, flag);
        json_builder_add_boolean_value(b, on);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

int
carrel_cli_fs(CarrelCli *cli, int argc, char **argv)
{
    gboolean parents = FALSE, recursive = FALSE;
    const GOptionEntry entries[] = {
        {"parents", 'p', 0, G_OPTION_ARG_NONE, &parents, "mkdir: create missing parents", NULL},
        {"recursive", 'r', 0, G_OPTION_ARG_NONE, &recursive, "rm: remove a directory's tree", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) body = NULL;
    const char *id, *verb;

    if (argc > 1 && (g_str_equal(argv[1], "-h") || g_str_equal(argv[1], "--help"))) {
        g_print("%s", fs_usage);
        return CARREL_CLI_EXIT_OK;
    }
    if (!carrel_cli_parse_options(cli, "fs ID ls|stat|mkdir|rm|mv PATH...",
                                  "File operations in a running session's guest (see 'carrel fs "
                                  "--help').",
                                  entries, 3, 4, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    id = argv[1];
    verb = argv[2];
    if (g_str_equal(verb, "mv") != (argc == 5))
        return carrel_cli_usage(cli, "'mv' takes FROM and TO; the others one PATH");
    if ((parents && !g_str_equal(verb, "mkdir")) || (recursive && !g_str_equal(verb, "rm")))
        return carrel_cli_usage(cli, "-p is for mkdir, -r for rm");
    if (g_str_equal(verb, "ls"))
        return fs_get(cli, id, "fs", argv[3]);
    if (g_str_equal(verb, "stat"))
        return fs_get(cli, id, "fs/stat", argv[3]);
    if (g_str_equal(verb, "mkdir")) {
        body = body_of("path", argv[3], NULL, NULL, "parents", parents);
        return fs_post(cli, id, "fs/mkdir", body, "created");
    }
    if (g_str_equal(verb, "rm")) {
        body = body_of("path", argv[3], NULL, NULL, "recursive", recursive);
        return fs_post(cli, id, "fs/remove", body, "removed");
    }
    if (g_str_equal(verb, "mv")) {
        body = body_of("from", argv[3], "to", argv[4], NULL, FALSE);
        return fs_post(cli, id, "fs/move", body, "is where it was moved");
    }
    return carrel_cli_usage(cli, "unknown fs command '%s': ls, stat, mkdir, rm or mv", verb);
}
