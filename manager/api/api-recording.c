/* A session's screen recording: its segments and events index, and each finished segment. */
#include "api/api-priv.h"

CarrelApiReply *
carrel_api_get_recording(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_ok(
        carrel_manager_session_recording(req->mgr, req->who, carrel_api_param(req, 0), error));
}

CarrelApiReply *
carrel_api_get_recording_segment(CarrelApiRequest *req, GError **error)
{
    const char *name = carrel_api_param(req, 1);
    g_autofree char *sha256 = NULL;
    g_autofree char *path = carrel_manager_session_recording_segment(
        req->mgr, req->who, carrel_api_param(req, 0), name, &sha256, error);
    CarrelApiReply *reply;

    if (!path)
        return NULL;
    /* From disk chunk by chunk, and by ranges: the session page's player seeks in it. */
    reply = carrel_api_reply_new_file(SOUP_STATUS_OK, path, "video/webm", error);
    if (!reply)
        return NULL;
    carrel_api_reply_set_attachment(reply, name);
    if (sha256)
        carrel_api_reply_add_header(reply, "X-Carrel-Sha256", sha256);
    carrel_api_reply_file_range(reply, req->range);
    return reply;
}
