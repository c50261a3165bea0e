/* Desktop helper actions through carrel-guest in the guest (where the template has it), and the
 * guest's part of typing text the US keymap cannot (type --stdin, clipboard set --stdin). */
#include <string.h>

#include "core/core-priv.h"

#define HELPER_OUTPUT_MAX (256 * 1024)
#define HELPER_TIMEOUT_S 30
/* carrel-guest type gives up after its own 60 s (emptying the keycodes it remapped first): the
 * guest agent's deadline comes after it. 4096 bytes of distinct CJK take about 30 s. */
#define HELPER_TYPE_TIMEOUT_S 90

static GStrv
helper_argv(const CarrelAction *action, GError **error)
{
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    CarrelActionKind kind = action->kind;
    const char *what = kind == CARREL_ACTION_LAUNCH ? action->app : action->target;

    g_strv_builder_add(b, CARREL_GUEST_TOOL_PATH);
    if (kind == CARREL_ACTION_CLIPBOARD_GET) {
        g_strv_builder_addv(b, (const char *[]){"clipboard", "get", NULL});
    } else if (kind == CARREL_ACTION_CLIPBOARD_SET) {
        g_strv_builder_addv(b, (const char *[]){"clipboard", "set", "--stdin", NULL});
    } else if (kind == CARREL_ACTION_TYPE && action->method == CARREL_TYPE_METHOD_GUEST_KEYSYMS) {
        g_strv_builder_addv(b, (const char *[]){"type", "--stdin", NULL});
    } else if (kind == CARREL_ACTION_TYPE && action->method == CARREL_TYPE_METHOD_CLIPBOARD) {
        g_strv_builder_addv(b, (const char *[]){"clipboard", "set", "--stdin", NULL});
    } else if (kind == CARREL_ACTION_WINDOWS) {
        g_strv_builder_add(b, "windows");
    } else if (kind == CARREL_ACTION_LAUNCH || kind == CARREL_ACTION_OPEN) {
        /* carrel-guest would read a leading '-' as one of its options. */
        if (!what || what[0] == '-') {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "%s target must not start with '-'", carrel_action_kind_to_string(kind));
            return NULL;
        }
        g_strv_builder_add(b, kind == CARREL_ACTION_LAUNCH ? "launch" : "open");
        g_strv_builder_add(b, what);
        if (kind == CARREL_ACTION_LAUNCH && action->args)
            g_strv_builder_addv(b, (const char **)action->args);
    } else {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'%s' is not a desktop helper",
                    carrel_action_kind_to_string(kind));
        return NULL;
    }
    return g_strv_builder_end(b);
}

/* {"error": {"message": TEXT}} from the guest, checked at every level; "" otherwise. */
static const char *
error_message(JsonNode *reply)
{
    JsonNode *e = json_object_get_member(json_node_get_object(reply), "error");
    JsonNode *m = e && JSON_NODE_HOLDS_OBJECT(e)
                      ? json_object_get_member(json_node_get_object(e), "message")
                      : NULL;

    if (!m || !JSON_NODE_HOLDS_VALUE(m) || json_node_get_value_type(m) != G_TYPE_STRING)
        return "";
    return json_node_get_string(m);
}

JsonNode *
carrel_manager_run_helper(CarrelManager *mgr, const char *domain, const CarrelAction *action,
                          GError **error)
{
    g_auto(GStrv) argv = helper_argv(action, error);
    g_autoptr(GBytes) in = NULL;
    CarrelGuestExec run = {.timeout_s = HELPER_TIMEOUT_S, .max_output = HELPER_OUTPUT_MAX};
    g_auto(CarrelExecResult) result = {0};
    g_autoptr(JsonNode) reply = NULL;
    gsize len = 0;
    const char *data;

    if (!argv)
        return NULL;
    if (action->kind == CARREL_ACTION_CLIPBOARD_SET || action->kind == CARREL_ACTION_TYPE)
        in = g_bytes_new(action->text, strlen(action->text));
    if (action->kind == CARREL_ACTION_TYPE)
        run.timeout_s = HELPER_TYPE_TIMEOUT_S;
    run.argv = (const char *const *)argv;
    run.stdin_bytes = in;
    if (!carrel_hypervisor_agent_exec(mgr->hv, domain, &run, &result, error))
        return NULL;
    if (result.exit_code == 127) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "this guest has no carrel-guest for '%s'",
                    carrel_action_kind_to_string(action->kind));
        return NULL;
    }
    data = g_bytes_get_data(result.stdout_bytes, &len);
    reply = !result.truncated && len ? carrel_conf_parse_json(data, len, NULL) : NULL;
    if (!reply || !JSON_NODE_HOLDS_OBJECT(reply)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "carrel-guest %s gave no JSON object (exit %d%s)", argv[1], result.exit_code,
                    result.timed_out ? ", timed out" : "");
        return NULL;
    }
    if (result.exit_code != 0) {
        const char *msg = error_message(reply);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "carrel-guest %s failed: %s", argv[1],
                    carrel_util_is_clean_text(msg) ? msg : "(unprintable message)");
        return NULL;
    }
    return g_steal_pointer(&reply);
}

/* carrel-guest's error codes (guest-tools/README.md) and what carreld's callers decide on. */
static const struct {
    const char *name;
    CarrelErrorCode code;
} guest_codes[] = {
    {"not_found", CARREL_ERROR_NOT_FOUND},     {"invalid_argument", CARREL_ERROR_INVALID_ARG},
    {"wrong_state", CARREL_ERROR_WRONG_STATE}, {"not_empty", CARREL_ERROR_WRONG_STATE},
    {"exists", CARREL_ERROR_EXISTS},           {"forbidden", CARREL_ERROR_FORBIDDEN},
    {"limit_exceeded", CARREL_ERROR_LIMIT},    {"timeout", CARREL_ERROR_TIMEOUT},
};

/* A string member of o, or NULL when it is missing or anything but a string. */
static const char *
string_member(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
               ? json_node_get_string(n)
               : NULL;
}

void
carrel_manager_guest_error(JsonNode *reply, const char *what, GError **error)
{
    JsonNode *e = JSON_NODE_HOLDS_OBJECT(reply)
                      ? json_object_get_member(json_node_get_object(reply), "error")
                      : NULL;
    JsonObject *eo = e && JSON_NODE_HOLDS_OBJECT(e) ? json_node_get_object(e) : NULL;
    const char *name = string_member(eo, "code");
    const char *msg = string_member(eo, "message");
    CarrelErrorCode code = CARREL_ERROR_FAILED;

    for (guint i = 0; name && i < G_N_ELEMENTS(guest_codes); i++) {
        if (g_str_equal(name, guest_codes[i].name))
            code = guest_codes[i].code;
    }
    /* Guest output is untrusted: a message that is long or not clean text is not repeated. */
    if (!msg || !*msg)
        msg = "failed in the guest";
    else if (strlen(msg) > 512 || !carrel_util_is_clean_text(msg))
        msg = "(unprintable message)";
    g_set_error(error, CARREL_ERROR, code, "%s: %s", what, msg);
}
