/*
 * Integration: MCP on the real carreld (libvirt's test driver, a temporary state dir). POST /mcp
 * is driven with libsoup directly (the tests need their own Origin and MCP-Protocol-Version
 * headers), `carrel mcp` as a child process over its stdin and stdout.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <string.h>

#include <libsoup/soup.h>

#include "client/client.h"
#include "conf/conf.h"

typedef struct {
    char *dir;
    char *socket;
    char *token;
    GSubprocess *daemon;
    SoupSession *http;
} Fixture;

static Fixture fx;

static const char *const all_tools[] = {
    "sandbox_create",     "sandbox_list",
    "sandbox_destroy",    "sandbox_pause",
    "sandbox_resume",     "snapshot_create",
    "snapshot_revert",    "computer",
    "screenshot",         "command_run",
    "file_read",          "file_write",
    "sandbox_hibernate",  "sandbox_fork",
    "snapshot_list",      "file_list",
    "file_stat",          "file_mkdir",
    "file_remove",        "file_move",
    "process_start",      "process_list",
    "process_read",       "process_kill",
    "accessibility_tree", NULL,
};

static void
import_template(void)
{
    g_autofree char *disk = g_build_filename(fx.dir, "disk.qcow2", NULL);
    g_autofree char *kernel = g_build_filename(fx.dir, "vmlinuz", NULL);
    const char *create[] = {"qemu-img", "create", "-q", "-f", "qcow2", disk, "64M", NULL};
    g_autofree char *req =
        g_strdup_printf("{\"name\":\"tiny\",\"disk\":\"%s\",\"format\":\"qcow2\","
                        "\"kernel\":\"%s\"}",
                        disk, kernel);
    g_autoptr(CarrelClient) client = carrel_client_new(fx.socket, NULL, fx.token, 60, NULL);
    g_autoptr(JsonNode) body = carrel_conf_parse_json(req, strlen(req), NULL);
    g_autoptr(GError) error = NULL;

    if (!carrel_util_run(create, 60, NULL, NULL, &error))
        fail_msg("%s", error->message);
    assert_true(carrel_util_write_file(kernel, "not a kernel", -1, 0644, NULL));
    if (!carrel_client_call(client, "POST", "/v1/templates", body, NULL, &error))
        fail_msg("importing the template: %s", error->message);
}

static int
setup(void **state)
{
    g_autofree char *state_dir = NULL;
    g_autofree char *token_path = NULL;
    g_autofree char *log = NULL;
    g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_NONE);
    g_autoptr(GSocketAddress) address = NULL;
    g_autoptr(GError) error = NULL;

    fx.dir = g_dir_make_tmp("carrel-mcp-XXXXXX", NULL);
    fx.socket = g_build_filename(fx.dir, "carreld.sock", NULL);
    state_dir = g_build_filename(fx.dir, "state", NULL);
    token_path = g_build_filename(state_dir, "admin.token", NULL);
    log = g_build_filename(fx.dir, "carreld.log", NULL);
    assert_non_null(g_getenv("CARREL_DAEMON"));
    g_subprocess_launcher_set_stderr_file_path(launcher, log);
    fx.daemon = g_subprocess_launcher_spawn(launcher, &error, g_getenv("CARREL_DAEMON"),
                                            "--state-dir", state_dir, "--socket", fx.socket,
                                            "--libvirt-uri", "test:///default", NULL);
    assert_non_null(fx.daemon);
    for (int i = 0; i < 300 && !g_file_test(fx.socket, G_FILE_TEST_EXISTS); i++)
        g_usleep(50 * 1000);
    assert_true(g_file_get_contents(token_path, &fx.token, NULL, NULL));
    g_strstrip(fx.token);
    address = g_unix_socket_address_new(fx.socket);
    fx.http = soup_session_new_with_options("remote-connectable", address, "timeout", 60, NULL);
    import_template();
    return 0;
}

static int
teardown(void **state)
{
    if (fx.daemon && g_subprocess_get_identifier(fx.daemon))
        g_subprocess_send_signal(fx.daemon, SIGTERM);
    if (fx.daemon)
        g_subprocess_wait(fx.daemon, NULL, NULL);
    g_clear_object(&fx.daemon);
    g_clear_object(&fx.http);
    if (!g_getenv("CARREL_TEST_KEEP"))
        carrel_util_remove_tree(fx.dir, NULL);
    return 0;
}

typedef struct {
    guint status;
    char *content_type;
    gsize length;
    JsonNode *body; /* NULL when empty or not JSON */
} Reply;

