#include "cli/cli.h"

typedef struct {
    char *template_name;
    char *name;
    int vcpus;      /* -1: not given */
    int memory_mib; /* -1: not given */
    gboolean cold;  /* boot even from a warm template */
} CreateArgs;

static JsonNode *
create_body(const CreateArgs *args)
{
    g_autoptr(JsonBuilder) builder = json_builder_new();

    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "template");
    json_builder_add_string_value(builder, args->template_name);
    if (args->name) {
        json_builder_set_member_name(builder, "name");
        json_builder_add_string_value(builder, args->name);
    }
    if (args->vcpus > 0) {
        json_builder_set_member_name(builder, "vcpus");
        json_builder_add_int_value(builder, args->vcpus);
    }
    if (args->memory_mib > 0) {
        json_builder_set_member_name(builder, "memory_mib");
        json_builder_add_int_value(builder, args->memory_mib);
    }
    if (args->cold) {
        json_builder_set_member_name(builder, "cold");
        json_builder_add_boolean_value(builder, TRUE);
    }
    json_builder_end_object(builder);
    return json_builder_get_root(builder);
}

/* Checks the options and takes the template from --template or the one positional argument. */
static int
create_check(CarrelCli *cli, CreateArgs *args, int argc, char **argv)
{
    if (argc == 2) {
        if (args->template_name && !g_str_equal(args->template_name, argv[1]))
            return carrel_cli_usage(cli, "two templates given: '%s' and '%s'", args->template_name,
                                    argv[1]);
        g_free(args->template_name);
        args->template_name = g_strdup(argv[1]);
    }
    if (!args->template_name || !*args->template_name)
        return carrel_cli_usage(cli, "a template is required: carrel create TEMPLATE");
    if (args->vcpus != -1 && args->vcpus < 1)
        return carrel_cli_usage(cli, "--vcpus must be a positive number");
    if (args->memory_mib != -1 && args->memory_mib < 1)
        return carrel_cli_usage(cli, "--memory must be a positive number of MiB");
    if (args->name && !*args->name)
        return carrel_cli_usage(cli, "--name must not be empty");
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_create(CarrelCli *cli, int argc, char **argv)
{
    CreateArgs args = {.vcpus = -1, .memory_mib = -1};
    const GOptionEntry entries[] = {
        {"template", 't', 0, G_OPTION_ARG_STRING, &args.template_name,
         "Template to clone: NAME or NAME@VERSION", "TEMPLATE"},
        {"name", 'n', 0, G_OPTION_ARG_STRING, &args.name, "Name of the session", "NAME"},
        {"vcpus", 0, 0, G_OPTION_ARG_INT, &args.vcpus, "Virtual CPUs (default 1)", "N"},
        {"memory", 'm', 0, G_OPTION_ARG_INT, &args.memory_mib, "Memory in MiB (default 1024)",
         "MIB"},
        {"cold", 0, 0, G_OPTION_ARG_NONE, &args.cold,
         "Boot, even when the template is warm (default: restore the warm state)", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) body = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    int exit_code = CARREL_CLI_EXIT_USAGE;

    if (carrel_cli_parse_options(cli, "create [TEMPLATE]",
                                 "Creates a session from a template (restoring its warm state when "
                                 "it has one, else booting) "
                                 "and waits for its guest agent.",
                                 entries, 0, 1, &argc, &argv))
        exit_code = create_check(cli, &args, argc, argv);
    if (exit_code == CARREL_CLI_EXIT_OK) {
        body = create_body(&args);
        if (cli->stderr_tty && !cli->json) {
            g_autofree char *shown = carrel_cli_clean_text(args.template_name);

            g_printerr("creating session from '%s'... (waiting for the guest agent)\n", shown);
        }
        if (carrel_cli_call(cli, "POST", "/v1/sessions", body, &reply, &error))
            carrel_cli_print_session(cli, reply);
        else
            exit_code = carrel_cli_fail(cli, error);
    }
    g_free(args.template_name);
    g_free(args.name);
    return exit_code;
}
