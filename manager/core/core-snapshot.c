/*
 * Snapshots with memory: stack a new top overlay on the disk a running session uses, and have
 * libvirt write the memory to a file and move the disk onto that top in one step (QEMU keeps
 * running; the guest stands still while its memory is written). Then the old disk is frozen:
 * that layer and the memory file are the snapshot. A stopped session's snapshot is its disk
 * alone. Revert stacks a fresh top on any snapshot's layer and restores its memory the way a
 * warm start does (a tree, not a line: layers are never written again). Everything lives
 * under the session's folder.
 */
#include <glib/gstdio.h>
#include <sys/stat.h>

#include "core/core-priv.h"
#include "disk/disk.h"

static char *
snapshot_dir(const CarrelSession *session, const char *snap_id)
{
    return g_build_filename(session->dir, "snapshots", snap_id, NULL);
}

/* A new top overlay's path beside the session's other layers. */
static char *
top_path_new(const CarrelSession *session)
{
    g_autofree char *rand = carrel_util_new_id("top-");
    g_autofree char *name = g_strconcat(rand, ".qcow2", NULL);

    return g_build_filename(session->dir, name, NULL);
}

/* A new top overlay on layer at path (a leftover of a run cut short is replaced). */
static gboolean
make_top(const char *path, const char *layer, GError **error)
{
    (void)g_unlink(path);
    return carrel_disk_create_overlay(path, layer, "qcow2", error);
}

/* A new top overlay on layer, named after what made it. */
static char *
new_top(const CarrelSession *session, const char *layer, GError **error)
{
    g_autofree char *path = top_path_new(session);

    return make_top(path, layer, error) ? g_steal_pointer(&path) : NULL;
}

gboolean
carrel_manager_restore_onto(CarrelManager *mgr, CarrelSession *session, const char *memory,
                            const char *top, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autoptr(CarrelTemplate) tmpl = NULL;
    g_autofree char *xml = NULL;
    char *saved = session->overlay_path;
    gboolean by_screen = FALSE, ok;

    tmpl = carrel_store_template_get(mgr->store, session->template_name, session->template_version,
                                     error);
    session->overlay_path = (char *)top;
    xml = tmpl ? carrel_manager_session_xml(mgr, session, tmpl, error) : NULL;
    session->overlay_path = saved;
    carrel_timings_mark("prepare");
    ok = xml && carrel_manager_restore(mgr, "snapshot", memory, xml, error) &&
         carrel_hypervisor_define(mgr->hv, xml, error);
    carrel_timings_mark("define");
    ok = ok && carrel_manager_wait_agent(mgr, domain, &by_screen, error);
    /* Clock and screen after the reply (core-catchup.c); a guest without agent has neither. */
    if (ok && !by_screen)
        carrel_manager_catchup_restored(mgr, session, FALSE);
    else
        ok = ok && carrel_manager_apply_screen(mgr, session, by_screen, error);
    ok = ok && carrel_manager_egress_attach(mgr, session, FALSE, error);
    carrel_timings_mark("network");
    return ok;
}

gboolean
carrel_manager_define_on(CarrelManager *mgr, CarrelSession *session, const char *top,
                         GError **error)
{
    g_autoptr(CarrelTemplate) tmpl = carrel_store_template_get(mgr->store, session->template_name,
                                                               session->template_version, error);
    g_autofree char *xml = NULL;

    if (top != session->overlay_path) {
        g_free(session->overlay_path);
        session->overlay_path = g_strdup(top);
    }
    xml = tmpl ? carrel_manager_session_xml(mgr, session, tmpl, error) : NULL;
    return xml && carrel_hypervisor_define(mgr->hv, xml, error);
}

static void
intent_add(JsonBuilder *b, const char *member, const char *value)
{
    if (!value)
        return;
    json_builder_set_member_name(b, member);
    json_builder_add_string_value(b, value);
}

