/*
 * The file diff of a session against its template, for review: one appliance with the
 * template's disk at /base and the session's at /top, both read-only. A running session's disk
 * is copied while its filesystems are frozen (a consistent whole, the guest blocked for the
 * copy only); a session that is off is read as it is.
 */
#include <glib/gstdio.h>

#include "core/core-priv.h"
#include "disk/disk.h"

static CarrelFileType
file_type(CarrelDiskFileType type)
{
    switch (type) {
    case CARREL_DISK_FILE_REGULAR:
        return CARREL_FILE_REGULAR;
    case CARREL_DISK_FILE_DIR:
        return CARREL_FILE_DIR;
    case CARREL_DISK_FILE_SYMLINK:
        return CARREL_FILE_SYMLINK;
    case CARREL_DISK_FILE_OTHER:
        break;
    }
    return CARREL_FILE_OTHER;
}

static CarrelDiffEntry *
entry_new(const char *under, const char *rel, CarrelDiffChange change, const CarrelGuestfsStat *st)
{
    CarrelDiffEntry *e = g_new0(CarrelDiffEntry, 1);

    e->path = g_build_filename("/", under, rel, NULL);
    e->change = change;
    e->type = file_type(st->type);
    e->size = st->type == CARREL_DISK_FILE_REGULAR ? st->size : 0;
    e->mode = st->mode;
    return e;
}

static gboolean
same_metadata(const CarrelGuestfsStat *a, const CarrelGuestfsStat *b)
{
    return a->type == b->type && a->mode == b->mode && a->uid == b->uid && a->gid == b->gid;
}

/* Content may differ: a directory's mtime moves with its entries, so only files and links. */
static gboolean
may_differ(const CarrelGuestfsStat *a, const CarrelGuestfsStat *b)
{
    if (a->type == CARREL_DISK_FILE_DIR)
        return FALSE;
    return a->size != b->size || a->mtime != b->mtime;
}

static gint
by_path(gconstpointer a, gconstpointer b)
{
    const CarrelDiffEntry *const *ea = a, *const *eb = b;

    return strcmp((*ea)->path, (*eb)->path);
}

GPtrArray *
carrel_diff_plan(GHashTable *base, GHashTable *top, const char *under, GPtrArray **ret_check)
{
    GPtrArray *entries = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_diff_entry_free);
    GPtrArray *check = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_diff_entry_free);
    GHashTableIter iter;
    gpointer key, value;

    g_hash_table_iter_init(&iter, top);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        const CarrelGuestfsStat *t = value, *b = g_hash_table_lookup(base, key);
        if (!b)
            g_ptr_array_add(entries, entry_new(under, key, CARREL_DIFF_ADDED, t));
        else if (!same_metadata(b, t))
            g_ptr_array_add(entries, entry_new(under, key, CARREL_DIFF_CHANGED, t));
        else if (may_differ(b, t))
            g_ptr_array_add(check, entry_new(under, key, CARREL_DIFF_CHANGED, t));
    }
    g_hash_table_iter_init(&iter, base);
    while (g_hash_table_iter_next(&iter, &key, &value))
        if (!g_hash_table_contains(top, key))
            g_ptr_array_add(entries, entry_new(under, key, CARREL_DIFF_REMOVED, value));
    g_ptr_array_sort(check, by_path);
    *ret_check = check;
    return entries;
}

/* Same size and mtime moved, or size moved: compare what is there (hashes, link targets). */
static gboolean
content_changed(CarrelGuestfs *gfs, CarrelDiffEntry *e, gboolean *ret_changed, GError **error)
{
    g_autofree char *b = g_strconcat("/base", e->path, NULL);
    g_autofree char *t = g_strconcat("/top", e->path, NULL);
    g_autofree char *bv = NULL, *tv = NULL;

    if (e->type == CARREL_FILE_SYMLINK) {
        bv = carrel_guestfs_readlink(gfs, b, error);
        tv = bv ? carrel_guestfs_readlink(gfs, t, error) : NULL;
    } else if (e->type == CARREL_FILE_REGULAR) {
        bv = carrel_guestfs_sha256(gfs, b, error);
        tv = bv ? carrel_guestfs_sha256(gfs, t, error) : NULL;
    } else {
        *ret_changed = FALSE;
        return TRUE;
    }
    if (!tv)
        return FALSE;
    *ret_changed = !g_str_equal(bv, tv);
    if (e->type == CARREL_FILE_REGULAR)
        e->sha256 = g_steal_pointer(&tv);
    return TRUE;
}

static gboolean
hash_changed(CarrelGuestfs *gfs, GPtrArray *entries, GError **error)
{
    for (guint i = 0; i < entries->len; i++) {
        CarrelDiffEntry *e = g_ptr_array_index(entries, i);
        g_autofree char *t = g_strconcat("/top", e->path, NULL);
        if (e->change == CARREL_DIFF_CHANGED && e->type == CARREL_FILE_REGULAR && !e->sha256 &&
            !(e->sha256 = carrel_guestfs_sha256(gfs, t, error)))
            return FALSE;
    }
    return TRUE;
}

