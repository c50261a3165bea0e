#include <glib/gstdio.h>
#include <unistd.h>

#include "archive/archive.h"
#include "cli/cli.h"
#include "conf/conf.h"

typedef struct {
    char *template_name;
    char *name;
    char *policy;     /* NULL: carreld's default (or the token's only policy) */
    int vcpus;        /* -1: not given */
    int memory_mib;   /* -1: not given */
    char *screen;     /* "WxH", checked by carreld; NULL: the template's */
    gboolean cold;    /* boot even from a warm template */
    char **inputs;    /* LOCAL:GUEST_PATH */
    char **artifacts; /* guest paths collected on exit */
    char *upload;     /* id of the uploaded inputs tar */
    int ttl_s;        /* 0: the policy's */
    int idle_s;
    char *on_expiry;
} CreateArgs;

/* "LOCAL:GUEST_PATH": the guest side is the part after the last ":/". */
static gboolean
split_input(const char *arg, char **ret_local, char **ret_guest)
{
    const char *sep = g_strrstr(arg, ":/");

    if (!sep || sep == arg)
        return FALSE;
    *ret_local = g_strndup(arg, (gsize)(sep - arg));
    *ret_guest = g_strdup(sep + 1);
    return TRUE;
}

/* Packs every --input into one tar (links kept as links, owners set by carreld). */
static gboolean
pack_inputs(char **inputs, const char *tar_path, GError **error)
{
    CarrelArchiveLimits limits = {CARREL_LIMIT_UPLOAD_BYTES, 100000};
    g_autoptr(CarrelArchiveWriter) w = carrel_archive_writer_new(tar_path, &limits, error);

    if (!w)
        return FALSE;
    for (guint i = 0; inputs[i]; i++) {
        g_autofree char *local = NULL, *guest = NULL;
        if (!split_input(inputs[i], &local, &guest)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "--input must be LOCAL:GUEST_PATH with an absolute guest path, not '%s'",
                        inputs[i]);
            return FALSE;
        }
        if (!carrel_archive_writer_add_local(w, local, guest, -1, -1, error)) {
            g_prefix_error(error, "--input %s: ", local);
            return FALSE;
        }
    }
    return carrel_archive_writer_finish(w, error);
}

