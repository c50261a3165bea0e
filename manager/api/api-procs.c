/* api: background processes of a session (GET/POST /v1/sessions/{id}/processes...) and the
 * detached forms of exec ("background": its handle at once; "stream": its output as events). */
#include "api/api-priv.h"

#define STREAM_RETRY_AFTER_S 5

static JsonNode *
info_item(gpointer item, gpointer data)
{
    return carrel_proc_info_to_json(item);
}

static CarrelApiReply *
stream_reply(CarrelApiRequest *req, GError **error)
{
    g_autoptr(GError) limit = NULL;
    g_autofree char *after = NULL;
    CarrelExecStream *core;
    CarrelApiReply *reply;

    /* Reserved before the process starts, released when the stream finishes. */
    if (!carrel_api_streams_reserve(req->api->streams, req->who->token_id, &limit)) {
        reply = carrel_api_reply_new_error(CARREL_HTTP_TOO_MANY_REQUESTS, limit);
        after = g_strdup_printf("%u", STREAM_RETRY_AFTER_S);
        carrel_api_reply_add_header(reply, "Retry-After", after);
        return reply;
    }
    core = carrel_manager_exec_stream_start(req->mgr, req->who, carrel_api_param(req, 0),
                                            req->typed, error);
    if (!core) {
        carrel_api_streams_release(req->api->streams, req->who->token_id);
        return NULL;
    }
    return carrel_api_reply_new_exec_stream(req->who->token_id, core);
}

CarrelApiReply *
carrel_api_post_exec_detached(CarrelApiRequest *req, GError **error)
{
    const CarrelExecRequest *body = req->typed;
    g_autoptr(CarrelProcInfo) info = NULL;

    if (body->stream)
        return stream_reply(req, error);
    info = carrel_manager_proc_start(req->mgr, req->who, carrel_api_param(req, 0), body, error);
    return info ? carrel_api_reply_new_json(SOUP_STATUS_CREATED, carrel_proc_info_to_json(info))
                : NULL;
}

CarrelApiReply *
carrel_api_get_processes(CarrelApiRequest *req, GError **error)
{
    g_autoptr(GPtrArray) list =
        carrel_manager_proc_list(req->mgr, req->who, carrel_api_param(req, 0), error);

    return list ? carrel_api_reply_ok(carrel_api_list_of("processes", list, info_item, NULL))
                : NULL;
}

/* ?stdout_offset=N&stderr_offset=M, 0 when absent. */
static gboolean
query_offset(CarrelApiRequest *req, const char *key, gint64 *ret_offset, GError **error)
{
    const char *text = carrel_api_query(req, key);
    guint64 value = 0;

    if (text && !g_ascii_string_to_unsigned(text, 10, 0, CARREL_PROC_OUTPUT_MAX, &value, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'%s' must be a byte offset from 0 to %d", key, CARREL_PROC_OUTPUT_MAX);
        return FALSE;
    }
    *ret_offset = (gint64)value;
    return TRUE;
}

CarrelApiReply *
carrel_api_get_process(CarrelApiRequest *req, GError **error)
{
    g_autoptr(CarrelProcRead) read = NULL;
    gint64 out = 0, err = 0;

    if (!query_offset(req, "stdout_offset", &out, error) ||
        !query_offset(req, "stderr_offset", &err, error))
        return NULL;
    read = carrel_manager_proc_read(req->mgr, req->who, carrel_api_param(req, 0),
                                    carrel_api_param(req, 1), out, err, error);
    return read ? carrel_api_reply_ok(carrel_proc_read_to_json(read)) : NULL;
}

CarrelApiReply *
carrel_api_post_process_kill(CarrelApiRequest *req, GError **error)
{
    const CarrelProcSignal *body = req->typed;

    if (!carrel_manager_proc_signal(req->mgr, req->who, carrel_api_param(req, 0),
                                    carrel_api_param(req, 1), body->signal, error))
        return NULL;
    return carrel_api_reply_new_empty(SOUP_STATUS_NO_CONTENT);
}

CarrelApiReply *
carrel_api_post_process_stdin(CarrelApiRequest *req, GError **error)
{
    if (!carrel_manager_proc_input(req->mgr, req->who, carrel_api_param(req, 0),
                                   carrel_api_param(req, 1), req->typed, error))
        return NULL;
    return carrel_api_reply_new_empty(SOUP_STATUS_NO_CONTENT);
}
