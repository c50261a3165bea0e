#include "api/api-console-priv.h"

static CarrelApiReply *
get_healthz(CarrelApiRequest *req, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "status");
    json_builder_add_string_value(b, "ok");
    json_builder_end_object(b);
    return carrel_api_reply_ok(json_builder_get_root(b));
}

static CarrelApiReply *
get_version(CarrelApiRequest *req, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    CarrelHypervisor *hv = carrel_manager_get_hypervisor(req->mgr);
    g_autofree char *describe = carrel_hypervisor_describe(hv);

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "version");
    json_builder_add_string_value(b, req->version_info);
    json_builder_set_member_name(b, "accel");
    json_builder_add_string_value(b, carrel_accel_to_string(carrel_manager_get_accel(req->mgr)));
    json_builder_set_member_name(b, "accel_reason");
    json_builder_add_string_value(b, carrel_manager_get_accel_reason(req->mgr));
    json_builder_set_member_name(b, "libvirt_uri");
    json_builder_add_string_value(b, carrel_hypervisor_get_uri(hv));
    json_builder_set_member_name(b, "hypervisor");
    json_builder_add_string_value(b, describe);
    /* The key that signs evidence bundles: auditors pin it (carrel verify --key). */
    json_builder_set_member_name(b, "host_key");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "algorithm");
    json_builder_add_string_value(b, "ed25519");
    json_builder_set_member_name(b, "public_key");
    json_builder_add_string_value(b, carrel_manager_get_host_key(req->mgr));
    json_builder_set_member_name(b, "fingerprint");
    json_builder_add_string_value(b, carrel_manager_get_host_fingerprint(req->mgr));
    json_builder_end_object(b);
    json_builder_set_member_name(b, "web_url");
    if (req->api->web_url)
        json_builder_add_string_value(b, req->api->web_url);
    else
        json_builder_add_null_value(b);
    json_builder_end_object(b);
    return carrel_api_reply_ok(json_builder_get_root(b));
}

/* Templates. */

static JsonNode *
template_json(CarrelApiRequest *req, const CarrelTemplate *tmpl)
{
    guint used = carrel_manager_template_sessions(req->mgr, tmpl->name, tmpl->version);
    g_autoptr(CarrelWarmState) warm =
        carrel_manager_template_warm_state(req->mgr, tmpl->name, tmpl->version);
    JsonNode *node = carrel_template_to_json(tmpl, used);

    json_object_set_member(json_node_get_object(node), "warm",
                           warm ? carrel_warm_state_to_json(warm) : json_node_new(JSON_NODE_NULL));
    return node;
}

static JsonNode *
template_item(gpointer tmpl, gpointer req)
{
    return template_json(req, tmpl);
}

static CarrelApiReply *
get_templates(CarrelApiRequest *req, GError **error)
{
    g_autoptr(GPtrArray) all = carrel_manager_template_list(req->mgr, req->who, error);

    return all ? carrel_api_reply_ok(carrel_api_list_of("templates", all, template_item, req))
               : NULL;
}

static CarrelApiReply *
get_template(CarrelApiRequest *req, GError **error)
{
    g_autofree char *name = NULL;
    guint version;
    g_autoptr(CarrelTemplate) tmpl = NULL;
    g_autoptr(GPtrArray) all = NULL;
    g_autoptr(JsonArray) versions = json_array_new();
    JsonNode *node;

    if (!carrel_template_ref_parse(carrel_api_param(req, 0), &name, &version, error))
        return NULL;
    tmpl = carrel_manager_template_get(req->mgr, req->who, name, version, error);
    all = tmpl ? carrel_manager_template_list(req->mgr, req->who, error) : NULL;
    if (!all)
        return NULL;
    for (guint i = 0; i < all->len; i++) {
        CarrelTemplate *t = g_ptr_array_index(all, i);
        if (g_str_equal(t->name, name))
            json_array_add_element(versions, template_json(req, t));
    }
    node = template_json(req, tmpl);
    json_object_set_array_member(json_node_get_object(node), "versions",
                                 g_steal_pointer(&versions));
    return carrel_api_reply_ok(node);
}

