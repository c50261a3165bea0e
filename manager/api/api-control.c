/*
 * api: what people reviewing sessions hold and see: the control lease (a human has the session's
 * keyboard and pointer, agents wait), approvals, the screenshots kept on a timeline, and the audit
 * log of who did what to a session.
 */
#include "api/api-priv.h"

CarrelApiReply *
carrel_api_get_control(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_ok(
        carrel_manager_lease_get(req->mgr, req->who, carrel_api_param(req, 0), error));
}

CarrelApiReply *
carrel_api_post_control(CarrelApiRequest *req, GError **error)
{
    const CarrelControlRequest *body = req->typed;

    if (body->take)
        return carrel_api_reply_ok(
            carrel_manager_lease_take(req->mgr, req->who, carrel_api_param(req, 0), error));
    return carrel_api_reply_ok(
        carrel_manager_lease_release(req->mgr, req->who, carrel_api_param(req, 0), error));
}

CarrelApiReply *
carrel_api_get_approvals(CarrelApiRequest *req, GError **error)
{
    const char *state = carrel_api_query(req, "state");
    g_autoptr(GPtrArray) list = NULL;

    if (state && !g_str_equal(state, "pending") && !g_str_equal(state, "all")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'state' must be \"pending\" or \"all\"");
        return NULL;
    }
    list = carrel_manager_approval_list(req->mgr, req->who, !state || g_str_equal(state, "pending"),
                                        error);
    return list ? carrel_api_reply_ok(
                      carrel_api_list_of("approvals", list, carrel_api_approval_item, NULL))
                : NULL;
}

static CarrelApiReply *
decide(CarrelApiRequest *req, gboolean approve, GError **error)
{
    const CarrelDecisionRequest *body = req->typed;
    g_autoptr(CarrelApproval) a = carrel_manager_approval_decide(
        req->mgr, req->who, carrel_api_param(req, 0), approve, body->reason, error);

    return a ? carrel_api_reply_ok(carrel_approval_to_json(a)) : NULL;
}

CarrelApiReply *
carrel_api_post_approval_approve(CarrelApiRequest *req, GError **error)
{
    return decide(req, TRUE, error);
}

CarrelApiReply *
carrel_api_post_approval_deny(CarrelApiRequest *req, GError **error)
{
    return decide(req, FALSE, error);
}

CarrelApiReply *
carrel_api_post_test_approval(CarrelApiRequest *req, GError **error)
{
    const CarrelApprovalAsk *body = req->typed;
    g_autoptr(CarrelApproval) a = carrel_manager_approval_request(
        req->mgr, req->who, body->session_id, body->action, body->detail, error);

    if (!a)
        return NULL;
    return carrel_api_reply_new_json(SOUP_STATUS_CREATED, carrel_approval_to_json(a));
}

CarrelApiReply *
carrel_api_get_session_shot(CarrelApiRequest *req, GError **error)
{
    const char *type = NULL;
    GBytes *bytes = carrel_manager_session_kept_screenshot(
        req->mgr, req->who, carrel_api_param(req, 0), carrel_api_param(req, 1), &type, error);

    return carrel_api_reply_new_bytes(SOUP_STATUS_OK, bytes, type);
}

/* An integer query parameter in [min, max], absent = *ret_value unchanged. */
static gboolean
query_int(CarrelApiRequest *req, const char *key, gint64 min, gint64 max, gint64 *ret_value,
          GError **error)
{
    const char *text = carrel_api_query(req, key);
    gint64 value;

    if (!text)
        return TRUE;
    if (!g_ascii_string_to_signed(text, 10, min, max, &value, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'%s' must be an integer between %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT,
                    key, min, max);
        return FALSE;
    }
    *ret_value = value;
    return TRUE;
}

/* since: RFC 3339 ("2026-12-01T10:00:00Z") or Unix seconds. */
static gboolean
query_since(CarrelApiRequest *req, gint64 *ret_us, GError **error)
{
    const char *text = carrel_api_query(req, "since");
    g_autoptr(GDateTime) when = NULL;
    gint64 seconds;

    if (!text)
        return TRUE;
    if (g_ascii_string_to_signed(text, 10, 0, G_MAXINT64 / G_USEC_PER_SEC, &seconds, NULL)) {
        *ret_us = seconds * G_USEC_PER_SEC;
        return TRUE;
    }
    when = g_date_time_new_from_iso8601(text, NULL);
    if (!when) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'since' must be a time such as 2026-12-01T10:00:00Z, or Unix seconds");
        return FALSE;
    }
    *ret_us = g_date_time_to_unix(when) * G_USEC_PER_SEC + g_date_time_get_microsecond(when);
    return TRUE;
}

CarrelApiReply *
carrel_api_get_audit(CarrelApiRequest *req, GError **error)
{
    CarrelAuditQuery q = {
        .session_id = carrel_api_query(req, "session"),
        .principal = carrel_api_query(req, "principal"),
        .operation = carrel_api_query(req, "operation"),
        .result = carrel_api_query(req, "result"),
    };
    gint64 limit = 0;

    if (!query_int(req, "after", 0, G_MAXINT64, &q.after_seq, error) ||
        !query_int(req, "limit", 1, 10000, &limit, error) || !query_since(req, &q.since_us, error))
        return NULL;
    q.limit = (guint)limit;
    return carrel_api_reply_ok(carrel_manager_audit_list(req->mgr, req->who, &q, error));
}

CarrelApiReply *
carrel_api_get_audit_verify(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_ok(carrel_manager_audit_verify(req->mgr, req->who, error));
}
