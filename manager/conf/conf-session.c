#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

CarrelSession *
carrel_session_new(void)
{
    return g_new0(CarrelSession, 1);
}

void
carrel_session_free(CarrelSession *session)
{
    if (!session)
        return;
    g_free(session->id);
    g_free(session->name);
    g_free(session->template_name);
    g_free(session->state_reason);
    g_free(session->dir);
    g_free(session->overlay_path);
    g_strfreev(session->exit_paths);
    g_free(session->head_snapshot);
    g_free(session->origin_session);
    g_free(session->expiry_action);
    g_free(session->mac);
    g_free(session->pool);
    g_free(session->owner_id);
    g_free(session->owner_label);
    g_free(session->policy);
    g_free(session->egress_ip);
    g_free(session->memory_file);
    if (session->timings)
        json_node_unref(session->timings);
    g_free(session);
}

char *
carrel_session_domain_name(const char *session_id)
{
    return g_strconcat("carrel-", session_id, NULL);
}

JsonNode *
carrel_session_to_json(const CarrelSession *session)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *created = carrel_util_format_time(session->created_at);
    g_autofree char *updated = carrel_util_format_time(session->updated_at);
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autofree char *screen =
        carrel_screen_size_format(session->screen_width, session->screen_height);

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "id");
    json_builder_add_string_value(b, session->id);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, session->name);
    json_builder_set_member_name(b, "template");
    json_builder_add_string_value(b, session->template_name);
    json_builder_set_member_name(b, "template_version");
    json_builder_add_int_value(b, session->template_version);
    json_builder_set_member_name(b, "state");
    json_builder_add_string_value(b, carrel_session_state_to_string(session->state));
    carrel_conf_add_optional_string(b, "state_reason", session->state_reason);
    json_builder_set_member_name(b, "vcpus");
    json_builder_add_int_value(b, session->vcpus);
    json_builder_set_member_name(b, "memory_mib");
    json_builder_add_int_value(b, session->memory_mib);
    json_builder_set_member_name(b, "screen");
    if (session->screen_width)
        json_builder_add_string_value(b, screen);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "origin");
    json_builder_add_string_value(b, session->from_warm ? "warm" : "cold");
    carrel_conf_add_optional_string(b, "mac", session->mac);
    json_builder_set_member_name(b, "domain");
    json_builder_add_string_value(b, domain);
    json_builder_set_member_name(b, "from_pool");
    json_builder_add_boolean_value(b, session->from_pool);
    carrel_conf_add_optional_string(b, "head_snapshot", session->head_snapshot);
    carrel_conf_add_optional_string(b, "forked_from", session->origin_session);
    carrel_conf_add_optional_string(b, "owner", session->owner_label);
    carrel_conf_add_optional_string(b, "owner_id", session->owner_id);
    carrel_conf_add_optional_string(b, "policy", session->policy);
    carrel_conf_add_optional_string(b, "address", session->egress_ip);
    if (session->expires_at) {
        g_autofree char *expires = carrel_util_format_time(session->expires_at);
        carrel_conf_add_optional_string(b, "expires_at", expires);
    }
    json_builder_set_member_name(b, "idle_timeout_s");
    json_builder_add_int_value(b, session->idle_timeout_s);
    carrel_conf_add_optional_string(b, "on_expiry", session->expiry_action);
    json_builder_set_member_name(b, "exit_artifacts");
    json_builder_begin_array(b);
    for (guint i = 0; session->exit_paths && session->exit_paths[i]; i++)
        json_builder_add_string_value(b, session->exit_paths[i]);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "created_at");
    json_builder_add_string_value(b, created);
    json_builder_set_member_name(b, "updated_at");
    json_builder_add_string_value(b, updated);
    if (session->timings) {
        json_builder_set_member_name(b, "timings");
        json_builder_add_value(b, json_node_copy(session->timings));
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

void
carrel_session_request_free(CarrelSessionRequest *req)
{
    if (!req)
        return;
    g_free(req->template_name);
    g_free(req->name);
    g_free(req->policy);
    g_strfreev(req->exit_paths);
    g_free(req->expiry_action);
    if (req->inputs)
        g_ptr_array_unref(req->inputs);
    g_free(req);
}

void
carrel_input_free(CarrelInput *input)
{
    if (!input)
        return;
    g_free(input->path);
    g_free(input->upload);
    g_free(input->host_path);
    if (input->content)
        g_bytes_unref(input->content);
    g_free(input);
}

static gboolean
get_input_mode(JsonObject *obj, CarrelInput *input, GError **error)
{
    g_autofree char *mode = NULL;
    char *end = NULL;
    guint64 value;

    input->mode = 0644;
    if (!carrel_conf_get_string(obj, "mode", FALSE, &mode, error) || !mode)
        return TRUE;
    value = g_ascii_strtoull(mode, &end, 8);
    if (!*mode || *end || value > 0777) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "input mode must be octal permission bits such as \"0644\"");
        return FALSE;
    }
    input->mode = (guint32)value;
    return TRUE;
}