static CarrelApiReply *
post_templates(CarrelApiRequest *req, GError **error)
{
    g_autoptr(CarrelTemplate) tmpl =
        carrel_manager_template_import(req->mgr, req->who, req->typed, error);

    if (!tmpl)
        return NULL;
    return carrel_api_reply_new_json(SOUP_STATUS_CREATED, template_json(req, tmpl));
}

static CarrelApiReply *
delete_template(CarrelApiRequest *req, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *name = NULL;
    g_auto(GStrv) refs = NULL;
    guint version = 0;

    if (!carrel_template_ref_parse(carrel_api_param(req, 0), &name, &version, error))
        return NULL;
    refs = carrel_manager_template_remove(req->mgr, req->who, name, version, error);
    if (!refs)
        return NULL;
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "deleted");
    json_builder_begin_array(b);
    for (guint i = 0; refs[i]; i++)
        json_builder_add_string_value(b, refs[i]);
    json_builder_end_array(b);
    json_builder_end_object(b);
    return carrel_api_reply_ok(json_builder_get_root(b));
}

static CarrelApiReply *
post_template_build(CarrelApiRequest *req, GError **error)
{
    g_autoptr(CarrelJob) job =
        carrel_manager_template_build(req->mgr, req->who, carrel_api_param(req, 0), error);

    if (!job)
        return NULL;
    return carrel_api_reply_new_json(SOUP_STATUS_ACCEPTED, carrel_job_to_json(job));
}

static CarrelApiReply *
post_template_warm(CarrelApiRequest *req, GError **error)
{
    const CarrelWarmRequest *body = req->typed;
    g_autoptr(CarrelJob) job = carrel_manager_template_warm(
        req->mgr, req->who, carrel_api_param(req, 0), body->version, error);

    if (!job)
        return NULL;
    return carrel_api_reply_new_json(SOUP_STATUS_ACCEPTED, carrel_job_to_json(job));
}

static CarrelApiReply *
put_template_pool(CarrelApiRequest *req, GError **error)
{
    const CarrelPoolRequest *body = req->typed;

    if (!carrel_manager_pool_set(req->mgr, req->who, carrel_api_param(req, 0), body->size, error))
        return NULL;
    return carrel_api_reply_ok(carrel_manager_pool_list(req->mgr, req->who, error));
}

static CarrelApiReply *
get_pools(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_ok(carrel_manager_pool_list(req->mgr, req->who, error));
}

static CarrelApiReply *
get_policies(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_ok(carrel_manager_policy_list(req->mgr, req->who, error));
}

static CarrelApiReply *
get_policy(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_ok(
        carrel_manager_policy_show(req->mgr, req->who, carrel_api_param(req, 0), error));
}

static CarrelApiReply *
get_job(CarrelApiRequest *req, GError **error)
{
    g_autoptr(CarrelJob) job =
        carrel_manager_job_get(req->mgr, req->who, carrel_api_param(req, 0), error);

    return job ? carrel_api_reply_ok(carrel_job_to_json(job)) : NULL;
}

/* Sessions. */

/* A session (taken) as the reply, with status; NULL when session is (its call set the error). */
static CarrelApiReply *
session_reply_in(CarrelApiRequest *req, guint status, CarrelSession *session)
{
    g_autoptr(CarrelSession) owned = session;

    return owned ? carrel_api_reply_new_json(status,
                                             carrel_api_session_json(req->mgr, req->who, owned))
                 : NULL;
}

#define session_reply(s) session_reply_in(req, SOUP_STATUS_OK, (s))

/* The list's text as carrel_api_list_of makes it, for whom core says may see it. */
static GBytes *
session_list_text(CarrelApiRequest *req, gboolean all, GError **error)
{
    g_autoptr(GPtrArray) sessions = carrel_manager_session_list(req->mgr, req->who, all, error);
    g_autoptr(GHashTable) leases = sessions ? carrel_manager_leases(req->mgr) : NULL;
    CarrelApiView view = {req->mgr, req->who, leases};
    g_autoptr(JsonNode) list = NULL;

    if (!sessions)
        return NULL;
    list = carrel_api_list_of("sessions", sessions, carrel_api_session_item, &view);
    return carrel_api_json_text(list);
}