/* Uploads the inputs tar; its id goes into the create request. */
static gboolean
upload_inputs(CarrelCli *cli, CreateArgs *args, GError **error)
{
    g_autofree char *tmp = NULL;
    g_autofree char *data = NULL;
    gsize len = 0;
    g_autoptr(GBytes) body = NULL;
    g_autoptr(GBytes) reply = NULL;
    g_autoptr(JsonNode) node = NULL;
    gboolean ok;
    int fd;

    if (!args->inputs)
        return TRUE;
    fd = g_file_open_tmp("carrel-inputs-XXXXXX.tar", &tmp, error);
    if (fd < 0)
        return FALSE;
    close(fd);
    ok = pack_inputs(args->inputs, tmp, error) && g_file_get_contents(tmp, &data, &len, error);
    (void)g_unlink(tmp);
    if (!ok)
        return FALSE;
    body = g_bytes_new_take(g_steal_pointer(&data), len);
    carrel_cli_transfer_begin(cli, "uploading inputs");
    ok = carrel_client_call_bytes(cli->client, "POST", "/v1/uploads", "application/x-tar", body,
                                  &reply, error);
    carrel_cli_transfer_end(cli);
    if (!ok)
        return FALSE;
    node = carrel_conf_parse_json(g_bytes_get_data(reply, NULL), g_bytes_get_size(reply), error);
    if (!node || !JSON_NODE_HOLDS_OBJECT(node) ||
        !json_object_get_string_member_with_default(json_node_get_object(node), "id", NULL)) {
        if (error && !*error)
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "the upload got no id");
        return FALSE;
    }
    args->upload = g_strdup(json_object_get_string_member(json_node_get_object(node), "id"));
    return TRUE;
}

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
    if (args->policy) {
        json_builder_set_member_name(builder, "policy");
        json_builder_add_string_value(builder, args->policy);
    }
    if (args->vcpus > 0) {
        json_builder_set_member_name(builder, "vcpus");
        json_builder_add_int_value(builder, args->vcpus);
    }
    if (args->memory_mib > 0) {
        json_builder_set_member_name(builder, "memory_mib");
        json_builder_add_int_value(builder, args->memory_mib);
    }
    if (args->screen) {
        json_builder_set_member_name(builder, "screen");
        json_builder_add_string_value(builder, args->screen);
    }
    if (args->cold) {
        json_builder_set_member_name(builder, "cold");
        json_builder_add_boolean_value(builder, TRUE);
    }
    if (args->ttl_s > 0) {
        json_builder_set_member_name(builder, "ttl_s");
        json_builder_add_int_value(builder, args->ttl_s);
    }
    if (args->idle_s > 0) {
        json_builder_set_member_name(builder, "idle_timeout_s");
        json_builder_add_int_value(builder, args->idle_s);
    }
    if (args->on_expiry) {
        json_builder_set_member_name(builder, "on_expiry");
        json_builder_add_string_value(builder, args->on_expiry);
    }
    if (args->artifacts) {
        json_builder_set_member_name(builder, "artifacts");
        json_builder_begin_array(builder);
        for (guint i = 0; args->artifacts[i]; i++)
            json_builder_add_string_value(builder, args->artifacts[i]);
        json_builder_end_array(builder);
    }
    if (args->upload) {
        /* The tar's members are guest paths below "/". */
        json_builder_set_member_name(builder, "inputs");
        json_builder_begin_array(builder);
        json_builder_begin_object(builder);
        json_builder_set_member_name(builder, "path");
        json_builder_add_string_value(builder, "/");
        json_builder_set_member_name(builder, "upload");
        json_builder_add_string_value(builder, args->upload);
        json_builder_end_object(builder);
        json_builder_end_array(builder);
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
    if (args->ttl_s < 0 || args->idle_s < 0)
        return carrel_cli_usage(cli, "--ttl and --idle must be positive numbers of seconds");
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
        {"policy", 'p', 0, G_OPTION_ARG_STRING, &args.policy,
         "Named policy the session runs under (default: default; carrel policy ls)", "NAME"},
        {"vcpus", 0, 0, G_OPTION_ARG_INT, &args.vcpus,
         "Virtual CPUs (default: the template's, else 1)", "N"},
        {"memory", 'm', 0, G_OPTION_ARG_INT, &args.memory_mib,
         "Memory in MiB (default: the template's, else 1024)", "MIB"},
        {"screen", 0, 0, G_OPTION_ARG_STRING, &args.screen,
         "Screen size, 640x480 to 1920x1200 with a width a multiple of 8 (default: the "
         "template's)",
         "WxH"},
        {"cold", 0, 0, G_OPTION_ARG_NONE, &args.cold,
         "Boot, even when the template is warm (default: restore the warm state)", NULL},
        {"input", 'i', 0, G_OPTION_ARG_FILENAME_ARRAY, &args.inputs,
         "Local file or folder to put in the guest before the agent starts, owned by the "
         "desktop user, modes kept (repeatable)",
         "LOCAL:GUEST_PATH"},
        {"ttl", 0, 0, G_OPTION_ARG_INT, &args.ttl_s,
         "Time limit in seconds from now (default: the policy's)", "S"},
        {"idle", 0, 0, G_OPTION_ARG_INT, &args.idle_s,
         "Acts after this many seconds without a command, action or file transfer", "S"},
        {"on-expiry", 0, 0, G_OPTION_ARG_STRING, &args.on_expiry,
         "What a time limit does: destroy (default), stop, hibernate or pause", "ACTION"},
        {"artifact", 'a', 0, G_OPTION_ARG_STRING_ARRAY, &args.artifacts,
         "Guest path collected when the session stops, crashes or is destroyed (repeatable)",
         "GUEST_PATH"},
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
    if (exit_code == CARREL_CLI_EXIT_OK && !upload_inputs(cli, &args, &error))
        exit_code = carrel_cli_fail(cli, error);
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
    g_free(args.policy);
    g_strfreev(args.inputs);
    g_strfreev(args.artifacts);
    g_free(args.upload);
    g_free(args.on_expiry);
    g_free(args.screen);
    return exit_code;
}
