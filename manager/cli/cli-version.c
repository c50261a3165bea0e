#include "cli/cli.h"

#include "carrel-config.h"

static JsonNode *
version_json(JsonNode *server)
{
    g_autoptr(JsonBuilder) builder = json_builder_new();

    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "client");
    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "version");
    json_builder_add_string_value(builder, CARREL_VERSION);
    json_builder_end_object(builder);
    json_builder_set_member_name(builder, "server");
    json_builder_add_value(builder, json_node_copy(server));
    json_builder_end_object(builder);
    return json_builder_get_root(builder);
}

/* One object for the "key: value" view: client_version, server_version, then the rest. */
static JsonObject *
version_fields(JsonObject *server)
{
    JsonObject *obj = json_object_new();
    g_autoptr(GList) members = json_object_get_members(server);

    json_object_set_string_member(obj, "client_version", CARREL_VERSION);
    for (GList *l = members; l; l = l->next) {
        const char *name = l->data;
        JsonNode *value = json_object_dup_member(server, name);

        if (g_str_equal(name, "version"))
            json_object_set_member(obj, "server_version", value);
        else if (!json_object_has_member(obj, name))
            json_object_set_member(obj, name, value);
        else
            json_node_unref(value);
    }
    return obj;
}

int
carrel_cli_version(CarrelCli *cli, int argc, char **argv)
{
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) both = NULL;
    g_autofree char *fields = NULL;
    g_autoptr(JsonObject) merged = NULL;

    if (!carrel_cli_parse_options(cli, "version", "Shows the versions of carrel and carreld.", NULL,
                                  0, 0, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!carrel_cli_call(cli, "GET", "/v1/version", NULL, &reply, &error)) {
        if (!cli->json)
            g_print("client_version: %s\n", CARREL_VERSION);
        return carrel_cli_fail(cli, error);
    }
    if (cli->json) {
        both = version_json(reply);
        carrel_cli_print_json(cli, both);
        return CARREL_CLI_EXIT_OK;
    }
    merged = version_fields(carrel_cli_json_object(reply, NULL));
    fields = carrel_cli_format_fields(merged);
    carrel_cli_print_text(fields);
    return CARREL_CLI_EXIT_OK;
}