/*
 * The door is entered on every request; the text is made again only when the store changed
 * since it was made for the caller's scope (api-cache.c), so a list is never older than the
 * store and never another scope's.
 */
static CarrelApiReply *
get_sessions(CarrelApiRequest *req, GError **error)
{
    const char *all_flag = carrel_api_query(req, "all");
    gboolean all = all_flag && (g_str_equal(all_flag, "1") || g_str_equal(all_flag, "true"));
    g_autofree char *scope = NULL;
    g_autofree char *key = NULL;
    guint64 generation = 0;
    GBytes *text;

    if (!carrel_manager_session_list_scope(req->mgr, req->who, &scope, &generation, error))
        return NULL;
    key = g_strconcat(scope, all ? " all" : " live", NULL);
    text = carrel_api_cache_get(req->api->lists, key, generation);
    if (!text) {
        text = session_list_text(req, all, error);
        if (!text)
            return NULL;
        carrel_api_cache_put(req->api->lists, key, generation, text);
    }
    return carrel_api_reply_new_bytes(SOUP_STATUS_OK, text, "application/json");
}

static CarrelApiReply *
post_sessions(CarrelApiRequest *req, GError **error)
{
    return session_reply_in(req, SOUP_STATUS_CREATED,
                            carrel_manager_session_create(req->mgr, req->who, req->typed, error));
}

static CarrelApiReply *
get_session(CarrelApiRequest *req, GError **error)
{
    return session_reply(
        carrel_manager_session_get(req->mgr, req->who, carrel_api_param(req, 0), error));
}

static CarrelApiReply *
delete_session(CarrelApiRequest *req, GError **error)
{
    return session_reply(
        carrel_manager_session_destroy(req->mgr, req->who, carrel_api_param(req, 0), error));
}

static CarrelApiReply *
post_session_start(CarrelApiRequest *req, GError **error)
{
    return session_reply(
        carrel_manager_session_start(req->mgr, req->who, carrel_api_param(req, 0), error));
}

static CarrelApiReply *
post_session_pause(CarrelApiRequest *req, GError **error)
{
    return session_reply(
        carrel_manager_session_pause(req->mgr, req->who, carrel_api_param(req, 0), error));
}

static CarrelApiReply *
post_session_resume(CarrelApiRequest *req, GError **error)
{
    return session_reply(
        carrel_manager_session_resume(req->mgr, req->who, carrel_api_param(req, 0), error));
}

static CarrelApiReply *
post_session_snapshots(CarrelApiRequest *req, GError **error)
{
    const CarrelSnapshotRequest *body = req->typed;
    g_autoptr(CarrelSnapshot) snap = carrel_manager_snapshot_create(
        req->mgr, req->who, carrel_api_param(req, 0), body->name, error);

    if (!snap)
        return NULL;
    return carrel_api_reply_new_json(SOUP_STATUS_CREATED, carrel_snapshot_to_json(snap));
}

static CarrelApiReply *
get_session_snapshots(CarrelApiRequest *req, GError **error)
{
    g_autoptr(GPtrArray) list =
        carrel_manager_snapshot_list(req->mgr, req->who, carrel_api_param(req, 0), error);

    return list ? carrel_api_reply_ok(
                      carrel_api_list_of("snapshots", list, carrel_api_snapshot_item, NULL))
                : NULL;
}

static CarrelApiReply *
delete_session_snapshot(CarrelApiRequest *req, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    gboolean kept = FALSE;

    if (!carrel_manager_snapshot_delete(req->mgr, req->who, carrel_api_param(req, 0),
                                        carrel_api_param(req, 1), &kept, error))
        return NULL;
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "deleted");
    json_builder_add_string_value(b, carrel_api_param(req, 1));
    json_builder_set_member_name(b, "layer_kept");
    json_builder_add_boolean_value(b, kept);
    json_builder_end_object(b);
    return carrel_api_reply_ok(json_builder_get_root(b));
}

static CarrelApiReply *
post_session_revert(CarrelApiRequest *req, GError **error)
{
    const CarrelSnapshotRequest *body = req->typed;

    return session_reply(carrel_manager_snapshot_revert(
        req->mgr, req->who, carrel_api_param(req, 0), body->name, error));
}

