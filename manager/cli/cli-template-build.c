#include "cli/cli.h"
#include "conf/conf.h"

#define BUILD_POLL_USEC G_USEC_PER_SEC

/*
 * `carrel template build NAME`: starts the job, then polls it every second. On a terminal the
 * job's latest progress line rewrites one line of stderr, cleared at the end; else (and always with
 * --json) to stdout as JSON lines
 * {"job": ID, "progress": "..."}. The result (the template, or the job's error) comes last.
 */

typedef struct {
    CarrelCli *cli;
    JsonNode *job_id; /* as carreld sent it: string or number */
    char *job_path;   /* /v1/jobs/ID */
    GPtrArray *seen;  /* the progress window of the last poll */
    gint64 printed;   /* lines printed so far, against the job's progress_total */
    gboolean on_tty;  /* progress as plain lines on stderr */
} BuildWatch;

static void
build_watch_clear(BuildWatch *watch)
{
    g_clear_pointer(&watch->job_id, json_node_unref);
    g_clear_pointer(&watch->job_path, g_free);
    g_clear_pointer(&watch->seen, g_ptr_array_unref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(BuildWatch, build_watch_clear)

static gboolean
build_watch_init(BuildWatch *watch, JsonNode *job, GError **error)
{
    JsonObject *obj = carrel_cli_json_object(job, NULL);
    JsonNode *id = obj ? json_object_get_member(obj, "id") : NULL;
    const char *text = carrel_cli_json_string(obj, "id");
    gint64 number = carrel_cli_json_int(obj, "id", -1);

    if (text)
        watch->job_path = carrel_cli_item_path("jobs", text, NULL);
    else if (number >= 0)
        watch->job_path = g_strdup_printf("/v1/jobs/%" G_GINT64_FORMAT, number);
    if (!watch->job_path) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "carreld sent a job without an id");
        return FALSE;
    }
    watch->job_id = json_node_copy(id);
    watch->seen = g_ptr_array_new_with_free_func(g_free);
    return TRUE;
}

static void
build_emit(BuildWatch *watch, const char *line)
{
    g_autoptr(JsonBuilder) builder = NULL;
    g_autoptr(JsonNode) node = NULL;

    if (watch->on_tty) {
        CarrelCliProgress progress = {.text = line, .done = -1, .total = -1};

        carrel_cli_progress_show(watch->cli, &progress);
        return;
    }
    builder = json_builder_new();
    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "job");
    json_builder_add_value(builder, json_node_copy(watch->job_id));
    json_builder_set_member_name(builder, "progress");
    json_builder_add_string_value(builder, line);
    json_builder_end_object(builder);
    node = json_builder_get_root(builder);
    carrel_cli_print_json_line(node);
}

/*
 * Prints the lines of the job's progress window that the last poll did not show: exactly, from
 * the job's running line count, or by matching the overlap when a daemon does not send it.
 */
static void
build_show_progress(BuildWatch *watch, JsonNode *job)
{
    JsonArray *progress = carrel_cli_json_array(job, "progress");
    gint64 total = carrel_cli_json_int(carrel_cli_json_object(job, NULL), "progress_total", -1);
    GPtrArray *current = g_ptr_array_new_with_free_func(g_free);
    guint first;

    for (guint i = 0; progress && i < json_array_get_length(progress); i++)
        g_ptr_array_add(current, carrel_cli_format_value(json_array_get_element(progress, i)));
    if (total >= (gint64)current->len) {
        gint64 fresh = MIN(total - watch->printed, (gint64)current->len);
        first = fresh > 0 ? current->len - (guint)fresh : current->len;
        watch->printed = total;
    } else {
        first =
            carrel_cli_progress_first_new((const char *const *)watch->seen->pdata, watch->seen->len,
                                          (const char *const *)current->pdata, current->len);
    }
    for (guint i = first; i < current->len; i++)
        build_emit(watch, g_ptr_array_index(current, i));
    g_ptr_array_unref(watch->seen);
    watch->seen = current;
}

