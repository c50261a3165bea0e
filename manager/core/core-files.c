#include "core/core-priv.h"

static JsonNode *
file_params(const char *path, GBytes *data)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "path");
    json_builder_add_string_value(b, path);
    if (data) {
        g_autofree char *sha = g_compute_checksum_for_bytes(G_CHECKSUM_SHA256, data);
        json_builder_set_member_name(b, "bytes");
        json_builder_add_int_value(b, (gint64)g_bytes_get_size(data));
        json_builder_set_member_name(b, "sha256");
        json_builder_add_string_value(b, sha);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static GBytes *
file_read(CarrelManager *mgr, const char *id_or_name, const char *path,
          const CarrelPrincipal *actor, GError **error)
{
    g_autoptr(CarrelSession) session = NULL;
    g_autofree char *domain = NULL;
    g_autoptr(GBytes) data = NULL;
    g_autoptr(JsonNode) params = NULL;
    g_autoptr(JsonNode) result = NULL;
    g_autoptr(GError) local = NULL;
    gint64 started = g_get_monotonic_time();
    gboolean ok;

    if (!carrel_util_check_guest_path(path, error) ||
        !(session =
              carrel_manager_running_session(mgr, id_or_name, "read a file of", &domain, error)))
        return NULL;
    ok = carrel_hypervisor_file_read(mgr->hv, domain, path, CARREL_LIMIT_FILE_BYTES, &data, &local);
    params = file_params(path, NULL);
    result = ok ? file_params(path, data) : NULL;
    ok = carrel_manager_record_outcome(mgr, session->id, actor, "file", "file_read", params, result,
                                       &local, started, NULL, ok);
    if (!ok) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "session '%s': ", session->id);
        return NULL;
    }
    return g_steal_pointer(&data);
}

static gboolean
file_write(CarrelManager *mgr, const char *id_or_name, const char *path, GBytes *data,
           const CarrelPrincipal *actor, GError **error)
{
    g_autoptr(CarrelSession) session = NULL;
    g_autofree char *domain = NULL;
    g_autoptr(JsonNode) params = NULL;
    g_autoptr(GError) local = NULL;
    gint64 started = g_get_monotonic_time();
    gboolean ok;

    if (!carrel_util_check_guest_path(path, error))
        return FALSE;
    if (g_bytes_get_size(data) > CARREL_LIMIT_FILE_BYTES) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "file is larger than %d bytes",
                    CARREL_LIMIT_FILE_BYTES);
        return FALSE;
    }
    if (!(session =
              carrel_manager_running_session(mgr, id_or_name, "write a file into", &domain, error)))
        return FALSE;
    ok = carrel_hypervisor_file_write(mgr->hv, domain, path, data, &local);
    params = file_params(path, data);
    ok = carrel_manager_record_outcome(mgr, session->id, actor, "file", "file_write", params,
                                       params, &local, started, NULL, ok);
    if (!ok)
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "session '%s': ", session->id);
    return ok;
}

GBytes *
carrel_manager_session_file_read(CarrelManager *mgr, const CarrelPrincipal *who,
                                 const char *id_or_name, const char *path, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_FILE_READ, id_or_name,
                           file_params(path ? path : "", NULL), error))
        return NULL;
    return carrel_door_finish(&door, file_read(mgr, door.session_id, path, who, &local), &local,
                              error);
}

gboolean
carrel_manager_session_file_write(CarrelManager *mgr, const CarrelPrincipal *who,
                                  const char *id_or_name, const char *path, GBytes *data,
                                  GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_FILE_WRITE, id_or_name,
                           file_params(path ? path : "", data), error))
        return FALSE;
    return carrel_door_finish_ok(&door, file_write(mgr, door.session_id, path, data, who, &local),
                                 &local, error);
}