static CarrelApiReply *
post_session_fork(CarrelApiRequest *req, GError **error)
{
    const CarrelForkRequest *body = req->typed;
    g_autoptr(GPtrArray) forks = carrel_manager_session_fork(
        req->mgr, req->who, carrel_api_param(req, 0), body->snapshot, body->count, error);
    CarrelApiView view = {req->mgr, req->who};

    if (!forks)
        return NULL;
    return carrel_api_reply_new_json(
        SOUP_STATUS_CREATED, carrel_api_list_of("sessions", forks, carrel_api_session_item, &view));
}

static CarrelApiReply *
post_session_hibernate(CarrelApiRequest *req, GError **error)
{
    return session_reply(
        carrel_manager_session_hibernate(req->mgr, req->who, carrel_api_param(req, 0), error));
}

static CarrelApiReply *
post_session_stop(CarrelApiRequest *req, GError **error)
{
    const CarrelStopRequest *body = req->typed;

    return session_reply(carrel_manager_session_stop(req->mgr, req->who, carrel_api_param(req, 0),
                                                     body->timeout_s, error));
}

static CarrelApiReply *
post_session_exec(CarrelApiRequest *req, GError **error)
{
    const CarrelExecRequest *body = req->typed;
    CarrelExecResult result = {0};
    JsonNode *node;

    if (body->stream || body->background)
        return carrel_api_post_exec_detached(req, error);
    if (!carrel_manager_session_exec(req->mgr, req->who, carrel_api_param(req, 0), req->typed,
                                     &result, error))
        return NULL;
    node = carrel_exec_result_to_json(&result);
    carrel_exec_result_clear(&result);
    return carrel_api_reply_ok(node);
}

/* An optional non-negative integer query parameter, at most max. */
static gboolean
query_uint(CarrelApiRequest *req, const char *key, guint64 max, guint64 *value, GError **error)
{
    const char *text = carrel_api_query(req, key);

    if (!text)
        return TRUE;
    if (!g_ascii_string_to_unsigned(text, 10, 0, max, value, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "query parameter '%s' must be an integer from 0 to %" G_GUINT64_FORMAT, key,
                    max);
        return FALSE;
    }
    return TRUE;
}

static CarrelApiReply *
get_session_events(CarrelApiRequest *req, GError **error)
{
    guint64 after = 0, limit = 200;
    g_autoptr(GPtrArray) events = NULL;

    if (!query_uint(req, "after", G_MAXINT64, &after, error) ||
        !query_uint(req, "limit", G_MAXUINT, &limit, error) ||
        !(events = carrel_manager_session_events(req->mgr, req->who, carrel_api_param(req, 0),
                                                 (gint64)after, (guint)limit, error)))
        return NULL;
    return carrel_api_reply_ok(carrel_api_list_of("events", events, carrel_api_event_item, NULL));
}

static JsonNode *
egress_item(gpointer record, gpointer unused)
{
    return carrel_egress_record_to_json(record);
}

static CarrelApiReply *
get_session_egress(CarrelApiRequest *req, GError **error)
{
    guint64 after = 0, limit = 1000;
    g_autoptr(GPtrArray) records = NULL;

    if (!query_uint(req, "after", G_MAXINT64, &after, error) ||
        !query_uint(req, "limit", G_MAXUINT, &limit, error) ||
        !(records = carrel_manager_session_egress(req->mgr, req->who, carrel_api_param(req, 0),
                                                  (gint64)after, (guint)limit, error)))
        return NULL;
    return carrel_api_reply_ok(carrel_api_list_of("egress", records, egress_item, NULL));
}

static CarrelApiReply *
get_session_screenshot(CarrelApiRequest *req, GError **error)
{
    CarrelScreenshotRequest shot;

    if (!carrel_screenshot_request_parse(req->query, &shot, error))
        return NULL;
    return carrel_api_reply_new_bytes(SOUP_STATUS_OK,
                                      carrel_manager_session_screenshot(req->mgr, req->who,
                                                                        carrel_api_param(req, 0),
                                                                        &shot, error),
                                      shot.jpeg ? "image/jpeg" : "image/png");
}