static GPtrArray *
diff_disks(CarrelManager *mgr, const CarrelTemplate *tmpl, const char *top_path, const char *under,
           const char *scratch, GError **error)
{
    CarrelGuestfsDisk disks[] = {{tmpl->disk_path, tmpl->format, "/base"},
                                 {top_path, "qcow2", "/top"}};
    g_autoptr(CarrelGuestfs) gfs = NULL;
    g_autofree char *base_root = g_build_filename("/base", under, NULL);
    g_autofree char *top_root = g_build_filename("/top", under, NULL);
    g_autoptr(GHashTable) base = NULL, top = NULL;
    g_autoptr(GPtrArray) entries = NULL, check = NULL;

    gfs = carrel_guestfs_open(disks, 2, FALSE, mgr->accel == CARREL_ACCEL_TCG, error);
    if (!gfs)
        return NULL;
    if (*under && (!carrel_guestfs_check_parents(gfs, "/top", under, error) ||
                   !carrel_guestfs_check_parents(gfs, "/base", under, error)))
        return NULL;
    base = carrel_guestfs_walk(gfs, base_root, scratch, NULL);
    if (!base) /* the folder is new in the session */
        base = g_hash_table_new(g_str_hash, g_str_equal);
    top = carrel_guestfs_walk(gfs, top_root, scratch, error);
    if (!top)
        return NULL;
    entries = carrel_diff_plan(base, top, under, &check);
    for (guint i = 0; i < check->len; i++) {
        gboolean changed = FALSE;
        if (!content_changed(gfs, g_ptr_array_index(check, i), &changed, error))
            return NULL;
        if (changed)
            g_ptr_array_add(entries, g_steal_pointer(&g_ptr_array_index(check, i)));
    }
    if (!hash_changed(gfs, entries, error))
        return NULL;
    g_ptr_array_sort(entries, by_path);
    return g_steal_pointer(&entries);
}

/* A consistent copy of a running session's overlay: frozen, copied, thawed. */
static gboolean
copy_live_overlay(CarrelManager *mgr, const CarrelSession *session, const char *copy,
                  GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autoptr(GError) thaw_error = NULL;
    gboolean ok;

    if (!carrel_hypervisor_fs_freeze(mgr->hv, domain, TRUE, error))
        return FALSE;
    ok = carrel_util_copy_file(session->overlay_path, copy, 0600, error);
    if (!carrel_hypervisor_fs_freeze(mgr->hv, domain, FALSE, &thaw_error) && ok) {
        g_propagate_error(error, g_steal_pointer(&thaw_error));
        return FALSE;
    }
    return ok;
}

static GPtrArray *
diff_session(CarrelManager *mgr, const CarrelSession *session, const char *under, GError **error)
{
    g_autoptr(CarrelTemplate) tmpl = NULL;
    g_autofree char *scratch = g_build_filename(session->dir, "diff", NULL);
    g_autofree char *copy = g_build_filename(scratch, "top.qcow2", NULL);
    const char *top = session->overlay_path;
    GPtrArray *entries;

    tmpl = carrel_store_template_get(mgr->store, session->template_name, session->template_version,
                                     error);
    if (!tmpl || !carrel_util_ensure_dir(scratch, 0700, error))
        return NULL;
    if (session->state == CARREL_SESSION_RUNNING) {
        if (!copy_live_overlay(mgr, session, copy, error))
            return NULL;
        top = copy;
    }
    entries = diff_disks(mgr, tmpl, top, under, scratch, error);
    (void)carrel_util_remove_tree(scratch, NULL);
    return entries;
}

static GPtrArray *
session_diff(CarrelManager *mgr, const char *id_or_name, const char *under,
             const CarrelPrincipal *actor, GError **error)
{
    g_autoptr(CarrelSession) session = carrel_store_session_get(mgr->store, id_or_name, error);
    g_autoptr(CarrelSession) fresh = NULL;
    g_autoptr(GError) local = NULL;
    GPtrArray *entries = NULL;
    gint64 t0 = g_get_monotonic_time();

    if (!session || (under && !carrel_util_check_guest_path(under, error)) ||
        !carrel_manager_mark_busy(mgr, session->id, "diff", error))
        return NULL;
    fresh = carrel_store_session_get(mgr->store, session->id, &local);
    if (fresh && carrel_manager_check_has_disk(fresh, "diff", &local))
        entries = diff_session(mgr, fresh, under ? under + 1 : "", &local);
    carrel_manager_clear_busy(mgr, session->id);
    if (!carrel_manager_record_outcome(mgr, session->id, actor, "artifacts", "diff", NULL, NULL,
                                       &local, t0, NULL, entries != NULL))
        g_clear_pointer(&entries, g_ptr_array_unref);
    if (!entries)
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "diff of '%s': ", session->id);
    return entries;
}

GPtrArray *
carrel_manager_session_diff(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                            const char *under, GError **error)
{
    g_auto(CarrelDoor) door = {0};

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_DIFF, id_or_name, NULL, error))
        return NULL;
    return session_diff(mgr, door.session_id, under, who, error);
}