/* What a snapshot is about to do, for the next carreld if this one dies (core-recover.c). */
static gboolean
snapshot_intent(CarrelManager *mgr, const CarrelSession *session, const CarrelSnapshot *snap,
                const char *top, gboolean running, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    intent_add(b, "snapshot", snap->id);
    intent_add(b, "name", snap->name);
    intent_add(b, "parent", snap->parent);
    intent_add(b, "memory", snap->memory_path);
    intent_add(b, "layer", snap->layer_path);
    intent_add(b, "top", top);
    json_builder_set_member_name(b, "running");
    json_builder_add_boolean_value(b, running);
    json_builder_set_member_name(b, "created_at");
    json_builder_add_int_value(b, snap->created_at);
    json_builder_end_object(b);
    return carrel_manager_intent_begin(mgr, session->id, "snapshot", b, error);
}

void
carrel_manager_snapshot_discard(const CarrelSession *session, const CarrelSnapshot *snap,
                                const char *top)
{
    g_autofree char *dir = snapshot_dir(session, snap->id);

    (void)carrel_util_remove_tree(dir, NULL);
    if (top)
        (void)g_unlink(top);
}

/*
 * A session whose RAM maps a file (a warm clone under carrel-qemu): its snapshot's RAM goes into a
 * file of the snapshot's own and its save keeps the device state (hypervisor-migstream.c), so that
 * a revert or fork maps that file as a warm clone maps its template's, instead of loading every
 * page. The file lies in the session's folder, not the snapshot's: sessions that map it keep it
 * when the snapshot is deleted, and it goes with the session. Where the split cannot be done the
 * save stays whole (slower to restore, nothing lost). Returns the whole save, to remove once the
 * snapshot is stored with its two new files; NULL when it stays.
 */
static char *
split_memory(CarrelManager *mgr, const CarrelSession *session, CarrelSnapshot *snap)
{
    g_autofree char *dir = NULL;
    g_autofree char *device = NULL;
    g_autofree char *ram_name = NULL;
    g_autofree char *ram = NULL;
    char *whole;

    if (!session->memory_file)
        return NULL;
    dir = g_path_get_dirname(snap->memory_path);
    device = g_build_filename(dir, "memory.dev", NULL);
    ram_name = g_strconcat(snap->id, ".ram", NULL);
    ram = g_build_filename(session->dir, ram_name, NULL);
    if (!carrel_hypervisor_saveimage_split_ram(mgr->hv, snap->memory_path, device, ram, NULL))
        return NULL;
    whole = snap->memory_path;
    snap->memory_path = g_steal_pointer(&device);
    snap->memory_file = g_steal_pointer(&ram);
    return whole;
}

/* A running session: its memory to the file and its disk onto top in one step, QEMU running on.
 * From then on the old disk is quiet: it is frozen as the snapshot's layer. */
static gboolean
snapshot_running(CarrelManager *mgr, CarrelSession *session, CarrelSnapshot *snap, const char *top,
                 GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autofree char *whole = NULL;
    gboolean ok;

    carrel_timings_mark("prepare");
    if (!make_top(top, snap->layer_path, error)) {
        carrel_manager_snapshot_discard(session, snap, top);
        return FALSE;
    }
    carrel_crash_point("snapshot.top");
    carrel_crash_during("snapshot.saving", 300);
    if (!carrel_hypervisor_snapshot_live(mgr->hv, domain, snap->memory_path, top, error)) {
        carrel_manager_snapshot_discard(session, snap, top);
        return FALSE;
    }
    carrel_timings_mark("snapshot");
    carrel_crash_point("snapshot.saved");
    /* Until the snapshot is stored, a recovery finds the whole save where the intent says. */
    whole = split_memory(mgr, session, snap);
    carrel_timings_mark("split");
    /* The guest stood still while its memory was written: its clock is set after the reply. */
    carrel_manager_catchup_later(mgr, session->id, CARREL_CATCHUP_CLOCK);
    ok = carrel_manager_snapshot_keep(mgr, session, snap, top, error);
    if (whole)
        (void)g_unlink(ok ? whole : snap->memory_file);
    return ok;
}

gboolean
carrel_manager_snapshot_keep(CarrelManager *mgr, CarrelSession *session, const CarrelSnapshot *snap,
                             const char *top, GError **error)
{
    return carrel_disk_freeze(snap->layer_path, error) &&
           carrel_store_snapshot_insert(mgr->store, snap, error) &&
           carrel_store_session_set_disk(mgr->store, session->id, top, snap->id, error);
}

