/*
 * A guest's files over HTTP. Transfers stream: an upload (PUT) is spooled to disk as it arrives
 * (api-upload.c) and core sends it on in chunks; a download (GET) is spooled by core and sent
 * from disk chunk by chunk. Both carry the sha256 core computed as the bytes passed: the
 * X-Carrel-Sha256 header of a download, the "sha256" member of an upload's reply.
 */
#include <glib/gstdio.h>

#include "api/api-priv.h"

/* The path a file verb names; the fs verbs check it in core, after the door (an unknown session
 * must look the same with or without it). */
static const char *
query_path(CarrelApiRequest *req, GError **error)
{
    const char *value = carrel_api_query(req, "path");

    if (!value || !*value)
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "query parameter 'path' is required");
    return value && *value ? value : NULL;
}

CarrelApiReply *
carrel_api_get_session_file(CarrelApiRequest *req, GError **error)
{
    const char *path = query_path(req, error);
    g_auto(CarrelTransfer) t = {0};
    g_autofree char *name = NULL;
    g_autofree char *size = NULL;
    CarrelApiReply *reply;

    if (!path || !carrel_manager_session_file_download(req->mgr, req->who, carrel_api_param(req, 0),
                                                       path, &t, error))
        return NULL;
    reply =
        carrel_api_reply_new_file(SOUP_STATUS_OK, t.host_path, "application/octet-stream", error);
    /* The reply holds the open file: the name can go now, and nothing is left if we die. */
    (void)g_unlink(t.host_path);
    if (!reply)
        return NULL;
    name = g_path_get_basename(path);
    carrel_api_reply_set_attachment(reply, name);
    carrel_api_reply_add_header(reply, "X-Carrel-Sha256", t.sha256);
    size = g_strdup_printf("%" G_GUINT64_FORMAT, t.bytes);
    carrel_api_reply_add_header(reply, "X-Carrel-Bytes", size);
    return reply;
}

CarrelApiReply *
carrel_api_get_session_export(CarrelApiRequest *req, GError **error)
{
    g_auto(CarrelTransfer) t = {0};
    g_autofree char *name = NULL;
    CarrelApiReply *reply;

    if (!carrel_manager_session_export(req->mgr, req->who, carrel_api_param(req, 0), &t, error))
        return NULL;
    /* Sent from disk chunk by chunk: a bundle carries every artifact. */
    reply = carrel_api_reply_new_file(SOUP_STATUS_OK, t.host_path, "application/x-tar", error);
    (void)g_unlink(t.host_path);
    if (!reply)
        return NULL;
    name = g_strdup_printf("%s.tar", carrel_api_param(req, 0));
    carrel_api_reply_set_attachment(reply, name);
    carrel_api_reply_add_header(reply, "X-Carrel-Host-Key",
                                carrel_manager_get_host_fingerprint(req->mgr));
    return reply;
}

CarrelApiReply *
carrel_api_put_session_file(CarrelApiRequest *req, GError **error)
{
    const char *path = query_path(req, error);
    g_auto(CarrelTransfer) t = {0};
    g_autoptr(JsonBuilder) b = json_builder_new();

    if (!path ||
        !carrel_manager_session_file_upload(req->mgr, req->who, carrel_api_param(req, 0), path,
                                            req->upload_path, req->upload_bytes, &t, error))
        return NULL;
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "path");
    json_builder_add_string_value(b, path);
    json_builder_set_member_name(b, "bytes");
    json_builder_add_int_value(b, (gint64)t.bytes);
    json_builder_set_member_name(b, "sha256");
    json_builder_add_string_value(b, t.sha256);
    json_builder_end_object(b);
    return carrel_api_reply_ok(json_builder_get_root(b));
}

CarrelApiReply *
carrel_api_get_session_fs(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_ok(carrel_manager_session_fs_list(
        req->mgr, req->who, carrel_api_param(req, 0), carrel_api_query(req, "path"), error));
}

CarrelApiReply *
carrel_api_get_session_fs_stat(CarrelApiRequest *req, GError **error)
{
    return carrel_api_reply_ok(carrel_manager_session_fs_stat(
        req->mgr, req->who, carrel_api_param(req, 0), carrel_api_query(req, "path"), error));
}

/* A member of the JSON body: a string (NULL when missing: core says so), or an optional
 * boolean. */
static gboolean
body_string(CarrelApiRequest *req, const char *key, const char **ret, GError **error)
{
    JsonNode *n = req->body ? json_object_get_member(json_node_get_object(req->body), key) : NULL;

    *ret = NULL;
    if (!n || JSON_NODE_HOLDS_NULL(n))
        return TRUE;
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_STRING) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "body member '%s' must be a string (a guest path)", key);
        return FALSE;
    }
    *ret = json_node_get_string(n);
    return TRUE;
}

static gboolean
body_bool(CarrelApiRequest *req, const char *key, gboolean *ret, GError **error)
{
    JsonNode *n = req->body ? json_object_get_member(json_node_get_object(req->body), key) : NULL;

    *ret = FALSE;
    if (!n || JSON_NODE_HOLDS_NULL(n))
        return TRUE;
    if (!JSON_NODE_HOLDS_VALUE(n) || json_node_get_value_type(n) != G_TYPE_BOOLEAN) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "body member '%s' must be a boolean", key);
        return FALSE;
    }
    *ret = json_node_get_boolean(n);
    return TRUE;
}

CarrelApiReply *
carrel_api_post_session_fs_mkdir(CarrelApiRequest *req, GError **error)
{
    const char *path = NULL;
    gboolean parents = FALSE;

    if (!body_string(req, "path", &path, error) || !body_bool(req, "parents", &parents, error))
        return NULL;
    return carrel_api_reply_ok(carrel_manager_session_fs_mkdir(
        req->mgr, req->who, carrel_api_param(req, 0), path, parents, error));
}

CarrelApiReply *
carrel_api_post_session_fs_remove(CarrelApiRequest *req, GError **error)
{
    const char *path = NULL;
    gboolean recursive = FALSE;

    if (!body_string(req, "path", &path, error) || !body_bool(req, "recursive", &recursive, error))
        return NULL;
    return carrel_api_reply_ok(carrel_manager_session_fs_remove(
        req->mgr, req->who, carrel_api_param(req, 0), path, recursive, error));
}

CarrelApiReply *
carrel_api_post_session_fs_move(CarrelApiRequest *req, GError **error)
{
    const char *from = NULL, *to = NULL;

    if (!body_string(req, "from", &from, error) || !body_string(req, "to", &to, error))
        return NULL;
    return carrel_api_reply_ok(carrel_manager_session_fs_move(
        req->mgr, req->who, carrel_api_param(req, 0), from, to, error));
}
