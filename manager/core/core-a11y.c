/*
 * The accessibility tree of a session's desktop through carrel-guest a11y
 * (guest-tools/guest-a11y.c, AT-SPI over D-Bus as the desktop user), and the two halves of a
 * click_element action: an element's current bounds, and its default action. Everything the
 * guest prints is untrusted: bounded, parsed and re-made by conf's carrel_a11y_* checks.
 */
#include <string.h>

#include "core/core-priv.h"

/* carrel-guest's own deadline is 20 s (then its watchdog); the agent's comes after it. */
#define A11Y_TIMEOUT_S 40

/* Runs carrel-guest a11y WORD ARGS... and returns its JSON object (exit 0 only). */
static JsonNode *
a11y_exec(CarrelManager *mgr, const char *domain, const char *const *args, GError **error)
{
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    g_auto(GStrv) argv = NULL;
    CarrelGuestExec run = {.timeout_s = A11Y_TIMEOUT_S, .max_output = CARREL_A11Y_MAX_OUTPUT_BYTES};
    g_auto(CarrelExecResult) result = {0};
    g_autoptr(JsonNode) reply = NULL;
    gsize len = 0;
    const char *data;

    g_strv_builder_addv(b, (const char *[]){CARREL_GUEST_TOOL_PATH, "a11y", NULL});
    g_strv_builder_addv(b, (const char **)args);
    argv = g_strv_builder_end(b);
    run.argv = (const char *const *)argv;
    if (!carrel_hypervisor_agent_exec(mgr->hv, domain, &run, &result, error))
        return NULL;
    if (result.exit_code == 127) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "this guest has no carrel-guest for the accessibility tree");
        return NULL;
    }
    if (result.truncated) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "carrel-guest a11y %s printed more than %d bytes", args[0],
                    CARREL_A11Y_MAX_OUTPUT_BYTES);
        return NULL;
    }
    data = g_bytes_get_data(result.stdout_bytes, &len);
    if (!(reply = carrel_a11y_reply_parse(data, len, error))) {
        g_prefix_error(error, "(exit %d%s) ", result.exit_code,
                       result.timed_out ? ", timed out" : "");
        return NULL;
    }
    if (result.exit_code != 0) {
        g_autofree char *what = g_strconcat("a11y ", args[0], NULL);

        carrel_manager_guest_error(reply, what, error);
        return NULL;
    }
    return g_steal_pointer(&reply);
}

JsonNode *
carrel_manager_a11y_element(CarrelManager *mgr, const char *domain, const char *id, GError **error)
{
    g_autoptr(JsonNode) reply = NULL;

    if (!carrel_a11y_check_id(id, error) ||
        !(reply = a11y_exec(mgr, domain, (const char *[]){"node", "--", id, NULL}, error)))
        return NULL;
    return carrel_a11y_node_from_guest(reply, id, error);
}

JsonNode *
carrel_manager_a11y_act(CarrelManager *mgr, const char *domain, const char *id, GError **error)
{
    g_autoptr(JsonNode) reply = NULL;
    JsonObject *o;
    JsonNode *out;
    const char *name;

    if (!carrel_a11y_check_id(id, error) ||
        !(reply = a11y_exec(mgr, domain, (const char *[]){"action", "--", id, NULL}, error)))
        return NULL;
    o = json_node_get_object(reply);
    name = json_object_get_string_member_with_default(o, "action", "");
    out = carrel_conf_new_object_node();
    json_object_set_string_member(json_node_get_object(out), "element", id);
    if (carrel_util_is_clean_text(name) && strlen(name) <= CARREL_A11Y_MAX_ROLE_CHARS)
        json_object_set_string_member(json_node_get_object(out), "action", name);
    json_object_set_boolean_member(json_node_get_object(out), "done",
                                   json_object_get_boolean_member_with_default(o, "done", FALSE));
    return out;
}

static JsonNode *
tree(CarrelManager *mgr, const char *domain, const CarrelA11yRequest *req, GError **error)
{
    g_autofree char *depth = g_strdup_printf("%u", req->depth);
    g_autofree char *nodes = g_strdup_printf("%u", req->max_nodes);
    /* One argument "--app=NAME": a name that looks like an option stays the option's value. */
    g_autofree char *app = req->app ? g_strconcat("--app=", req->app, NULL) : NULL;
    const char *args[] = {"tree",    "--window", req->desktop ? "all" : "focused",
                          "--depth", depth,      "--max-nodes",
                          nodes,     app,        NULL};
    g_autoptr(JsonNode) reply = a11y_exec(mgr, domain, args, error);
    guint w = 0, h = 0;

    if (!reply)
        return NULL;
    /* Bounds in the model's space need the screen's size now (as a batch measures it). */
    if (req->model_width && !carrel_hypervisor_screenshot(mgr->hv, domain, NULL, &w, &h, error))
        return NULL;
    return carrel_a11y_tree_from_guest(reply, req, w, h, error);
}

/* What the audit record keeps of a tree: its size, not its text. */
static JsonNode *
tree_summary(JsonNode *result)
{
    JsonObject *o = json_node_get_object(result);
    JsonNode *node = carrel_conf_new_object_node();
    JsonObject *out = json_node_get_object(node);

    json_object_set_string_member(out, "scope", json_object_get_string_member(o, "scope"));
    json_object_set_int_member(out, "count", json_object_get_int_member(o, "count"));
    json_object_set_boolean_member(out, "truncated",
                                   json_object_get_boolean_member(o, "truncated"));
    return node;
}

static JsonNode *
accessibility(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
              const CarrelA11yRequest *req, GError **error)
{
    g_autoptr(CarrelSession) session = NULL;
    g_autofree char *domain = NULL;
    g_autoptr(JsonNode) params = carrel_a11y_request_to_json(req);
    g_autoptr(JsonNode) result = NULL;
    g_autoptr(JsonNode) summary = NULL;
    g_autoptr(GError) local = NULL;
    gint64 started = g_get_monotonic_time();

    if (!(session = carrel_manager_running_session(
              mgr, id_or_name, "read the accessibility tree of", &domain, error)))
        return NULL;
    result = tree(mgr, domain, req, &local);
    summary = result ? tree_summary(result) : NULL;
    if (!carrel_manager_record_outcome(mgr, session->id, who, "action", "accessibility", params,
                                       summary, &local, started, NULL, result != NULL)) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "session '%s': ", session->id);
        return NULL;
    }
    return g_steal_pointer(&result);
}

JsonNode *
carrel_manager_session_accessibility(CarrelManager *mgr, const CarrelPrincipal *who,
                                     const char *id_or_name, const CarrelA11yRequest *req,
                                     GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_SCREENSHOT, id_or_name,
                           carrel_a11y_request_to_json(req), error))
        return NULL;
    return carrel_door_finish(&door, accessibility(mgr, who, door.session_id, req, &local), &local,
                              error);
}