gboolean
carrel_manager_snapshot_finish(CarrelManager *mgr, CarrelSession *session,
                               const CarrelSnapshot *snap, const char *top, GError **error)
{
    if (!carrel_disk_freeze(snap->layer_path, error) || !make_top(top, snap->layer_path, error))
        return FALSE;
    carrel_timings_mark("disk");
    if (snap->memory_path) {
        /* Only recovery comes here with memory: a domain gone after its memory was written. */
        if (!carrel_manager_restore_onto(mgr, session, snap->memory_path, top, error))
            return FALSE;
    } else if (!carrel_manager_define_on(mgr, session, top, error)) {
        /* A stopped session keeps its definition: pointed at the new top. */
        return FALSE;
    }
    return carrel_store_snapshot_insert(mgr->store, snap, error) &&
           carrel_store_session_set_disk(mgr->store, session->id, top, snap->id, error);
}

static gboolean
take_snapshot(CarrelManager *mgr, CarrelSession *session, CarrelSnapshot *snap, GError **error)
{
    g_autofree char *dir = snapshot_dir(session, snap->id);
    gboolean running = session->state == CARREL_SESSION_RUNNING;
    g_autofree char *top = top_path_new(session);
    gboolean ok;

    if (!carrel_util_ensure_dir(dir, 0700, error))
        return FALSE;
    if (running)
        snap->memory_path = g_build_filename(dir, "memory.save", NULL);
    snap->layer_path = g_strdup(session->overlay_path);
    if (!snapshot_intent(mgr, session, snap, top, running, error))
        return FALSE;
    carrel_crash_point("snapshot.intent");
    ok = running ? snapshot_running(mgr, session, snap, top, error)
                 : carrel_manager_snapshot_finish(mgr, session, snap, top, error);
    carrel_manager_intent_end(mgr, session->id);
    return ok;
}

static gboolean
check_snapshottable(const CarrelSession *session, GError **error)
{
    if (session->state == CARREL_SESSION_RUNNING || session->state == CARREL_SESSION_STOPPED)
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                "cannot snapshot a session that is %s (running: with memory; stopped: disk only)",
                carrel_session_state_to_string(session->state));
    return FALSE;
}

CarrelSnapshot *
carrel_manager_snapshot_take(CarrelManager *mgr, const char *id_or_name, const char *name,
                             GError **error)
{
    g_autoptr(CarrelSession) session = carrel_store_session_get(mgr->store, id_or_name, error);
    g_autoptr(CarrelSession) fresh = NULL;
    g_autoptr(CarrelSnapshot) snap = carrel_snapshot_new();
    g_autoptr(CarrelSnapshot) taken = NULL;
    g_autoptr(GError) local = NULL;
    gboolean ok = FALSE;
    gint64 started = g_get_monotonic_time();

    if (!session || !carrel_snapshot_check_name(name, error) ||
        !carrel_manager_disk_check(mgr, "taking a snapshot", error))
        return NULL;
    if (!carrel_manager_mark_busy(mgr, session->id, "snapshot", error))
        return NULL;
    fresh = carrel_store_session_get(mgr->store, session->id, &local);
    taken = fresh ? carrel_store_snapshot_get(mgr->store, fresh->id, name, NULL) : NULL;
    if (taken)
        g_set_error(&local, CARREL_ERROR, CARREL_ERROR_EXISTS,
                    "the session has a snapshot '%s' already", name);
    else if (fresh && check_snapshottable(fresh, &local)) {
        snap->id = carrel_util_new_id("p-");
        snap->session_id = g_strdup(fresh->id);
        snap->name = g_strdup(name);
        snap->parent = g_strdup(fresh->head_snapshot);
        snap->created_at = carrel_util_now();
        ok = take_snapshot(mgr, fresh, snap, &local);
    }
    carrel_manager_clear_busy(mgr, session->id);
    if (!ok) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                   "snapshot of '%s': ", session->id);
        return NULL;
    }
    carrel_manager_observe_since(mgr, "carrel_snapshot_duration_seconds", NULL, started);
    return g_steal_pointer(&snap);
}

