/* carrel policy ls|show: the named policies sessions are created under. */
#include "cli/cli.h"

static const char policy_usage[] = "Usage: carrel policy COMMAND\n"
                                   "\n"
                                   "  ls          the policies you may create sessions under:\n"
                                   "              name, vCPU and memory limits, time limit\n"
                                   "  show NAME   one policy, in full\n";

/* A limit as the table shows it: the number, or "-" for none. */
static char *
limit_text(JsonObject *group, const char *member)
{
    JsonNode *node = group ? json_object_get_member(group, member) : NULL;

    if (!node || !JSON_NODE_HOLDS_VALUE(node))
        return g_strdup("-");
    return g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(node));
}

static void
add_policy_row(CarrelCliTable *table, JsonObject *policy)
{
    JsonObject *resources = json_object_get_object_member(policy, "resources");
    JsonObject *timeouts = json_object_get_object_member(policy, "timeouts");
    g_autofree char *vcpus = limit_text(resources, "max_vcpus");
    g_autofree char *memory = limit_text(resources, "max_memory_mib");
    g_autofree char *ttl = limit_text(timeouts, "ttl_s");
    g_autofree char *idle = limit_text(timeouts, "idle_timeout_s");
    const char *cells[] = {carrel_cli_json_string(policy, "name"), vcpus, memory, ttl, idle, NULL};

    carrel_cli_table_add(table, cells);
}

static int
policy_ls(CarrelCli *cli, int argc, char **argv)
{
    static const char *const columns[] = {"NAME",  "MAX-VCPUS", "MAX-MEMORY-MIB",
                                          "TTL-S", "IDLE-S",    NULL};
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelCliTable) table = NULL;
    g_autofree char *text = NULL;
    JsonArray *policies;

    if (!carrel_cli_parse_options(cli, "policy ls",
                                  "Lists the named policies this token may create sessions under.",
                                  NULL, 0, 0, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!carrel_cli_call(cli, "GET", "/v1/policies", NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    policies = carrel_cli_json_array(reply, "policies");
    table = carrel_cli_table_new(columns);
    for (guint i = 0; policies && i < json_array_get_length(policies); i++) {
        JsonObject *policy = carrel_cli_json_object(json_array_get_element(policies, i), NULL);

        if (policy)
            add_policy_row(table, policy);
    }
    text = carrel_cli_table_render(table);
    carrel_cli_print_text(text);
    return CARREL_CLI_EXIT_OK;
}

static int
policy_show(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *path = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;

    if (!carrel_cli_parse_options(cli, "policy show NAME", "Shows a named policy in full.", NULL, 1,
                                  1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    path = carrel_cli_item_path("policies", argv[1], NULL);
    if (!path)
        return carrel_cli_usage(cli, "invalid policy name '%s'", argv[1]);
    if (!carrel_cli_call(cli, "GET", path, NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    /* Nested groups read best as they are: JSON either way. */
    carrel_cli_print_json(cli, reply);
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_policy(CarrelCli *cli, int argc, char **argv)
{
    static const struct {
        const char *name;
        CarrelCliVerbFunc func;
    } commands[] = {
        {"ls", policy_ls},
        {"show", policy_show},
    };
    const char *name = argc > 1 ? argv[1] : NULL;

    if (name && (g_str_equal(name, "-h") || g_str_equal(name, "--help"))) {
        g_print("%s", policy_usage);
        return CARREL_CLI_EXIT_OK;
    }
    if (!name)
        return carrel_cli_usage(cli, "a policy command is required: ls or show");
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (g_str_equal(commands[i].name, name))
            return commands[i].func(cli, argc - 1, argv + 1);
    }
    return carrel_cli_usage(cli, "unknown policy command '%s' (see 'carrel policy --help')", name);
}