/* {path, content_base64 | upload | host_path, mode?}: exactly one source. */
static CarrelInput *
input_from_json(JsonNode *node, GError **error)
{
    static const char *const allowed[] = {"path",      "content_base64", "upload",
                                          "host_path", "mode",           NULL};
    g_autoptr(CarrelInput) input = g_new0(CarrelInput, 1);
    g_autofree char *b64 = NULL;
    JsonObject *obj;
    guint sources;

    if (!JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "an input must be an object");
        return NULL;
    }
    obj = json_node_get_object(node);
    if (!carrel_conf_check_members(obj, allowed, error) ||
        !carrel_conf_get_string(obj, "path", TRUE, &input->path, error) ||
        !carrel_util_check_guest_path(input->path, error) ||
        !carrel_conf_get_string(obj, "content_base64", FALSE, &b64, error) ||
        !carrel_conf_get_string(obj, "upload", FALSE, &input->upload, error) ||
        !carrel_conf_get_string(obj, "host_path", FALSE, &input->host_path, error) ||
        !get_input_mode(obj, input, error))
        return NULL;
    sources = (b64 != NULL) + (input->upload != NULL) + (input->host_path != NULL);
    if (sources != 1) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "input '%s' needs exactly one of content_base64, upload, host_path",
                    input->path);
        return NULL;
    }
    if (b64) {
        gsize len = 0;
        guchar *data;
        if (!carrel_util_is_base64(b64, strlen(b64))) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "input '%s': content_base64 is not valid base64", input->path);
            return NULL;
        }
        data = g_base64_decode(b64, &len);
        input->content = g_bytes_new_take(data, len);
    }
    if (input->upload && !g_str_has_prefix(input->upload, "u-")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "input '%s': upload must be an id from POST /v1/uploads", input->path);
        return NULL;
    }
    if (input->host_path && !g_path_is_absolute(input->host_path)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "input '%s': host_path must be absolute", input->path);
        return NULL;
    }
    return g_steal_pointer(&input);
}

static gboolean
get_inputs(JsonObject *obj, GPtrArray **ret_inputs, GError **error)
{
    JsonNode *node = carrel_conf_get_node(obj, "inputs");
    g_autoptr(GPtrArray) inputs = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_input_free);
    JsonArray *array;

    if (!node)
        return TRUE;
    if (!JSON_NODE_HOLDS_ARRAY(node) ||
        json_array_get_length(array = json_node_get_array(node)) > CARREL_LIMIT_INPUTS) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'inputs' must be an array of at most %u items", CARREL_LIMIT_INPUTS);
        return FALSE;
    }
    for (guint i = 0; i < json_array_get_length(array); i++) {
        CarrelInput *input = input_from_json(json_array_get_element(array, i), error);
        if (!input)
            return FALSE;
        g_ptr_array_add(inputs, input);
    }
    *ret_inputs = g_steal_pointer(&inputs);
    return TRUE;
}