static guint64
file_size(const char *path)
{
    struct stat st;

    return path && stat(path, &st) == 0 ? (guint64)st.st_size : 0;
}

/* What a sparse file takes on disk. */
static guint64
file_blocks(const char *path)
{
    struct stat st;

    return path && stat(path, &st) == 0 ? (guint64)st.st_blocks * 512 : 0;
}

GPtrArray *
carrel_manager_snapshot_list(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                             GError **error)
{
    g_auto(CarrelDoor) door = {0};
    GPtrArray *list = NULL;

    if (carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_READ, id_or_name, NULL, error))
        list = carrel_store_snapshot_list(mgr->store, door.session->id, error);

    for (guint i = 0; list && i < list->len; i++) {
        CarrelSnapshot *snap = g_ptr_array_index(list, i);
        snap->size_bytes = file_size(snap->layer_path) + file_size(snap->memory_path) +
                           file_blocks(snap->memory_file);
    }
    return list;
}

static gboolean
revert_intent(CarrelManager *mgr, const CarrelSession *session, const CarrelSnapshot *snap,
              const char *top, GError **error)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    intent_add(b, "snapshot", snap->id);
    intent_add(b, "top", top);
    intent_add(b, "old_top", session->overlay_path);
    json_builder_end_object(b);
    return carrel_manager_intent_begin(mgr, session->id, "revert", b, error);
}

gboolean
carrel_manager_revert_finish(CarrelManager *mgr, CarrelSession *session, const CarrelSnapshot *snap,
                             const char *top, const char *old_top, GError **error)
{
    CarrelSessionState next = snap->memory_path ? CARREL_SESSION_RUNNING : CARREL_SESSION_STOPPED;

    if (!make_top(top, snap->layer_path, error))
        return FALSE;
    carrel_timings_mark("disk");
    if (snap->memory_path) {
        /* A snapshot's own RAM file: the session maps it from now on (its later saves are whole
         * again, and load onto it as onto any file of the guest's size). */
        if (snap->memory_file) {
            g_free(session->memory_file);
            session->memory_file = g_strdup(snap->memory_file);
        }
        carrel_crash_during("revert.restoring", 200);
        if (!carrel_manager_restore_onto(mgr, session, snap->memory_path, top, error))
            return FALSE;
        carrel_crash_point("revert.restored");
    } else if (!carrel_manager_define_on(mgr, session, top, error)) {
        return FALSE;
    }
    if (!carrel_store_session_set_disk(mgr->store, session->id, top, snap->id, error) ||
        (snap->memory_file && !carrel_store_session_set_memory_file(mgr->store, session->id,
                                                                    snap->memory_file, error)) ||
        !carrel_store_session_set_state(mgr->store, session->id, next, NULL, error))
        return FALSE;
    /* The top a session runs on is never a snapshot's layer (a snapshot moves the session to a
     * new top), so the old one backs nothing and goes. */
    if (old_top && !g_str_equal(old_top, snap->layer_path) && !g_str_equal(old_top, top))
        (void)g_unlink(old_top);
    return TRUE;
}

