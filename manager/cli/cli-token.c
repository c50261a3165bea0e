/* carrel token ls|add|revoke|rotate-admin: the named tokens people and agents use (admin only). */
#include <string.h>

#include "cli/cli.h"

#define TOKEN_FILE_MAX_BYTES 4096

static const char token_usage[] =
    "Usage: carrel token COMMAND\n"
    "\n"
    "  ls                          list tokens: name, id, role, state, created, last used,\n"
    "                              expiry\n"
    "  add NAME [--role R] [--expires 12h] [--policy P]...\n"
    "                              a token for a person or an agent (reviewer by default);\n"
    "                              their actions are recorded under NAME; shown once;\n"
    "                              --policy limits an agent's sessions to those policies\n"
    "  revoke NAME                 refuse the token from now on\n"
    "  rotate-admin                a new admin token, shown once; carreld writes it to its\n"
    "                              admin.token and the old one stops working\n";

static int
token_ls(CarrelCli *cli, int argc, char **argv)
{
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelCliTable) table = NULL;
    g_autofree char *text = NULL;
    JsonArray *tokens;

    if (!carrel_cli_parse_options(cli, "token ls", "Lists tokens, revoked and expired ones too.",
                                  NULL, 0, 0, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!carrel_cli_call(cli, "GET", "/v1/tokens", NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        carrel_cli_print_json(cli, reply);
        return CARREL_CLI_EXIT_OK;
    }
    tokens = carrel_cli_json_array(reply, "tokens");
    table = carrel_cli_table_new_tokens();
    for (guint i = 0; tokens && i < json_array_get_length(tokens); i++) {
        JsonObject *token = carrel_cli_json_object(json_array_get_element(tokens, i), NULL);

        if (token)
            carrel_cli_table_add_token(table, token);
    }
    text = carrel_cli_table_render(table);
    carrel_cli_print_text(text);
    return CARREL_CLI_EXIT_OK;
}

static int
token_add(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *role = NULL;
    g_autofree char *expires = NULL;
    g_auto(GStrv) policies = NULL;
    const GOptionEntry entries[] = {
        {"role", 0, 0, G_OPTION_ARG_STRING, &role, "admin, agent or reviewer (default reviewer)",
         "ROLE"},
        {"expires", 0, 0, G_OPTION_ARG_STRING, &expires,
         "Refused after this long: 90s, 30m, 12h, 7d (default never)", "TTL"},
        {"policy", 0, 0, G_OPTION_ARG_STRING_ARRAY, &policies,
         "An agent token's sessions may have only these policies (repeatable; default any)",
         "NAME"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(JsonNode) body = carrel_cli_json_new_object();
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    JsonObject *obj = json_node_get_object(body);

    if (!carrel_cli_parse_options(cli,
                                  "token add NAME [--role ROLE] [--expires TTL] [--policy P]...",
                                  "Makes a token for a person or an agent; their actions are "
                                  "recorded under NAME. The token is shown once.",
                                  entries, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    json_object_set_string_member(obj, "role", role ? role : "reviewer");
    json_object_set_string_member(obj, "name", argv[1]);
    if (expires)
        json_object_set_string_member(obj, "expires", expires);
    if (policies) {
        JsonArray *list = json_array_new();
        for (guint i = 0; policies[i]; i++)
            json_array_add_string_element(list, policies[i]);
        json_object_set_array_member(obj, "policies", list);
    }
    if (!carrel_cli_call(cli, "POST", "/v1/tokens", body, &reply, &error))
        return carrel_cli_fail(cli, error);
    carrel_cli_print_fields(cli, reply);
    return CARREL_CLI_EXIT_OK;
}

static int
token_revoke(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *path = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;

    if (!carrel_cli_parse_options(cli, "token revoke NAME",
                                  "Revokes a token: every request with it is refused from now "
                                  "on. Its rows in the audit log stay.",
                                  NULL, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    path = carrel_cli_item_path("tokens", argv[1], NULL);
    if (!path)
        return carrel_cli_usage(cli, "invalid token name '%s'", argv[1]);
    if (!carrel_cli_call(cli, "DELETE", path, NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    carrel_cli_print_fields(cli, reply);
    return CARREL_CLI_EXIT_OK;
}

/*
 * Whether path holds token. Read back rather than assumed: a --token-file may be a copy that
 * carreld, which rewrites only its own admin.token, never saw.
 */
static gboolean
file_holds_token(const char *path, const char *token)
{
    g_autoptr(GFile) file = g_file_new_for_path(path);
    g_autoptr(GFileInputStream) stream = g_file_read(file, NULL, NULL);
    g_autofree char *buffer = g_malloc0(TOKEN_FILE_MAX_BYTES + 2);
    gsize len = 0;
    gboolean same;

    if (!stream || !g_input_stream_read_all(G_INPUT_STREAM(stream), buffer,
                                            TOKEN_FILE_MAX_BYTES + 1, &len, NULL, NULL))
        return FALSE;
    same = len <= TOKEN_FILE_MAX_BYTES && g_str_equal(g_strstrip(buffer), token);
    explicit_bzero(buffer, TOKEN_FILE_MAX_BYTES + 2);
    return same;
}

static void
rotate_explain(CarrelCli *cli, const char *token)
{
    g_autofree char *shown = cli->token_file ? carrel_cli_clean_text(cli->token_file) : NULL;

    g_printerr("carreld wrote the new token to admin.token in its state directory; the old "
               "token no longer works\n");
    if (!shown)
        return;
    if (token && file_holds_token(cli->token_file, token))
        g_printerr("%s now holds the new token (carreld rewrote it)\n", shown);
    else
        g_printerr("%s still holds the old token (carreld rewrote only its own admin.token): "
                   "use the token above\n",
                   shown);
}

static int
token_rotate_admin(CarrelCli *cli, int argc, char **argv)
{
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;

    if (!carrel_cli_parse_options(cli, "token rotate-admin",
                                  "Replaces the admin token with a new one, shown once. carreld "
                                  "writes it to admin.token in its state directory itself; the "
                                  "old token stops working.",
                                  NULL, 0, 0, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!carrel_cli_call(cli, "POST", "/v1/tokens/admin/rotate", NULL, &reply, &error))
        return carrel_cli_fail(cli, error);
    carrel_cli_print_fields(cli, reply);
    if (!cli->json)
        rotate_explain(cli, carrel_cli_json_string(carrel_cli_json_object(reply, NULL), "token"));
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_token(CarrelCli *cli, int argc, char **argv)
{
    static const struct {
        const char *name;
        CarrelCliVerbFunc func;
    } commands[] = {
        {"ls", token_ls},
        {"add", token_add},
        {"revoke", token_revoke},
        {"rotate-admin", token_rotate_admin},
    };
    const char *name = argc > 1 ? argv[1] : NULL;

    if (name && (g_str_equal(name, "-h") || g_str_equal(name, "--help"))) {
        g_print("%s", token_usage);
        return CARREL_CLI_EXIT_OK;
    }
    if (!name)
        return carrel_cli_usage(cli, "a token command is required: ls, add, revoke or "
                                     "rotate-admin");
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (g_str_equal(commands[i].name, name))
            return commands[i].func(cli, argc - 1, argv + 1);
    }
    return carrel_cli_usage(cli, "unknown token command '%s' (see 'carrel token --help')", name);
}
