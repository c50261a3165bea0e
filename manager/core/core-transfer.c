/*
 * Streamed file transfers into and out of a session's guest (PUT/GET /v1/sessions/{id}/files):
 * the bytes pass through a spool file on the host and the guest agent in 64 KiB chunks, with
 * their sha256 computed as they pass, so a file of any size up to CARREL_LIMIT_TRANSFER_BYTES
 * costs one chunk of memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <unistd.h>

#include "core/core-priv.h"

void
carrel_transfer_clear(CarrelTransfer *t)
{
    g_clear_pointer(&t->host_path, g_free);
    g_clear_pointer(&t->sha256, g_free);
    t->bytes = 0;
}

static JsonNode *
transfer_params(const char *path, const CarrelTransfer *t)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "path");
    json_builder_add_string_value(b, path);
    if (t) {
        json_builder_set_member_name(b, "bytes");
        json_builder_add_int_value(b, (gint64)t->bytes);
        json_builder_set_member_name(b, "sha256");
        json_builder_add_string_value(b, t->sha256);
        json_builder_set_member_name(b, "streamed");
        json_builder_add_boolean_value(b, TRUE);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static gboolean
download(CarrelManager *mgr, const char *id_or_name, const char *path, const CarrelPrincipal *actor,
         CarrelTransfer *t, GError **error)
{
    g_autoptr(CarrelSession) session = NULL;
    g_autofree char *domain = NULL;
    g_autofree char *spool = NULL;
    g_autoptr(JsonNode) params = NULL;
    g_autoptr(JsonNode) result = NULL;
    g_autoptr(GError) local = NULL;
    gint64 started = g_get_monotonic_time();
    gboolean ok;
    int fd;

    if (!carrel_util_check_guest_path(path, error) ||
        !(session =
              carrel_manager_running_session(mgr, id_or_name, "read a file of", &domain, error)))
        return FALSE;
    fd = carrel_manager_upload_spool(mgr, &spool, &local);
    ok = fd >= 0 &&
         carrel_hypervisor_file_read_fd_sha(mgr->hv, domain, path, fd, CARREL_LIMIT_TRANSFER_BYTES,
                                            &t->bytes, &t->sha256, &local);
    if (fd >= 0)
        close(fd);
    params = transfer_params(path, NULL);
    result = ok ? transfer_params(path, t) : NULL;
    ok = carrel_manager_record_outcome(mgr, session->id, actor, "file", "file_read", params, result,
                                       &local, started, NULL, ok);
    if (!ok) {
        if (spool)
            (void)g_unlink(spool);
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "session '%s': ", session->id);
        return FALSE;
    }
    t->host_path = g_steal_pointer(&spool);
    return TRUE;
}

gboolean
carrel_manager_session_file_download(CarrelManager *mgr, const CarrelPrincipal *who,
                                     const char *id_or_name, const char *path,
                                     CarrelTransfer *ret_transfer, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_auto(CarrelTransfer) t = {0};
    g_autoptr(GError) local = NULL;
    gboolean ok;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_FILE_READ, id_or_name,
                           transfer_params(path ? path : "", NULL), error))
        return FALSE;
    ok = carrel_door_finish_ok(&door, download(mgr, door.session_id, path, who, &t, &local), &local,
                               error);
    if (ok)
        *ret_transfer = (CarrelTransfer){.host_path = g_steal_pointer(&t.host_path),
                                         .bytes = t.bytes,
                                         .sha256 = g_steal_pointer(&t.sha256)};
    return ok;
}

static gboolean
upload(CarrelManager *mgr, const char *id_or_name, const char *path, const char *spool,
       guint64 bytes, const CarrelPrincipal *actor, CarrelTransfer *t, GError **error)
{
    g_autoptr(CarrelSession) session = NULL;
    g_autofree char *domain = NULL;
    g_autoptr(JsonNode) params = NULL;
    g_autoptr(JsonNode) result = NULL;
    g_autoptr(GError) local = NULL;
    gint64 started = g_get_monotonic_time();
    gboolean ok;
    int fd;

    if (!carrel_util_check_guest_path(path, error) ||
        !carrel_manager_check_spool_path(mgr, spool, error))
        return FALSE;
    if (bytes > CARREL_LIMIT_TRANSFER_BYTES) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "file is larger than %" G_GUINT64_FORMAT " bytes", CARREL_LIMIT_TRANSFER_BYTES);
        return FALSE;
    }
    if (!(session =
              carrel_manager_running_session(mgr, id_or_name, "write a file into", &domain, error)))
        return FALSE;
    fd = g_open(spool, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) {
        int saved = errno;
        g_set_error(&local, CARREL_ERROR, CARREL_ERROR_FAILED, "opening the upload: %s",
                    g_strerror(saved));
    }
    ok = fd >= 0 &&
         carrel_hypervisor_file_write_fd(mgr->hv, domain, path, fd, bytes, &t->sha256, &local);
    if (fd >= 0)
        close(fd);
    t->bytes = bytes;
    params = transfer_params(path, NULL);
    result = ok ? transfer_params(path, t) : NULL;
    ok = carrel_manager_record_outcome(mgr, session->id, actor, "file", "file_write", params,
                                       result, &local, started, NULL, ok);
    if (!ok)
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "session '%s': ", session->id);
    return ok;
}

gboolean
carrel_manager_session_file_upload(CarrelManager *mgr, const CarrelPrincipal *who,
                                   const char *id_or_name, const char *path, const char *spool_path,
                                   guint64 bytes, CarrelTransfer *ret_transfer, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_auto(CarrelTransfer) t = {0};
    g_autoptr(GError) local = NULL;
    gboolean ok;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_FILE_WRITE, id_or_name,
                           transfer_params(path ? path : "", NULL), error))
        return FALSE;
    ok = carrel_door_finish_ok(
        &door, upload(mgr, door.session_id, path, spool_path, bytes, who, &t, &local), &local,
        error);
    if (ok)
        *ret_transfer = (CarrelTransfer){.bytes = t.bytes, .sha256 = g_steal_pointer(&t.sha256)};
    return ok;
}