static void
reply_clear(Reply *r)
{
    g_clear_pointer(&r->content_type, g_free);
    g_clear_pointer(&r->body, json_node_unref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Reply, reply_clear)

/* POST /mcp with body and optional headers (NULL: not sent); token NULL sends none. */
static void
post_full(const char *body, const char *token, const char *origin, const char *version, Reply *ret)
{
    g_autoptr(SoupMessage) msg = soup_message_new("POST", "http://localhost/mcp");
    SoupMessageHeaders *headers = soup_message_get_request_headers(msg);
    g_autoptr(GBytes) in = g_bytes_new(body, strlen(body));
    g_autoptr(GBytes) out = NULL;
    g_autoptr(GError) error = NULL;
    const char *type;
    gsize len = 0;
    const char *data;

    if (token) {
        g_autofree char *auth = g_strconcat("Bearer ", token, NULL);
        soup_message_headers_replace(headers, "Authorization", auth);
    }
    if (origin)
        soup_message_headers_replace(headers, "Origin", origin);
    if (version)
        soup_message_headers_replace(headers, "MCP-Protocol-Version", version);
    soup_message_headers_replace(headers, "Accept", "application/json, text/event-stream");
    soup_message_set_request_body_from_bytes(msg, "application/json", in);
    out = soup_session_send_and_read(fx.http, msg, NULL, &error);
    if (!out)
        fail_msg("POST /mcp: %s", error->message);
    ret->status = soup_message_get_status(msg);
    type = soup_message_headers_get_content_type(soup_message_get_response_headers(msg), NULL);
    ret->content_type = g_strdup(type);
    data = g_bytes_get_data(out, &len);
    ret->length = len;
    ret->body = len ? carrel_conf_parse_json(data, len, NULL) : NULL;
}

static void
post(const char *body, Reply *ret)
{
    post_full(body, fx.token, NULL, NULL, ret);
}

static JsonObject *
object(JsonNode *node)
{
    assert_non_null(node);
    assert_true(JSON_NODE_HOLDS_OBJECT(node));
    return json_node_get_object(node);
}

/* The "error" of a JSON-RPC reply: its code, after checking the id. */
static gint64
rpc_error(Reply *r, const char *id_json)
{
    JsonObject *obj = object(r->body);
    g_autofree char *id = json_to_string(json_object_get_member(obj, "id"), FALSE);

    assert_string_equal(json_object_get_string_member(obj, "jsonrpc"), "2.0");
    assert_string_equal(id, id_json);
    assert_false(json_object_has_member(obj, "result"));
    assert_non_null(
        json_object_get_string_member(json_object_get_object_member(obj, "error"), "message"));
    return json_object_get_int_member(json_object_get_object_member(obj, "error"), "code");
}

static JsonObject *
rpc_result(Reply *r)
{
    JsonObject *obj = object(r->body);

    if (!json_object_has_member(obj, "result")) {
        g_autofree char *text = json_to_string(r->body, FALSE);
        fail_msg("no result: %s", text);
    }
    return json_object_get_object_member(obj, "result");
}

/* Calls a tool and returns its result (a new reference); asserts the JSON-RPC success. */
static JsonNode *
call_tool(const char *name, const char *arguments)
{
    g_autofree char *body = g_strdup_printf("{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":"
                                            "\"tools/call\",\"params\":{\"name\":\"%s\","
                                            "\"arguments\":%s}}",
                                            name, arguments);
    g_auto(Reply) r = {0};

    post(body, &r);
    assert_int_equal(r.status, 200);
    return json_node_copy(json_object_get_member(object(r.body), "result"));
}

static const char *
first_text(JsonNode *result)
{
    JsonArray *content = json_object_get_array_member(object(result), "content");
    JsonObject *last = json_array_get_object_element(content, json_array_get_length(content) - 1);

    assert_string_equal(json_object_get_string_member(last, "type"), "text");
    return json_object_get_string_member(last, "text");
}

static gboolean
is_error(JsonNode *result)
{
    return json_object_get_boolean_member(object(result), "isError");
}

static void
test_auth_and_origin(void **state)
{
    const char *ping = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
    g_auto(Reply) anon = {0};
    g_auto(Reply) evil = {0};
    g_auto(Reply) local = {0};
    g_auto(Reply) named = {0};
    g_auto(Reply) bad_version = {0};
    g_auto(Reply) good_version = {0};

    post_full(ping, NULL, NULL, NULL, &anon);
    assert_int_equal(anon.status, 401);
    assert_string_equal(json_object_get_string_member(
                            json_object_get_object_member(object(anon.body), "error"), "code"),
                        "unauthorized");
    /* A page elsewhere must not reach the local server (DNS rebinding), even with a token. */
    post_full(ping, fx.token, "http://evil.example", NULL, &evil);
    assert_int_equal(evil.status, 403);
    assert_string_equal(json_object_get_string_member(
                            json_object_get_object_member(object(evil.body), "error"), "code"),
                        "forbidden");
    post_full(ping, fx.token, "http://127.0.0.1:1234", NULL, &local);
    assert_int_equal(local.status, 200);
    assert_int_equal(json_object_get_size(rpc_result(&local)), 0);
    post_full(ping, fx.token, "http://localhost:8080", "2025-06-18", &named);
    assert_int_equal(named.status, 200);
    post_full(ping, fx.token, NULL, "1999-01-01", &bad_version);
    assert_int_equal(bad_version.status, 400);
    post_full(ping, fx.token, NULL, "2024-11-05", &good_version);
    assert_int_equal(good_version.status, 200);
    {
        g_autoptr(SoupMessage) msg = soup_message_new("GET", "http://localhost/mcp");
        g_autofree char *auth = g_strconcat("Bearer ", fx.token, NULL);
        g_autoptr(GBytes) out = NULL;

        soup_message_headers_replace(soup_message_get_request_headers(msg), "Authorization", auth);
        out = soup_session_send_and_read(fx.http, msg, NULL, NULL);
        /* No server-sent event stream: GET is not allowed, as the transport wants. */
        assert_int_equal(soup_message_get_status(msg), 405);
    }
}

static void
test_initialize_and_notifications(void **state)
{
    g_auto(Reply) init = {0};
    g_auto(Reply) init_old = {0};
    g_auto(Reply) init_future = {0};
    g_auto(Reply) note = {0};
    g_auto(Reply) response = {0};
    JsonObject *result;

    post("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
         "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}",
         &init);
    assert_int_equal(init.status, 200);
    assert_string_equal(init.content_type, "application/json");
    result = rpc_result(&init);
    assert_string_equal(json_object_get_string_member(result, "protocolVersion"), "2025-06-18");
    assert_non_null(json_object_get_object_member(
        json_object_get_object_member(result, "capabilities"), "tools"));
    assert_string_equal(
        json_object_get_string_member(json_object_get_object_member(result, "serverInfo"), "name"),
        "carrel");
    assert_non_null(json_object_get_string_member(
        json_object_get_object_member(result, "serverInfo"), "version"));
    post("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
         "\"2025-03-26\"}}",
         &init_old);
    assert_string_equal(json_object_get_string_member(rpc_result(&init_old), "protocolVersion"),
                        "2025-03-26");
    post("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
         "\"2099-01-01\"}}",
         &init_future);
    assert_string_equal(json_object_get_string_member(rpc_result(&init_future), "protocolVersion"),
                        "2025-06-18");

    /* Notifications and responses: 202, nothing in the body. */
    post("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &note);
    assert_int_equal(note.status, 202);
    assert_int_equal(note.length, 0);
    post("{\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"result\":{}}", &response);
    assert_int_equal(response.status, 202);
    assert_int_equal(response.length, 0);
}

static void
test_jsonrpc_errors(void **state)
{
    g_auto(Reply) method = {0};
    g_auto(Reply) no_version = {0};
    g_auto(Reply) bad_id = {0};
    g_auto(Reply) malformed = {0};
    g_auto(Reply) batch = {0};
    g_auto(Reply) tool = {0};
    g_auto(Reply) args = {0};
    g_auto(Reply) no_name = {0};

    post("{\"jsonrpc\":\"2.0\",\"id\":\"m\",\"method\":\"resources/list\"}", &method);
    assert_int_equal(method.status, 200);
    assert_int_equal(rpc_error(&method, "\"m\""), -32601);
    /* Messages that cannot be read: 400 with the JSON-RPC error, not carrel's envelope. */
    post("{\"id\":5,\"method\":\"ping\"}", &no_version);
    assert_int_equal(no_version.status, 400);
    assert_int_equal(rpc_error(&no_version, "5"), -32600);
    post("{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"method\":\"ping\"}", &bad_id);
    assert_int_equal(bad_id.status, 400);
    assert_int_equal(rpc_error(&bad_id, "null"), -32600);
    post("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":", &malformed);
    assert_int_equal(malformed.status, 400);
    assert_string_equal(malformed.content_type, "application/json");
    assert_int_equal(rpc_error(&malformed, "null"), -32700);
    post("[{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}]", &batch);
    assert_int_equal(rpc_error(&batch, "null"), -32600);

    post("{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":\"rm_rf\","
         "\"arguments\":{}}}",
         &tool);
    assert_int_equal(tool.status, 200);
    assert_int_equal(rpc_error(&tool, "8"), -32602);
    post("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":"
         "\"sandbox_create\",\"arguments\":{\"template\":\"tiny\",\"vcpus\":\"two\"}}}",
         &args);
    assert_int_equal(rpc_error(&args, "9"), -32602);
    post("{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":{}}", &no_name);
    assert_int_equal(rpc_error(&no_name, "10"), -32602);
}

static void
test_tools_list(void **state)
{
    g_auto(Reply) r = {0};
    JsonArray *tools;
    guint n;

    post("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{}}", &r);
    tools = json_object_get_array_member(rpc_result(&r), "tools");
    n = json_array_get_length(tools);
    assert_int_equal(n, g_strv_length((char **)all_tools));
    for (guint i = 0; all_tools[i]; i++) {
        gboolean found = FALSE;

        for (guint j = 0; j < n && !found; j++) {
            JsonObject *tool = json_array_get_object_element(tools, j);
            JsonObject *schema = json_object_get_object_member(tool, "inputSchema");

            if (!g_str_equal(json_object_get_string_member(tool, "name"), all_tools[i]))
                continue;
            found = TRUE;
            assert_string_equal(json_object_get_string_member(schema, "type"), "object");
            assert_non_null(json_object_get_object_member(schema, "properties"));
            assert_true(strlen(json_object_get_string_member(tool, "description")) > 0);
        }
        if (!found)
            fail_msg("tool '%s' is not listed", all_tools[i]);
    }
}

static guint
count_sessions(const char *name)
{
    g_autoptr(JsonNode) list = call_tool("sandbox_list", "{}");
    JsonArray *sessions = json_object_get_array_member(
        json_object_get_object_member(object(list), "structuredContent"), "sessions");
    guint found = 0;

    assert_false(is_error(list));
    assert_non_null(strstr(first_text(list), "\"sessions\""));
    for (guint i = 0; i < json_array_get_length(sessions); i++) {
        JsonObject *s = json_array_get_object_element(sessions, i);
        assert_true(json_object_has_member(s, "control"));
        found += g_str_equal(json_object_get_string_member(s, "name"), name);
    }
    return found;
}

/* The session's timeline has an event of action by actor. */
static gboolean
has_event(const char *id, const char *action, const char *actor)
{
    g_autoptr(CarrelClient) client = carrel_client_new(fx.socket, NULL, fx.token, 60, NULL);
    g_autofree char *path = g_strdup_printf("/v1/sessions/%s/events", id);
    g_autoptr(JsonNode) reply = NULL;
    JsonArray *events;

    assert_true(carrel_client_call(client, "GET", path, NULL, &reply, NULL));
    events = json_object_get_array_member(object(reply), "events");
    for (guint i = 0; i < json_array_get_length(events); i++) {
        JsonObject *ev = json_array_get_object_element(events, i);
        if (g_str_equal(json_object_get_string_member(ev, "action"), action) &&
            g_str_equal(json_object_get_string_member(ev, "actor"), actor))
            return TRUE;
    }
    return FALSE;
}

static void
assert_png_image(JsonObject *content)
{
    gsize len = 0;
    g_autofree guchar *png = NULL;

    assert_string_equal(json_object_get_string_member(content, "type"), "image");
    assert_string_equal(json_object_get_string_member(content, "mimeType"), "image/png");
    png = g_base64_decode(json_object_get_string_member(content, "data"), &len);
    assert_true(len > 8);
    assert_memory_equal(png, "\x89PNG\r\n\x1a\n", 8);
}

static void
check_screen_tools(const char *id)
{
    g_autofree char *args = g_strdup_printf("{\"session\":\"%s\"}", id);
    g_autofree char *shot_action =
        g_strdup_printf("{\"session\":\"%s\",\"action\":\"screenshot\"}", id);
    g_autofree char *click =
        g_strdup_printf("{\"session\":\"%s\",\"action\":\"left_click\",\"coordinate\":[5,5]}", id);
    g_autoptr(JsonNode) shot = call_tool("screenshot", args);
    g_autoptr(JsonNode) observed = call_tool("computer", shot_action);
    g_autoptr(JsonNode) clicked = call_tool("computer", click);
    JsonArray *content;

    /* libvirt's test driver has a screen: screenshots work, input does not. */
    assert_false(is_error(shot));
    assert_png_image(
        json_array_get_object_element(json_object_get_array_member(object(shot), "content"), 0));
    assert_false(is_error(observed));
    content = json_object_get_array_member(object(observed), "content");
    assert_int_equal(json_array_get_length(content), 2);
    assert_png_image(json_array_get_object_element(content, 0));
    assert_non_null(strstr(first_text(observed), "\"results\""));
    assert_null(strstr(first_text(observed), "\"data\""));
    assert_true(is_error(clicked));
    assert_non_null(strstr(first_text(clicked), "unsupported"));
    /* On the timeline as the token's role, as through the v1 routes. */
    assert_true(has_event(id, "click", "admin"));
}

static void
check_guest_tools(const char *id)
{
    g_autofree char *run = g_strdup_printf("{\"session\":\"%s\",\"command\":\"ls /\"}", id);
    g_autofree char *read = g_strdup_printf("{\"session\":\"%s\",\"path\":\"/etc/hostname\"}", id);
    g_autofree char *write = g_strdup_printf(
        "{\"session\":\"%s\",\"path\":\"/tmp/a\",\"content\":\"aGk=\",\"encoding\":\"base64\"}",
        id);
    g_autofree char *pause = g_strdup_printf("{\"session\":\"%s\"}", id);
    g_autoptr(JsonNode) ran = call_tool("command_run", run);
    g_autoptr(JsonNode) got = call_tool("file_read", read);
    g_autoptr(JsonNode) put = call_tool("file_write", write);
    g_autoptr(JsonNode) paused = call_tool("sandbox_pause", pause);
    g_autoptr(JsonNode) snap =
        call_tool("snapshot_create", "{\"session\":\"mcp-one\",\"name\":\"before\"}");

    /* No guest agent on the test driver: failures to run are tool errors, not protocol ones. */
    assert_true(is_error(ran));
    assert_true(is_error(got));
    assert_true(is_error(put));
    assert_true(has_event(id, "exec", "admin"));
    /* The test driver pauses and resumes for real. */
    assert_false(is_error(paused));
    assert_non_null(strstr(first_text(paused), "\"state\":\"paused\""));
    {
        g_autoptr(JsonNode) again = call_tool("sandbox_pause", pause);
        g_autoptr(JsonNode) resumed = call_tool("sandbox_resume", pause);
        assert_true(is_error(again)); /* paused already: wrong state, as a tool error */
        assert_false(is_error(resumed));
        assert_non_null(strstr(first_text(resumed), "\"state\":\"running\""));
    }
    assert_true(is_error(snap));
    /* The test driver cannot save memory: a tool error naming the cause, not a protocol one. */
    assert_non_null(strstr(first_text(snap), "snapshot"));
}

static void
test_sandbox_tools(void **state)
{
    g_autoptr(JsonNode) created =
        call_tool("sandbox_create", "{\"template\":\"tiny\",\"name\":\"mcp-one\"}");
    g_autoptr(JsonNode) again =
        call_tool("sandbox_create", "{\"template\":\"tiny\",\"name\":\"mcp-one\"}");
    g_autoptr(JsonNode) destroyed = NULL;
    g_autoptr(JsonNode) twice = NULL;
    JsonObject *session;
    g_autofree char *id = NULL;
    g_autofree char *args = NULL;

    if (is_error(created))
        fail_msg("sandbox_create: %s", first_text(created));
    session = json_object_get_object_member(object(created), "structuredContent");
    assert_string_equal(json_object_get_string_member(session, "state"), "running");
    /* The one shape of a session, as REST shows it: with its control lease (nobody holds it). */
    assert_true(json_object_has_member(session, "control"));
    assert_true(json_object_get_null_member(session, "control"));
    id = g_strdup(json_object_get_string_member(session, "id"));
    assert_non_null(strstr(first_text(created), id));
    /* The name is taken: a tool error the model can read, not a protocol error. */
    assert_true(is_error(again));
    assert_non_null(strstr(first_text(again), "exists"));
    assert_int_equal(count_sessions("mcp-one"), 1);

    check_screen_tools(id);
    check_guest_tools(id);

    args = g_strdup_printf("{\"session\":\"%s\"}", id);
    destroyed = call_tool("sandbox_destroy", args);
    assert_false(is_error(destroyed));
    assert_string_equal(
        json_object_get_string_member(
            json_object_get_object_member(object(destroyed), "structuredContent"), "state"),
        "destroyed");
    assert_int_equal(count_sessions("mcp-one"), 0);
    twice = call_tool("sandbox_destroy", args);
    assert_true(is_error(twice));
}

/* Reads one line from a child's pipe within timeout_s; NULL at EOF or timeout. */
static char *
read_line(GInputStream *in, guint timeout_s)
{
    g_autoptr(GString) line = g_string_new(NULL);
    gint64 deadline = g_get_monotonic_time() + (gint64)timeout_s * G_USEC_PER_SEC;

    while (g_get_monotonic_time() < deadline) {
        char c;
        g_autoptr(GError) error = NULL;
        gssize n = g_pollable_input_stream_read_nonblocking(G_POLLABLE_INPUT_STREAM(in), &c, 1,
                                                            NULL, &error);

        if (n == 0)
            return NULL;
        if (n < 0 && g_error_matches(error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK)) {
            g_usleep(5 * 1000);
            continue;
        }
        if (n < 0)
            fail_msg("reading carrel mcp: %s", error->message);
        if (c == '\n')
            return g_string_free(g_steal_pointer(&line), FALSE);
        g_string_append_c(line, c);
    }
    return NULL;
}

static void
send_line(GSubprocess *proc, const char *line)
{
    GOutputStream *in = g_subprocess_get_stdin_pipe(proc);
    g_autoptr(GError) error = NULL;

    if (!g_output_stream_write_all(in, line, strlen(line), NULL, NULL, &error) ||
        !g_output_stream_write_all(in, "\n", 1, NULL, NULL, &error) ||
        !g_output_stream_flush(in, NULL, &error))
        fail_msg("writing to carrel mcp: %s", error->message);
}

static GSubprocess *
spawn_bridge(const char *token)
{
    g_autoptr(GSubprocessLauncher) launcher =
        g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE |
                                  G_SUBPROCESS_FLAGS_STDERR_PIPE);
    g_autoptr(GError) error = NULL;
    GSubprocess *proc;

    assert_non_null(g_getenv("CARREL_CLI"));
    g_subprocess_launcher_setenv(launcher, "CARREL_SOCKET", fx.socket, TRUE);
    g_subprocess_launcher_setenv(launcher, "CARREL_TOKEN", token, TRUE);
    g_subprocess_launcher_unsetenv(launcher, "CARREL_URL");
    proc = g_subprocess_launcher_spawn(launcher, &error, g_getenv("CARREL_CLI"), "mcp", NULL);
    if (!proc)
        fail_msg("%s", error->message);
    return proc;
}

static JsonObject *
line_object(const char *line, JsonNode **ret_node)
{
    assert_non_null(line);
    *ret_node = carrel_conf_parse_json(line, strlen(line), NULL);
    return object(*ret_node);
}

static void
test_stdio_bridge(void **state)
{
    g_autoptr(GSubprocess) proc = spawn_bridge(fx.token);
    GInputStream *out = g_subprocess_get_stdout_pipe(proc);
    g_autofree char *first = NULL;
    g_autofree char *second = NULL;
    g_autofree char *rest = NULL;
    g_autofree char *err = NULL;
    g_autoptr(JsonNode) n1 = NULL;
    g_autoptr(JsonNode) n2 = NULL;
    g_autoptr(GError) error = NULL;
    JsonObject *o1, *o2;

    /* Each reply comes as soon as its message is sent: clients wait for it before going on. */
    send_line(proc, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
                    "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{}}}");
    first = read_line(out, 30);
    o1 = line_object(first, &n1);
    assert_int_equal(json_object_get_int_member(o1, "id"), 1);
    assert_string_equal(json_object_get_string_member(json_object_get_object_member(o1, "result"),
                                                      "protocolVersion"),
                        "2025-06-18");
    send_line(proc, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    send_line(proc, "");
    send_line(proc, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\r");
    second = read_line(out, 30);
    o2 = line_object(second, &n2);
    assert_int_equal(json_object_get_int_member(o2, "id"), 2);
    assert_int_equal(json_array_get_length(json_object_get_array_member(
                         json_object_get_object_member(o2, "result"), "tools")),
                     g_strv_length((char **)all_tools));

    /* End of stdin: exit 0, nothing more on stdout (the notification had no reply). */
    assert_true(g_subprocess_communicate_utf8(proc, NULL, NULL, &rest, &err, &error));
    assert_true(g_subprocess_get_if_exited(proc));
    assert_int_equal(g_subprocess_get_exit_status(proc), 0);
    assert_string_equal(rest, "");
    assert_null(strstr(err, fx.token));
    assert_null(strstr(first, fx.token));
}

static void
test_stdio_refusals(void **state)
{
    g_autoptr(GSubprocess) proc = spawn_bridge("not-the-token");
    g_autofree char *big = g_strnfill(1024 * 1024 + 10, 'x');
    g_autofree char *input =
        g_strdup_printf("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\"}\n"
                        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
                        "%s\n",
                        big);
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) lines = NULL;
    g_autoptr(JsonNode) n1 = NULL;
    g_autoptr(JsonNode) n2 = NULL;
    JsonObject *o1, *o2;

    assert_true(g_subprocess_communicate_utf8(proc, input, NULL, &out, &err, &error));
    assert_int_equal(g_subprocess_get_exit_status(proc), 0);
    lines = g_strsplit(out, "\n", -1);
    /* Two replies and the empty string after the last newline. */
    assert_int_equal(g_strv_length(lines), 3);
    /* carreld's refusal becomes a JSON-RPC error for the request's id. */
    o1 = line_object(lines[0], &n1);
    assert_string_equal(json_object_get_string_member(o1, "id"), "a");
    assert_int_equal(json_object_get_int_member(json_object_get_object_member(o1, "error"), "code"),
                     -32000);
    assert_non_null(
        strstr(json_object_get_string_member(json_object_get_object_member(o1, "error"), "message"),
               "unauthorized"));
    /* The line over 1 MiB is refused without reaching carreld. */
    o2 = line_object(lines[1], &n2);
    assert_true(JSON_NODE_HOLDS_NULL(json_object_get_member(o2, "id")));
    assert_int_equal(json_object_get_int_member(json_object_get_object_member(o2, "error"), "code"),
                     -32600);
    assert_non_null(strstr(err, "1 MiB"));
    assert_null(strstr(err, "not-the-token"));
}

/* Last: carreld stops cleanly (a sanitizer build fails here on leaks) and never logged the token.
 */
static void
test_clean_exit(void **state)
{
    g_autofree char *log_path = g_build_filename(fx.dir, "carreld.log", NULL);
    g_autofree char *log = NULL;

    g_subprocess_send_signal(fx.daemon, SIGTERM);
    assert_true(g_subprocess_wait(fx.daemon, NULL, NULL));
    assert_true(g_subprocess_get_if_exited(fx.daemon));
    assert_int_equal(g_subprocess_get_exit_status(fx.daemon), 0);
    assert_true(g_file_get_contents(log_path, &log, NULL, NULL));
    assert_non_null(strstr(log, "mcp tool 'sandbox_create'"));
    assert_null(strstr(log, fx.token));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auth_and_origin), cmocka_unit_test(test_initialize_and_notifications),
        cmocka_unit_test(test_jsonrpc_errors),  cmocka_unit_test(test_tools_list),
        cmocka_unit_test(test_sandbox_tools),   cmocka_unit_test(test_stdio_bridge),
        cmocka_unit_test(test_stdio_refusals),  cmocka_unit_test(test_clean_exit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