static int
build_finish(BuildWatch *watch, JsonNode *job, const char *state)
{
    CarrelCli *cli = watch->cli;
    JsonObject *err = carrel_cli_json_object(job, "error");
    JsonObject *obj = carrel_cli_json_object(job, NULL);
    JsonNode *result = obj ? json_object_get_member(obj, "result") : NULL;
    g_autoptr(GError) error = NULL;

    if (watch->on_tty)
        carrel_cli_progress_show(cli, NULL);
    if (g_str_equal(state, "succeeded")) {
        if (!result || JSON_NODE_HOLDS_NULL(result))
            result = job;
        /* Off a terminal the whole output is JSON lines, the result last. */
        if (cli->json || !watch->on_tty)
            carrel_cli_print_json_line(result);
        else
            carrel_cli_print_fields(cli, result);
        return CARREL_CLI_EXIT_OK;
    }
    if (err && carrel_cli_json_string(err, "message"))
        g_set_error_literal(&error, CARREL_ERROR,
                            carrel_error_code_from_string(carrel_cli_json_string(err, "code")),
                            carrel_cli_json_string(err, "message"));
    else
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_FAILED, "build job ended in state '%s'",
                    state);
    return carrel_cli_fail(cli, error);
}

static int
build_wait(BuildWatch *watch, JsonNode *first)
{
    g_autoptr(JsonNode) job = json_node_ref(first);
    g_autoptr(GError) error = NULL;

    for (;;) {
        const char *state = carrel_cli_json_string(carrel_cli_json_object(job, NULL), "state");

        build_show_progress(watch, job);
        if (!state) {
            g_set_error(&error, CARREL_ERROR, CARREL_ERROR_FAILED,
                        "carreld sent a job without a state");
            carrel_cli_progress_show(watch->cli, NULL);
            return carrel_cli_fail(watch->cli, error);
        }
        if (g_str_equal(state, "succeeded") || g_str_equal(state, "failed"))
            return build_finish(watch, job, state);
        g_usleep(BUILD_POLL_USEC);
        g_clear_pointer(&job, json_node_unref);
        if (!carrel_cli_call(watch->cli, "GET", watch->job_path, NULL, &job, &error)) {
            carrel_cli_progress_show(watch->cli, NULL);
            return carrel_cli_fail(watch->cli, error);
        }
    }
}

/* Starts a template job (build or warm) at path with body and follows it to its end. */
static int
template_job(CarrelCli *cli, const char *verb, const char *target, const char *path, JsonNode *body)
{
    g_auto(BuildWatch) watch = {.cli = cli};
    g_autoptr(JsonNode) job = NULL;
    g_autoptr(GError) error = NULL;

    watch.on_tty = cli->stderr_tty && !cli->json;
    if (!carrel_cli_call(cli, "POST", path, body, &job, &error) ||
        !build_watch_init(&watch, job, &error))
        return carrel_cli_fail(cli, error);
    if (watch.on_tty) {
        g_autofree char *name = carrel_cli_clean_text(target);
        g_autofree char *id = carrel_cli_format_value(watch.job_id);
        g_autofree char *shown_id = carrel_cli_clean_text(id);

        g_printerr("%s template '%s' (job %s)...\n", verb, name, shown_id);
    }
    return build_wait(&watch, job);
}

int
carrel_cli_template_build(CarrelCli *cli, int argc, char **argv)
{
    g_autoptr(JsonNode) body = carrel_cli_json_new_object();
    g_autofree char *path = NULL;

    if (!carrel_cli_parse_options(cli, "template build NAME",
                                  "Builds a new version of a template from its recipe "
                                  "(templates/NAME/), showing progress.",
                                  NULL, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    path = carrel_cli_item_path("templates", argv[1], "build");
    if (!path)
        return carrel_cli_usage(cli, "invalid template '%s'", argv[1]);
    return template_job(cli, "building", argv[1], path, body);
}

int
carrel_cli_template_warm(CarrelCli *cli, int argc, char **argv)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) body = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *name = NULL;
    g_autofree char *path = NULL;
    guint version = 0;

    if (!carrel_cli_parse_options(cli, "template warm NAME[@VERSION]",
                                  "Boots a template version once and saves its running desktop, "
                                  "so sessions restore it instead of booting.",
                                  NULL, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!carrel_template_ref_parse(argv[1], &name, &version, &error))
        return carrel_cli_usage(cli, "%s", error->message);
    path = carrel_cli_item_path("templates", name, "warm");
    if (!path)
        return carrel_cli_usage(cli, "invalid template '%s'", name);
    json_builder_begin_object(b);
    if (version > 0) {
        json_builder_set_member_name(b, "version");
        json_builder_add_int_value(b, version);
    }
    json_builder_end_object(b);
    body = json_builder_get_root(b);
    return template_job(cli, "warming", argv[1], path, body);
}
