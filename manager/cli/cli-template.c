#include "cli/cli.h"
#include "conf/conf.h"

static const char template_usage[] =
    "Usage: carrel template COMMAND\n"
    "\n"
    "  ls                          list templates (every version)\n"
    "  show NAME[@VERSION]         show a template\n"
    "  import NAME --disk FILE --format qcow2|raw [--firmware bios|uefi]\n"
    "         [--kernel FILE [--initrd FILE] [--cmdline TEXT]]\n"
    "                              import a disk image as a new template version\n"
    "  build NAME                  build a template from its recipe\n"
    "  warm NAME[@VERSION]         save a booted desktop so sessions restore instead of boot\n"
    "  rm NAME[@VERSION]           delete one version, or every version\n"
    "  pool [NAME --size N]        keep N paused sessions of NAME for instant creates (0: none);\n"
    "                              without arguments: show the pools\n";

static int
template_ls(CarrelCli *cli, int argc, char **argv)
{
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelCliTable) table = NULL;
    g_autofree char *text = NULL;
    JsonArray *templates;

    if (!carrel_cli_parse_options(cli, "template ls", "Lists templates, every version.", NULL, 0, 0,
                                  &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!carrel_cli_call(cli, "GET", "/v1/templates", NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    templates = carrel_cli_json_array(reply, "templates");
    table = carrel_cli_table_new_templates();
    for (guint i = 0; templates && i < json_array_get_length(templates); i++) {
        JsonObject *tmpl = carrel_cli_json_object(json_array_get_element(templates, i), NULL);

        if (tmpl)
            carrel_cli_table_add_template(table, tmpl);
    }
    text = carrel_cli_table_render(table);
    carrel_cli_print_text(text);
    return CARREL_CLI_EXIT_OK;
}

/* The entry of reply's "versions" with that version number, or NULL. */
static JsonNode *
template_find_version(JsonNode *reply, guint version)
{
    JsonArray *versions = carrel_cli_json_array(reply, "versions");

    for (guint i = 0; versions && i < json_array_get_length(versions); i++) {
        JsonNode *item = json_array_get_element(versions, i);

        if (carrel_cli_json_int(carrel_cli_json_object(item, NULL), "version", -1) == version)
            return item;
    }
    return NULL;
}

static int
template_show(CarrelCli *cli, int argc, char **argv)
{
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *name = NULL;
    g_autofree char *path = NULL;
    guint version = 0;
    JsonNode *shown;

    if (!carrel_cli_parse_options(cli, "template show NAME[@VERSION]",
                                  "Shows a template: its latest version, or the one asked for.",
                                  NULL, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!carrel_template_ref_parse(argv[1], &name, &version, &error))
        return carrel_cli_usage(cli, "%s", error->message);
    path = carrel_cli_item_path("templates", name, NULL);
    if (!path)
        return carrel_cli_usage(cli, "invalid template '%s'", name);
    if (!carrel_cli_call(cli, "GET", path, NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    shown = version ? template_find_version(reply, version) : reply;
    if (!shown) {
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "template '%s@%u' does not exist",
                    name, version);
        return carrel_cli_fail(cli, error);
    }
    carrel_cli_print_fields(cli, shown);
    return CARREL_CLI_EXIT_OK;
}

typedef struct {
    char *disk;
    char *format;
    char *firmware;
    char *kernel;
    char *initrd;
    char *cmdline;
} ImportArgs;

static void
import_args_clear(ImportArgs *args)
{
    g_free(args->disk);
    g_free(args->format);
    g_free(args->firmware);
    g_free(args->kernel);
    g_free(args->initrd);
    g_free(args->cmdline);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(ImportArgs, import_args_clear)

static void
import_add(JsonObject *obj, const char *member, const char *value, gboolean is_path)
{
    g_autofree char *absolute = NULL;

    if (!value)
        return;
    /* carreld resolves paths from its own directory: a relative path is the user's cwd's. */
    if (is_path)
        absolute = g_canonicalize_filename(value, NULL);
    json_object_set_string_member(obj, member, absolute ? absolute : value);
}

static int
import_check(CarrelCli *cli, const ImportArgs *args)
{
    if (!args->disk || !*args->disk)
        return carrel_cli_usage(cli, "--disk FILE is required");
    if (!args->format || (!g_str_equal(args->format, "qcow2") && !g_str_equal(args->format, "raw")))
        return carrel_cli_usage(cli, "--format qcow2 or --format raw is required "
                                     "(images are never probed)");
    if (args->firmware && !g_str_equal(args->firmware, "bios") &&
        !g_str_equal(args->firmware, "uefi"))
        return carrel_cli_usage(cli, "invalid firmware '%s': use bios or uefi", args->firmware);
    if ((args->initrd || args->cmdline) && !args->kernel)
        return carrel_cli_usage(cli, "--initrd and --cmdline need --kernel");
    return CARREL_CLI_EXIT_OK;
}

static JsonNode *
import_body(const char *name, const ImportArgs *args)
{
    JsonObject *obj = json_object_new();
    JsonNode *node = json_node_init_object(json_node_alloc(), obj);

    json_object_set_string_member(obj, "name", name);
    import_add(obj, "disk", args->disk, TRUE);
    import_add(obj, "format", args->format, FALSE);
    import_add(obj, "firmware", args->firmware, FALSE);
    import_add(obj, "kernel", args->kernel, TRUE);
    import_add(obj, "initrd", args->initrd, TRUE);
    import_add(obj, "cmdline", args->cmdline, FALSE);
    json_object_unref(obj);
    return node;
}

static int
template_import(CarrelCli *cli, int argc, char **argv)
{
    g_auto(ImportArgs) args = {0};
    const GOptionEntry entries[] = {
        {"disk", 0, 0, G_OPTION_ARG_FILENAME, &args.disk, "Disk image to import", "FILE"},
        {"format", 0, 0, G_OPTION_ARG_STRING, &args.format, "Its format: qcow2 or raw", "FORMAT"},
        {"firmware", 0, 0, G_OPTION_ARG_STRING, &args.firmware, "bios (default) or uefi", "FW"},
        {"kernel", 0, 0, G_OPTION_ARG_FILENAME, &args.kernel, "Kernel for direct boot", "FILE"},
        {"initrd", 0, 0, G_OPTION_ARG_FILENAME, &args.initrd, "Initrd for direct boot", "FILE"},
        {"cmdline", 0, 0, G_OPTION_ARG_STRING, &args.cmdline, "Kernel command line", "TEXT"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) body = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    int exit_code;

    if (!carrel_cli_parse_options(
            cli, "template import NAME",
            "Imports a disk image (copied, hashed) as a new template version.", entries, 1, 1,
            &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    exit_code = import_check(cli, &args);
    if (exit_code != CARREL_CLI_EXIT_OK)
        return exit_code;
    body = import_body(argv[1], &args);
    if (cli->stderr_tty && !cli->json) {
        g_autofree char *shown = carrel_cli_clean_text(argv[1]);

        g_printerr("importing template '%s'... (copying and hashing the image)\n", shown);
    }
    if (!carrel_cli_call(cli, "POST", "/v1/templates", body, &reply, &error))
        return carrel_cli_fail(cli, error);
    carrel_cli_print_fields(cli, reply);
    return CARREL_CLI_EXIT_OK;
}

static int
template_pool(CarrelCli *cli, int argc, char **argv)
{
    int size = -1;
    const GOptionEntry entries[] = {
        {"size", 's', 0, G_OPTION_ARG_INT, &size, "Sessions to keep ready (0 = none)", "N"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(JsonNode) body = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;
    JsonObject *obj;

    if (!carrel_cli_parse_options(cli, "template pool [NAME --size N]",
                                  "Sets or shows warm pools: paused sessions kept ready, taken "
                                  "at once by a create, refilled in the background.",
                                  entries, 0, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (argc < 2) {
        if (!carrel_cli_call(cli, "GET", "/v1/pools", NULL, &reply, &error))
            return carrel_cli_fail(cli, error);
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    if (size < 0)
        return carrel_cli_usage(cli, "template pool NAME needs --size N");
    path = carrel_cli_item_path("templates", argv[1], "pool");
    if (!path)
        return carrel_cli_usage(cli, "invalid template '%s'", argv[1]);
    obj = json_object_new();
    json_object_set_int_member(obj, "size", size);
    body = json_node_init_object(json_node_alloc(), obj);
    json_object_unref(obj);
    if (!carrel_cli_call(cli, "PUT", path, body, &reply, &error))
        return carrel_cli_fail(cli, error);
    carrel_cli_print_json(cli, reply);
    return CARREL_CLI_EXIT_OK;
}

static int
template_rm(CarrelCli *cli, int argc, char **argv)
{
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;
    JsonArray *deleted;

    if (!carrel_cli_parse_options(cli, "template rm NAME[@VERSION]",
                                  "Deletes one version of a template, or every version; refused "
                                  "while sessions use what would go.",
                                  NULL, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    path = carrel_cli_item_path("templates", argv[1], NULL);
    if (!path)
        return carrel_cli_usage(cli, "invalid template '%s'", argv[1]);
    if (!carrel_cli_call(cli, "DELETE", path, NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    deleted = carrel_cli_json_array(reply, "deleted");
    for (guint i = 0; deleted && i < json_array_get_length(deleted); i++) {
        g_autofree char *ref = carrel_cli_format_value(json_array_get_element(deleted, i));
        g_autofree char *shown = carrel_cli_clean_text(ref);

        g_print("deleted %s\n", shown);
    }
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_template(CarrelCli *cli, int argc, char **argv)
{
    static const struct {
        const char *name;
        CarrelCliVerbFunc func;
    } commands[] = {
        {"ls", template_ls},
        {"show", template_show},
        {"import", template_import},
        {"build", carrel_cli_template_build},
        {"warm", carrel_cli_template_warm},
        {"rm", template_rm},
        {"pool", template_pool},
    };
    const char *name = argc > 1 ? argv[1] : NULL;

    if (name && (g_str_equal(name, "-h") || g_str_equal(name, "--help"))) {
        g_print("%s", template_usage);
        return CARREL_CLI_EXIT_OK;
    }
    if (!name)
        return carrel_cli_usage(cli, "a template command is required: ls, show, import, build "
                                     "or rm");
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (g_str_equal(commands[i].name, name))
            return commands[i].func(cli, argc - 1, argv + 1);
    }
    return carrel_cli_usage(cli, "unknown template command '%s' (see 'carrel template --help')",
                            name);
}