static CarrelApiReply *
get_session_accessibility(CarrelApiRequest *req, GError **error)
{
    CarrelA11yRequest a11y;

    if (!carrel_a11y_request_parse(req->query, &a11y, error))
        return NULL;
    return carrel_api_reply_ok(carrel_manager_session_accessibility(
        req->mgr, req->who, carrel_api_param(req, 0), &a11y, error));
}

/* Artifacts and inputs. */

static CarrelApiReply *
post_upload(CarrelApiRequest *req, GError **error)
{
    g_autofree char *id =
        carrel_manager_upload_file(req->mgr, req->who, req->upload_path, req->upload_bytes, error);
    g_autoptr(JsonBuilder) b = json_builder_new();

    if (!id)
        return NULL;
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "id");
    json_builder_add_string_value(b, id);
    json_builder_set_member_name(b, "bytes");
    json_builder_add_int_value(b, (gint64)req->upload_bytes);
    json_builder_end_object(b);
    return carrel_api_reply_new_json(SOUP_STATUS_CREATED, json_builder_get_root(b));
}

static CarrelApiReply *
post_session_artifacts(CarrelApiRequest *req, GError **error)
{
    g_autoptr(CarrelExtraction) x = carrel_manager_session_extract(
        req->mgr, req->who, carrel_api_param(req, 0), req->typed, error);

    if (!x)
        return NULL;
    return carrel_api_reply_new_json(SOUP_STATUS_CREATED, carrel_extraction_to_json(x));
}

static JsonNode *
extraction_item(gpointer extraction, gpointer unused)
{
    return carrel_extraction_to_json(extraction);
}

static CarrelApiReply *
get_session_artifacts(CarrelApiRequest *req, GError **error)
{
    g_autoptr(GPtrArray) list =
        carrel_manager_session_extractions(req->mgr, req->who, carrel_api_param(req, 0), error);

    return list
               ? carrel_api_reply_ok(carrel_api_list_of("extractions", list, extraction_item, NULL))
               : NULL;
}

static CarrelApiReply *
get_session_diff(CarrelApiRequest *req, GError **error)
{
    g_autoptr(GPtrArray) entries = carrel_manager_session_diff(
        req->mgr, req->who, carrel_api_param(req, 0), carrel_api_query(req, "path"), error);

    return entries ? carrel_api_reply_ok(carrel_diff_to_json(entries)) : NULL;
}

static CarrelApiReply *
get_artifact(CarrelApiRequest *req, GError **error)
{
    g_autofree char *host_path = NULL;
    g_autoptr(CarrelArtifact) a = carrel_manager_artifact_get(
        req->mgr, req->who, carrel_api_param(req, 0), &host_path, error);
    g_autofree char *name = NULL;
    CarrelApiReply *reply;

    if (!a)
        return NULL;
    if (!host_path) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "artifact '%s' (%s, %s) has no content to download%s%s", a->id, a->guest_path,
                    carrel_file_type_to_string(a->type), a->skipped ? ": " : "",
                    a->skipped ? a->skipped : "");
        return NULL;
    }
    /* Sent from disk chunk by chunk: artifacts may be large. */
    reply = carrel_api_reply_new_file(SOUP_STATUS_OK, host_path, "application/octet-stream", error);
    if (!reply)
        return NULL;
    name = g_path_get_basename(a->guest_path);
    carrel_api_reply_set_attachment(reply, name);
    if (a->sha256)
        carrel_api_reply_add_header(reply, "X-Carrel-Sha256", a->sha256);
    return reply;
}

static CarrelApiReply *
post_session_computer(CarrelApiRequest *req, GError **error)
{
    if (!req->body) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "computer needs a JSON body: one action or {\"actions\": [...]}");
        return NULL;
    }
    return carrel_api_reply_ok(carrel_manager_session_computer(
        req->mgr, req->who, carrel_api_param(req, 0), req->body, error));
}

