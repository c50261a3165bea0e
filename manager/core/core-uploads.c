/*
 * Uploads: tars of task inputs sent before a create (POST /v1/uploads). The API writes the body
 * into a spool file as it arrives (never whole in memory); storing it moves that file to
 * uploads/<id>.tar. A create that uses an upload removes it (core-inputs.c); one that no create
 * used is removed by the watcher's sweep once the upload TTL has passed, and the removal is
 * audited, so an abandoned upload never holds the state disk for long.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core-priv.h"

/* Spool files: "incoming-XXXXXX" beside the stored "u-....tar". */
#define SPOOL_PREFIX "incoming-"

static char *
uploads_dir(CarrelManager *mgr)
{
    return g_build_filename(mgr->state_dir, "uploads", NULL);
}

char *
carrel_manager_upload_path(CarrelManager *mgr, const char *id)
{
    g_autofree char *name = g_strconcat(id, ".tar", NULL);

    return g_build_filename(mgr->state_dir, "uploads", name, NULL);
}

int
carrel_manager_upload_spool(CarrelManager *mgr, char **ret_path, GError **error)
{
    g_autofree char *dir = uploads_dir(mgr);
    g_autofree char *path = g_build_filename(dir, SPOOL_PREFIX "XXXXXX", NULL);
    int fd;

    if (!carrel_manager_disk_check(mgr, "an upload", error) ||
        !carrel_util_ensure_dir(dir, 0700, error))
        return -1;
    fd = g_mkstemp_full(path, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        int saved = errno;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "creating an upload file in '%s': %s",
                    dir, g_strerror(saved));
        return -1;
    }
    *ret_path = g_steal_pointer(&path);
    return fd;
}

gboolean
carrel_manager_check_spool_path(CarrelManager *mgr, const char *spool_path, GError **error)
{
    g_autofree char *dir = uploads_dir(mgr);
    g_autofree char *parent = spool_path ? g_path_get_dirname(spool_path) : NULL;
    g_autofree char *base = spool_path ? g_path_get_basename(spool_path) : NULL;

    if (parent && g_str_equal(parent, dir) && g_str_has_prefix(base, SPOOL_PREFIX) &&
        g_file_test(spool_path, G_FILE_TEST_IS_REGULAR))
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND,
                "the upload's body is gone (the request ended or the upload expired)");
    return FALSE;
}

static char *
store_upload(CarrelManager *mgr, const char *spool_path, GError **error)
{
    g_autofree char *id = carrel_util_new_id("u-");
    g_autofree char *path = carrel_manager_upload_path(mgr, id);

    if (!carrel_manager_check_spool_path(mgr, spool_path, error))
        return NULL;
    if (g_rename(spool_path, path) < 0) {
        int saved = errno;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "storing the upload: %s",
                    g_strerror(saved));
        return NULL;
    }
    return g_steal_pointer(&id);
}

char *
carrel_manager_upload_file(CarrelManager *mgr, const CarrelPrincipal *who, const char *spool_path,
                           guint64 bytes, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    JsonNode *params = carrel_conf_new_object_node();

    json_object_set_int_member(json_node_get_object(params), "bytes", (gint64)bytes);
    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_UPLOAD_CREATE, NULL, params, error))
        return NULL;
    return carrel_door_finish(&door, store_upload(mgr, spool_path, &local), &local, error);
}

/* An upload (or spool file) removed unused: by carreld, with what it was, in the audit log. */
static void
audit_expired(CarrelManager *mgr, const char *name, guint64 bytes, gint64 age_s)
{
    const CarrelPrincipal *daemon = carrel_principal_daemon();
    g_autoptr(CarrelAuditRecord) rec = carrel_audit_record_new();
    g_autoptr(JsonNode) params = carrel_conf_new_object_node();
    JsonObject *o = json_node_get_object(params);

    json_object_set_string_member(o, "upload", name);
    json_object_set_int_member(o, "bytes", (gint64)bytes);
    json_object_set_int_member(o, "age_s", age_s);
    rec->ts_us = g_get_real_time();
    rec->principal_id = g_strdup(daemon->token_id);
    rec->principal_label = g_strdup(daemon->label);
    rec->role = g_strdup(carrel_role_to_string(daemon->role));
    rec->operation = g_strdup("upload.expire");
    rec->params_digest = carrel_audit_digest(params);
    rec->result = g_strdup("ok");
    carrel_manager_audit(mgr, rec);
}

/* A stored upload ("u-....tar") or a spool file; nothing else in uploads/ is the sweep's. */
static gboolean
is_upload_name(const char *name)
{
    return (g_str_has_prefix(name, "u-") && g_str_has_suffix(name, ".tar")) ||
           g_str_has_prefix(name, SPOOL_PREFIX);
}

guint
carrel_manager_sweep_uploads(CarrelManager *mgr)
{
    g_autofree char *dir = uploads_dir(mgr);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    gint64 now = carrel_util_now();
    const char *name;
    guint removed = 0;

    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        struct stat st;
        gint64 age_s;

        if (!is_upload_name(name) || lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
            continue;
        /* mtime: a spool file still being written keeps getting younger. */
        age_s = now - (gint64)st.st_mtime;
        if (age_s < (gint64)mgr->upload_ttl_s || g_unlink(path) < 0)
            continue;
        g_debug("upload '%s' unused for %" G_GINT64_FORMAT " s: removed", name, age_s);
        audit_expired(mgr, name, (guint64)st.st_size, age_s);
        removed++;
    }
    return removed;
}