CarrelSessionRequest *
carrel_session_request_from_json(JsonNode *node, GError **error)
{
    static const char *const allowed[] = {
        "template", "name",  "policy",         "vcpus",     "memory_mib", "cold", "artifacts",
        "inputs",   "ttl_s", "idle_timeout_s", "on_expiry", "screen",     NULL};
    g_autoptr(CarrelSessionRequest) req = g_new0(CarrelSessionRequest, 1);
    const char *ref = NULL;
    JsonObject *obj;

    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "expected a JSON object");
        return NULL;
    }
    obj = json_node_get_object(node);
    if (!carrel_conf_check_members(obj, allowed, error) ||
        !carrel_conf_get_string_ref(obj, "template", TRUE, &ref, error) ||
        !carrel_conf_get_string(obj, "name", FALSE, &req->name, error) ||
        !carrel_conf_get_string(obj, "policy", FALSE, &req->policy, error) ||
        !carrel_conf_get_uint(obj, "vcpus", 1, CARREL_LIMIT_VCPUS, &req->vcpus, error) ||
        !carrel_conf_get_uint(obj, "memory_mib", CARREL_LIMIT_MIN_MEMORY_MIB,
                              CARREL_LIMIT_MEMORY_MIB, &req->memory_mib, error) ||
        !carrel_conf_get_screen(obj, "screen", &req->screen_width, &req->screen_height, error) ||
        !carrel_conf_get_bool(obj, "cold", &req->cold, error) ||
        !carrel_conf_get_string_array(obj, "artifacts", CARREL_LIMIT_EXTRACT_PATHS,
                                      &req->exit_paths, error) ||
        (req->exit_paths && !carrel_extract_check_paths(req->exit_paths, error)) ||
        !get_inputs(obj, &req->inputs, error) ||
        !carrel_conf_get_uint(obj, "ttl_s", 1, CARREL_LIMIT_TTL_S, &req->ttl_s, error) ||
        !carrel_conf_get_uint(obj, "idle_timeout_s", 1, CARREL_LIMIT_TTL_S, &req->idle_timeout_s,
                              error) ||
        !carrel_conf_get_string(obj, "on_expiry", FALSE, &req->expiry_action, error))
        return NULL;
    if (req->expiry_action && !carrel_expiry_action_is_valid(req->expiry_action)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'on_expiry' must be destroy, stop, hibernate or pause");
        return NULL;
    }
    if (!carrel_template_ref_parse(ref, &req->template_name, &req->template_version, error))
        return NULL;
    if (req->policy && !carrel_util_is_valid_name(req->policy)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "invalid policy name: use 1-63 of [a-z0-9._-] (carrel policy ls)");
        return NULL;
    }
    /* Names share the id namespace for lookups, so an id-shaped name would be ambiguous. */
    if (req->name && (!carrel_util_is_valid_name(req->name) || g_str_has_prefix(req->name, "s-"))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "invalid session name: use 1-63 of [a-z0-9._-], not starting with 's-'");
        return NULL;
    }
    return g_steal_pointer(&req);
}

CarrelSnapshot *
carrel_snapshot_new(void)
{
    return g_new0(CarrelSnapshot, 1);
}

void
carrel_snapshot_free(CarrelSnapshot *snap)
{
    if (!snap)
        return;
    g_free(snap->id);
    g_free(snap->session_id);
    g_free(snap->name);
    g_free(snap->parent);
    g_free(snap->layer_path);
    g_free(snap->memory_path);
    g_free(snap->memory_file);
    if (snap->timings)
        json_node_unref(snap->timings);
    g_free(snap);
}

JsonNode *
carrel_snapshot_to_json(const CarrelSnapshot *snap)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *created = carrel_util_format_time(snap->created_at);

    json_builder_begin_object(b);
    carrel_conf_add_optional_string(b, "id", snap->id);
    carrel_conf_add_optional_string(b, "name", snap->name);
    carrel_conf_add_optional_string(b, "parent", snap->parent);
    json_builder_set_member_name(b, "memory");
    json_builder_add_boolean_value(b, snap->memory_path != NULL);
    json_builder_set_member_name(b, "size_bytes");
    json_builder_add_int_value(b, (gint64)snap->size_bytes);
    carrel_conf_add_optional_string(b, "created_at", created);
    if (snap->timings) {
        json_builder_set_member_name(b, "timings");
        json_builder_add_value(b, json_node_copy(snap->timings));
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

gboolean
carrel_snapshot_check_name(const char *name, GError **error)
{
    if (name && carrel_util_is_valid_name(name))
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                "invalid snapshot name: use 1-63 of [a-z0-9._-], starting with a letter or digit");
    return FALSE;
}

gboolean
carrel_expiry_action_is_valid(const char *action)
{
    static const char *const actions[] = {"destroy", "stop", "hibernate", "pause", NULL};

    return action && g_strv_contains(actions, action);
}