const CarrelApiRoute carrel_api_routes[] = {
    /* Answered on the main loop: health never waits for a thread. */
    {"GET", "/v1/healthz", get_healthz, CARREL_OP_LAST, CARREL_API_ROUTE_PUBLIC, NULL,
     CARREL_API_CLASS_INLINE},
    {"POST", "/v1/login", carrel_api_post_login, CARREL_OP_AUTH_LOGIN, CARREL_API_ROUTE_PUBLIC,
     CARREL_API_BODY(carrel_login_request)},
    {"POST", "/v1/logout", carrel_api_post_logout, CARREL_OP_LAST, 0, NULL},
    {"GET", "/v1/whoami", carrel_api_get_whoami, CARREL_OP_LAST, 0, NULL},
    {"GET", "/v1/openapi.json", carrel_api_get_openapi, CARREL_OP_LAST, 0, NULL},
    {"GET", "/v1/roles", carrel_api_get_roles, CARREL_OP_SERVER_READ, 0, NULL},
    {"GET", "/v1/tokens", carrel_api_get_tokens, CARREL_OP_TOKEN_LIST, 0, NULL},
    {"POST", "/v1/tokens", carrel_api_post_tokens, CARREL_OP_TOKEN_CREATE, 0,
     CARREL_API_BODY(carrel_token_request)},
    {"POST", "/v1/tokens/admin/rotate", carrel_api_post_admin_rotate, CARREL_OP_TOKEN_ROTATE, 0,
     NULL},
    {"DELETE", "/v1/tokens/*", carrel_api_delete_token, CARREL_OP_TOKEN_REVOKE, 0, NULL},
    {"GET", "/v1/audit", carrel_api_get_audit, CARREL_OP_AUDIT_READ, 0, NULL},
    {"GET", "/v1/audit/verify", carrel_api_get_audit_verify, CARREL_OP_AUDIT_READ, 0, NULL},
    {"GET", "/v1/stream", carrel_api_get_stream, CARREL_OP_SESSION_LIST, 0, NULL},
    {"GET", "/v1/approvals", carrel_api_get_approvals, CARREL_OP_APPROVAL_LIST, 0, NULL},
    {"POST", "/v1/approvals/*/approve", carrel_api_post_approval_approve, CARREL_OP_APPROVAL_DECIDE,
     0, CARREL_API_BODY(carrel_decision_request)},
    {"POST", "/v1/approvals/*/deny", carrel_api_post_approval_deny, CARREL_OP_APPROVAL_DECIDE, 0,
     CARREL_API_BODY(carrel_decision_request)},
    {"POST", "/v1/test/approvals", carrel_api_post_test_approval, CARREL_OP_APPROVAL_REQUEST,
     CARREL_API_ROUTE_TEST_HOOK, CARREL_API_BODY(carrel_approval_ask)},
    {"POST", "/v1/test/hold", carrel_api_post_test_hold, CARREL_OP_LAST, CARREL_API_ROUTE_TEST_HOOK,
     NULL, CARREL_API_CLASS_LONG},
    {"POST", "/v1/test/gate", carrel_api_post_test_gate, CARREL_OP_LAST, CARREL_API_ROUTE_TEST_HOOK,
     NULL, CARREL_API_CLASS_INLINE},
    {"GET", "/v1/sessions/*/control", carrel_api_get_control, CARREL_OP_SESSION_READ, 0, NULL},
    {"POST", "/v1/sessions/*/control", carrel_api_post_control, CARREL_OP_CONTROL_TAKE, 0,
     CARREL_API_BODY(carrel_control_request)},
    {"GET", "/v1/sessions/*/screenshots/*", carrel_api_get_session_shot, CARREL_OP_SESSION_READ, 0,
     NULL},
    {"GET", "/v1/version", get_version, CARREL_OP_SERVER_READ, 0, NULL},
    {"GET", "/metrics", carrel_api_get_metrics, CARREL_OP_METRICS_READ, 0, NULL},
    {"GET", "/v1/templates", get_templates, CARREL_OP_TEMPLATE_READ, 0, NULL},
    {"POST", "/v1/templates", post_templates, CARREL_OP_TEMPLATE_IMPORT, 0,
     CARREL_API_BODY(carrel_template_import)},
    {"GET", "/v1/templates/*", get_template, CARREL_OP_TEMPLATE_READ, 0, NULL},
    {"DELETE", "/v1/templates/*", delete_template, CARREL_OP_TEMPLATE_REMOVE, 0, NULL},
    {"POST", "/v1/templates/*/build", post_template_build, CARREL_OP_TEMPLATE_BUILD, 0, NULL},
    {"POST", "/v1/templates/*/warm", post_template_warm, CARREL_OP_TEMPLATE_WARM, 0,
     CARREL_API_BODY(carrel_warm_request)},
    {"PUT", "/v1/templates/*/pool", put_template_pool, CARREL_OP_POOL_SET, 0,
     CARREL_API_BODY(carrel_pool_request)},
    {"GET", "/v1/pools", get_pools, CARREL_OP_POOL_READ, 0, NULL},
    {"GET", "/v1/policies", get_policies, CARREL_OP_POLICY_READ, 0, NULL},
    {"GET", "/v1/policies/*", get_policy, CARREL_OP_POLICY_READ, 0, NULL},
    {"GET", "/v1/jobs/*", get_job, CARREL_OP_JOB_READ, 0, NULL},
    {"GET", "/v1/sessions", get_sessions, CARREL_OP_SESSION_LIST, 0, NULL},
    {"POST", "/v1/sessions", post_sessions, CARREL_OP_SESSION_CREATE, 0,
     CARREL_API_BODY(carrel_session_request)},
    {"GET", "/v1/sessions/*", get_session, CARREL_OP_SESSION_READ, 0, NULL},
    {"DELETE", "/v1/sessions/*", delete_session, CARREL_OP_SESSION_DESTROY, 0, NULL},
    {"POST", "/v1/sessions/*/start", post_session_start, CARREL_OP_SESSION_START, 0, NULL},
    {"POST", "/v1/sessions/*/pause", post_session_pause, CARREL_OP_SESSION_PAUSE, 0, NULL},
    {"POST", "/v1/sessions/*/resume", post_session_resume, CARREL_OP_SESSION_RESUME, 0, NULL},
    {"POST", "/v1/sessions/*/hibernate", post_session_hibernate, CARREL_OP_SESSION_HIBERNATE, 0,
     NULL},
    {"POST", "/v1/sessions/*/snapshots", post_session_snapshots, CARREL_OP_SNAPSHOT_CREATE, 0,
     CARREL_API_BODY(carrel_snapshot_request)},
    {"GET", "/v1/sessions/*/snapshots", get_session_snapshots, CARREL_OP_SESSION_READ, 0, NULL},
    {"DELETE", "/v1/sessions/*/snapshots/*", delete_session_snapshot, CARREL_OP_SNAPSHOT_DELETE, 0,
     NULL},
    {"POST", "/v1/sessions/*/revert", post_session_revert, CARREL_OP_SNAPSHOT_REVERT, 0,
     CARREL_API_BODY_OF(carrel_revert_request_from_json, carrel_snapshot_request_free)},
    {"POST", "/v1/sessions/*/fork", post_session_fork, CARREL_OP_SESSION_FORK, 0,
     CARREL_API_BODY(carrel_fork_request)},
    {"POST", "/v1/sessions/*/stop", post_session_stop, CARREL_OP_SESSION_STOP, 0,
     CARREL_API_BODY(carrel_stop_request)},
    {"POST", "/v1/sessions/*/exec", post_session_exec, CARREL_OP_SESSION_EXEC, 0,
     CARREL_API_BODY(carrel_exec_request)},
    /* Files (api-files.c): streamed transfers and operations through carrel-guest fs. */
    {"GET", "/v1/sessions/*/files", carrel_api_get_session_file, CARREL_OP_SESSION_FILE_READ, 0,
     NULL},
    {"PUT", "/v1/sessions/*/files", carrel_api_put_session_file, CARREL_OP_SESSION_FILE_WRITE,
     CARREL_API_ROUTE_RAW_BODY | CARREL_API_ROUTE_UPLOAD | CARREL_API_ROUTE_TRANSFER, NULL},
    {"GET", "/v1/sessions/*/fs", carrel_api_get_session_fs, CARREL_OP_SESSION_FILE_READ, 0, NULL},
    {"GET", "/v1/sessions/*/fs/stat", carrel_api_get_session_fs_stat, CARREL_OP_SESSION_FILE_READ,
     0, NULL},
    {"POST", "/v1/sessions/*/fs/mkdir", carrel_api_post_session_fs_mkdir,
     CARREL_OP_SESSION_FILE_WRITE, 0, NULL},
    {"POST", "/v1/sessions/*/fs/remove", carrel_api_post_session_fs_remove,
     CARREL_OP_SESSION_FILE_WRITE, 0, NULL},
    {"POST", "/v1/sessions/*/fs/move", carrel_api_post_session_fs_move,
     CARREL_OP_SESSION_FILE_WRITE, 0, NULL},
    {"GET", "/v1/sessions/*/processes", carrel_api_get_processes, CARREL_OP_SESSION_EXEC, 0, NULL},
    {"GET", "/v1/sessions/*/processes/*", carrel_api_get_process, CARREL_OP_SESSION_EXEC, 0, NULL},
    {"POST", "/v1/sessions/*/processes/*/kill", carrel_api_post_process_kill,
     CARREL_OP_SESSION_EXEC, 0, CARREL_API_BODY(carrel_proc_signal)},
    {"POST", "/v1/sessions/*/processes/*/stdin", carrel_api_post_process_stdin,
     CARREL_OP_SESSION_EXEC, 0, CARREL_API_BODY(carrel_proc_input)},
    /* The interactive terminal (api-shell.c): a websocket. */
    {"GET", "/v1/sessions/*/shell", carrel_api_get_shell, CARREL_OP_SESSION_SHELL, 0, NULL},
    {"GET", "/v1/sessions/*/events", get_session_events, CARREL_OP_SESSION_READ, 0, NULL},
    {"GET", "/v1/sessions/*/recording", carrel_api_get_recording, CARREL_OP_SESSION_READ, 0, NULL},
    {"GET", "/v1/sessions/*/recording/*", carrel_api_get_recording_segment, CARREL_OP_SESSION_READ,
     0, NULL},
    {"GET", "/v1/sessions/*/egress", get_session_egress, CARREL_OP_SESSION_READ, 0, NULL},
    {"GET", "/v1/sessions/*/screenshot", get_session_screenshot, CARREL_OP_SESSION_SCREENSHOT, 0,
     NULL},
    {"POST", "/v1/sessions/*/computer", post_session_computer, CARREL_OP_SESSION_INPUT, 0, NULL},
    {"GET", "/v1/sessions/*/accessibility", get_session_accessibility, CARREL_OP_SESSION_SCREENSHOT,
     0, NULL},
    {"POST", "/v1/uploads", post_upload, CARREL_OP_UPLOAD_CREATE,
     CARREL_API_ROUTE_RAW_BODY | CARREL_API_ROUTE_UPLOAD, NULL},
    {"POST", "/v1/sessions/*/artifacts", post_session_artifacts, CARREL_OP_SESSION_EXTRACT, 0,
     CARREL_API_BODY(carrel_extract_request)},
    {"GET", "/v1/sessions/*/artifacts", get_session_artifacts, CARREL_OP_SESSION_READ, 0, NULL},
    {"GET", "/v1/artifacts/*", get_artifact, CARREL_OP_ARTIFACT_READ, 0, NULL},
    {"GET", "/v1/sessions/*/diff", get_session_diff, CARREL_OP_SESSION_DIFF, 0, NULL},
    {"GET", "/v1/sessions/*/export", carrel_api_get_session_export, CARREL_OP_SESSION_EXPORT, 0,
     NULL},
    {"POST", "/mcp", carrel_api_mcp_post, CARREL_OP_LAST, CARREL_API_ROUTE_RAW_BODY, NULL},
    /* The console (api-console-routes.c); WS /v1/console/{ticket} is api-console-proxy.c's. */
    {"POST", "/v1/sessions/*/console", carrel_api_post_console, CARREL_OP_CONSOLE_VIEW, 0, NULL},
    {"GET", "/v1/sessions/*/console.vv", carrel_api_get_console_vv, CARREL_OP_CONSOLE_VIEW, 0,
     NULL},
    {NULL, NULL, NULL, CARREL_OP_LAST, 0, NULL},
};