/* Off the running domain (if any) and onto a fresh top on the snapshot's layer. */
static gboolean
do_revert(CarrelManager *mgr, CarrelSession *session, const CarrelSnapshot *snap, GError **error)
{
    g_autofree char *domain = carrel_session_domain_name(session->id);
    g_autofree char *old_top = g_strdup(session->overlay_path);
    g_autofree char *top = top_path_new(session);
    g_autoptr(GError) local = NULL;
    gboolean ok;

    if (!revert_intent(mgr, session, snap, top, error))
        return FALSE;
    carrel_crash_point("revert.intent");
    ok = carrel_hypervisor_destroy(mgr->hv, domain, &local) ||
         g_error_matches(local, CARREL_ERROR, CARREL_ERROR_NOT_FOUND);
    g_clear_error(&local);
    ok = ok && (carrel_hypervisor_undefine(mgr->hv, domain, &local) ||
                g_error_matches(local, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
    if (!ok && local)
        g_propagate_error(error, g_steal_pointer(&local));
    if (ok)
        carrel_crash_point("revert.destroyed");
    carrel_timings_mark("stop");
    ok = ok && carrel_manager_revert_finish(mgr, session, snap, top, old_top, error);
    carrel_manager_intent_end(mgr, session->id);
    return ok;
}

static CarrelSession *
revert(CarrelManager *mgr, const char *id_or_name, const char *snapshot, GError **error)
{
    g_autoptr(CarrelSession) session = carrel_store_session_get(mgr->store, id_or_name, error);
    g_autoptr(CarrelSession) fresh = NULL;
    g_autoptr(CarrelSnapshot) snap = NULL;
    g_autoptr(GError) local = NULL;
    gboolean ok = FALSE;
    gint64 started = g_get_monotonic_time();

    if (!session || !carrel_manager_mark_busy(mgr, session->id, "revert", error))
        return NULL;
    fresh = carrel_store_session_get(mgr->store, session->id, &local);
    snap = fresh ? carrel_store_snapshot_get(mgr->store, fresh->id, snapshot, &local) : NULL;
    if (snap && fresh->state == CARREL_SESSION_DESTROYED)
        g_set_error(&local, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "cannot revert a session that is destroyed");
    else if (snap && fresh->state == CARREL_SESSION_HIBERNATED)
        g_set_error(&local, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "cannot revert a hibernated session: resume it first");
    else if (snap)
        ok = do_revert(mgr, fresh, snap, &local);
    if (!ok && snap && !local)
        g_set_error(&local, CARREL_ERROR, CARREL_ERROR_FAILED, "revert failed");
    carrel_manager_clear_busy(mgr, session->id);
    if (!ok) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "revert of '%s': ", session->id);
        return NULL;
    }
    carrel_manager_observe_since(mgr, "carrel_revert_duration_seconds", NULL, started);
    return carrel_store_session_get(mgr->store, session->id, error);
}

gboolean
carrel_manager_unfreeze_top(CarrelManager *mgr, CarrelSession *session, GError **error)
{
    g_autofree char *top = NULL;
    struct stat st;

    if (stat(session->overlay_path, &st) != 0 || (st.st_mode & 0222) != 0)
        return TRUE;
    /* A snapshot cut short froze the top it stood on: stack a writable one on it. */
    if (!(top = new_top(session, session->overlay_path, error)) ||
        !carrel_store_session_set_disk(mgr->store, session->id, top, session->head_snapshot, error))
        return FALSE;
    g_free(session->overlay_path);
    session->overlay_path = g_steal_pointer(&top);
    return TRUE;
}

/* TRUE when some disk still stands on snap's layer: a child snapshot, the session's own disk
 * (its head descends from snap) or forks of the session. */
static gboolean
layer_in_use(CarrelManager *mgr, const CarrelSession *session, const CarrelSnapshot *snap,
             GPtrArray *all)
{
    const char *at = session->head_snapshot;

    for (guint i = 0; i < all->len; i++)
        if (g_strcmp0(((CarrelSnapshot *)g_ptr_array_index(all, i))->parent, snap->id) == 0)
            return TRUE;
    /* Walk the head's ancestry. */
    for (guint guard = 0; at && guard <= all->len; guard++) {
        const char *next = NULL;
        if (g_str_equal(at, snap->id))
            return TRUE;
        for (guint i = 0; i < all->len; i++) {
            CarrelSnapshot *s = g_ptr_array_index(all, i);
            if (g_str_equal(s->id, at))
                next = s->parent;
        }
        at = next;
    }
    return carrel_store_session_count_forks(mgr->store, session->id, NULL) > 0;
}

static gboolean
ram_file_in_use(CarrelManager *mgr, const char *path)
{
    g_autoptr(GError) local = NULL;
    guint users = carrel_store_session_count_memory_users(mgr->store, path, &local);

    /* Unknown counts as in use: a file left is a leak, a file gone a session that cannot run. */
    return users > 0 || local != NULL;
}

static gboolean
delete_snapshot(CarrelManager *mgr, const CarrelSession *session, const CarrelSnapshot *snap,
                gboolean *ret_layer_kept, GError **error)
{
    g_autoptr(GPtrArray) all = carrel_store_snapshot_list(mgr->store, session->id, error);
    g_autofree char *dir = snapshot_dir(session, snap->id);

    if (!all)
        return FALSE;
    *ret_layer_kept = layer_in_use(mgr, session, snap, all);
    if (!carrel_store_snapshot_delete(mgr->store, snap, error))
        return FALSE;
    /* The memory goes; the layer only when no disk stands on it (else it stays, unlisted, as
     * part of the chains that need it); the RAM file only when no session maps it (else it goes
     * with the session's folder). */
    (void)carrel_util_remove_tree(dir, NULL);
    if (snap->memory_file && !ram_file_in_use(mgr, snap->memory_file))
        (void)g_unlink(snap->memory_file);
    if (!*ret_layer_kept)
        (void)g_unlink(snap->layer_path);
    return TRUE;
}

static gboolean
delete_named(CarrelManager *mgr, const char *id_or_name, const char *snapshot,
             gboolean *ret_layer_kept, GError **error)
{
    g_autoptr(CarrelSession) session = carrel_store_session_get(mgr->store, id_or_name, error);
    g_autoptr(CarrelSession) fresh = NULL;
    g_autoptr(CarrelSnapshot) snap = NULL;
    g_autoptr(GError) local = NULL;
    gboolean ok = FALSE, kept = FALSE;

    if (!session || !carrel_manager_mark_busy(mgr, session->id, "snapshot delete", error))
        return FALSE;
    fresh = carrel_store_session_get(mgr->store, session->id, &local);
    snap = fresh ? carrel_store_snapshot_get(mgr->store, fresh->id, snapshot, &local) : NULL;
    if (snap)
        ok = delete_snapshot(mgr, fresh, snap, &kept, &local);
    carrel_manager_clear_busy(mgr, session->id);
    if (!ok) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                   "deleting a snapshot of '%s': ", session->id);
        return FALSE;
    }
    if (ret_layer_kept)
        *ret_layer_kept = kept;
    return TRUE;
}

static JsonNode *
snapshot_params(const char *name)
{
    JsonNode *node = carrel_conf_new_object_node();

    json_object_set_string_member(json_node_get_object(node), "snapshot", name ? name : "");
    return node;
}

CarrelSnapshot *
carrel_manager_snapshot_create(CarrelManager *mgr, const CarrelPrincipal *who,
                               const char *id_or_name, const char *name, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    CarrelSnapshot *snap;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SNAPSHOT_CREATE, id_or_name,
                           snapshot_params(name), error))
        return NULL;
    snap = carrel_manager_snapshot_take(mgr, door.session_id, name, &local);
    if (snap)
        snap->timings = json_node_copy(carrel_door_timings(&door));
    return carrel_door_finish_full(&door, snap, (GDestroyNotify)carrel_snapshot_free, &local,
                                   error);
}

CarrelSession *
carrel_manager_snapshot_revert(CarrelManager *mgr, const CarrelPrincipal *who,
                               const char *id_or_name, const char *snapshot, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    CarrelSession *reverted;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SNAPSHOT_REVERT, id_or_name,
                           snapshot_params(snapshot), error))
        return NULL;
    reverted = revert(mgr, door.session_id, snapshot, &local);
    if (reverted)
        reverted->timings = json_node_copy(carrel_door_timings(&door));
    return carrel_door_finish_full(&door, reverted, (GDestroyNotify)carrel_session_free, &local,
                                   error);
}

gboolean
carrel_manager_snapshot_delete(CarrelManager *mgr, const CarrelPrincipal *who,
                               const char *id_or_name, const char *snapshot,
                               gboolean *ret_layer_kept, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SNAPSHOT_DELETE, id_or_name,
                           snapshot_params(snapshot), error))
        return FALSE;
    return carrel_door_finish_ok(
        &door, delete_named(mgr, door.session_id, snapshot, ret_layer_kept, &local), &local, error);
}
