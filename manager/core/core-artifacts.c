/*
 * Artifacts: files taken out of a session. A running guest packs them with its own tar through
 * the agent (no appliance: ~1 s instead of ~20 s under TCG); a guest that is off, crashed or
 * paused is read with libguestfs, read-only, from a disk QEMU is not writing. Either way the
 * bytes pass through the archive sink, which never follows or creates a guest's links and never
 * writes outside the extraction's folder.
 */
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "archive/archive.h"
#include "core/core-priv.h"
#include "disk/disk.h"

/* Where extractions live: artifacts/<x-id>/files/... and artifacts/<x-id>/manifest.json. */
static char *
extraction_dir(CarrelManager *mgr, const char *id)
{
    return g_build_filename(mgr->state_dir, "artifacts", id, NULL);
}

void
carrel_manager_remove_extraction_leftovers(CarrelManager *mgr)
{
    g_autofree char *root = g_build_filename(mgr->state_dir, "artifacts", NULL);
    g_autoptr(GDir) dir = g_dir_open(root, 0, NULL);
    const char *name;

    /* A folder without its row is an extraction cut short: the row is written last. */
    while (dir && (name = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename(root, name, NULL);
        gboolean exists = TRUE;
        if (g_str_has_prefix(name, "x-") &&
            carrel_store_extraction_exists(mgr->store, name, &exists, NULL) && !exists)
            (void)carrel_util_remove_tree(path, NULL);
    }
}

/* A path asked for, with the reason it yielded nothing. */
static void
add_missing(CarrelExtraction *x, const char *path, const char *why)
{
    JsonArray *array;
    JsonObject *item = json_object_new();

    if (!x->missing)
        x->missing = json_node_init_array(json_node_alloc(), json_array_new());
    array = json_node_get_array(x->missing);
    json_object_set_string_member(item, "path", path);
    json_object_set_string_member(item, "error", why);
    json_array_add_object_element(array, item);
}

/* ---- from a running guest, through the agent ---- */

static gboolean
guest_tar(CarrelManager *mgr, const char *domain, const char *guest_tar_path, char **paths,
          char **ret_stderr, GError **error)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
    CarrelGuestExec run = {.timeout_s = 600, .max_output = 64 * 1024};
    g_auto(CarrelExecResult) result = {0};
    GBytes *err;

    g_ptr_array_add(argv, g_strdup("/bin/tar"));
    g_ptr_array_add(argv, g_strdup("--create"));
    g_ptr_array_add(argv, g_strconcat("--file=", guest_tar_path, NULL));
    g_ptr_array_add(argv, g_strdup("--numeric-owner"));
    g_ptr_array_add(argv, g_strdup("--directory=/"));
    /* "./" keeps a name that starts with '-' from reading as an option. */
    for (guint i = 0; paths[i]; i++)
        g_ptr_array_add(argv, g_strconcat(".", paths[i], NULL));
    g_ptr_array_add(argv, NULL);
    run.argv = (const char *const *)argv->pdata;
    if (!carrel_hypervisor_agent_exec(mgr->hv, domain, &run, &result, error))
        return FALSE;
    err = result.stderr_bytes;
    *ret_stderr = carrel_util_clean_text(err ? g_bytes_get_data(err, NULL) : "",
                                         err ? g_bytes_get_size(err) : 0, 4096);
    /* 2 is tar's "some files could not be read": the rest is in the archive. */
    if (result.timed_out || (result.exit_code != 0 && result.exit_code != 2)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "tar in the guest failed (exit %d%s): %s", result.exit_code,
                    result.timed_out ? ", timed out" : "", *ret_stderr);
        return FALSE;
    }
    return TRUE;
}

/* The apparent size du gave for path ("SIZE\tPATH" lines), or FALSE when it gave none. */
static gboolean
du_size_of(const char *du_out, const char *path, guint64 *ret_size)
{
    g_auto(GStrv) lines = g_strsplit(du_out, "\n", -1);

    for (guint i = 0; lines[i]; i++) {
        const char *tab = strchr(lines[i], '\t');
        g_autofree char *number = tab ? g_strndup(lines[i], (gsize)(tab - lines[i])) : NULL;
        if (tab && g_str_equal(tab + 1, path) &&
            g_ascii_string_to_unsigned(number, 10, 0, G_MAXUINT64, ret_size, NULL))
            return TRUE;
    }
    return FALSE;
}

/*
 * Sizes the paths in the guest before its tar packs them (du, apparent sizes: a sparse file
 * counts whole), so a path over what the limit leaves is refused before anything is written,
 * in the guest's /tmp (whose growth is the host's disk) or on the host. A guest without GNU du
 * skips this; the host's read of the tar stays bounded either way.
 */
static gboolean
presize_by_agent(CarrelManager *mgr, const char *domain, char **paths, CarrelArchiveSink *sink,
                 GError **error)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    CarrelGuestExec run = {.timeout_s = 120, .max_output = 64 * 1024};
    g_auto(CarrelExecResult) result = {0};
    g_autofree char *out = NULL;
    guint64 size, total = 0;

    g_ptr_array_add(argv, (gpointer) "/usr/bin/du");
    g_ptr_array_add(argv, (gpointer) "--apparent-size");
    g_ptr_array_add(argv, (gpointer) "--block-size=1");
    g_ptr_array_add(argv, (gpointer) "--summarize");
    g_ptr_array_add(argv, (gpointer) "--");
    for (guint i = 0; paths[i]; i++)
        g_ptr_array_add(argv, paths[i]);
    g_ptr_array_add(argv, NULL);
    run.argv = (const char *const *)argv->pdata;
    if (!carrel_hypervisor_agent_exec(mgr->hv, domain, &run, &result, NULL) || !result.stdout_bytes)
        return TRUE;
    out = g_strndup(g_bytes_get_data(result.stdout_bytes, NULL),
                    g_bytes_get_size(result.stdout_bytes));
    for (guint i = 0; paths[i]; i++) {
        if (!du_size_of(out, paths[i], &size))
            continue;
        if (!carrel_archive_sink_admit(sink, paths[i], size, 0, error))
            return FALSE;
        total += size;
    }
    return carrel_archive_sink_admit(sink, "the paths asked for", total, 0, error);
}

/* Reads the guest's tar into a host file, bounded, then removes it in the guest. */
static gboolean
fetch_guest_tar(CarrelManager *mgr, const char *domain, const char *guest_tar_path,
                const char *host_tar, guint64 max, GError **error)
{
    const char *rm[] = {"/bin/rm", "-f", guest_tar_path, NULL};
    CarrelGuestExec run_rm = {.argv = rm, .timeout_s = 30, .max_output = 4096};
    int fd = g_open(host_tar, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    gboolean ok;

    if (fd < 0) {
        int saved = errno;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "creating %s: %s", host_tar,
                    g_strerror(saved));
        return FALSE;
    }
    ok = carrel_hypervisor_file_read_fd(mgr->hv, domain, guest_tar_path, fd, max, NULL, error);
    close(fd);
    (void)carrel_hypervisor_agent_exec(mgr->hv, domain, &run_rm, NULL, NULL);
    return ok;
}

/* tar's complaint about one path ("tar: ./PATH: Cannot stat: ..."), or a plain reason. */
static char *
tar_reason(const char *tar_stderr, const char *path)
{
    g_autofree char *needle = g_strconcat(" .", path, ": ", NULL);
    g_auto(GStrv) lines = g_strsplit(tar_stderr, "; ", -1);

    for (guint i = 0; lines[i]; i++) {
        const char *at = strstr(lines[i], needle);
        if (at)
            return g_strdup(at + strlen(needle));
    }
    return g_strdup("not found in the guest");
}

/* Paths that nothing in the manifest came from. */
static void
note_missing(CarrelExtraction *x, GPtrArray *entries, const char *tar_stderr)
{
    for (guint i = 0; x->paths[i]; i++) {
        const char *path = x->paths[i];
        gsize len = strlen(path);
        gboolean found = FALSE;
        for (guint j = 0; !found && j < entries->len; j++) {
            CarrelArchiveEntry *e = g_ptr_array_index(entries, j);
            found = g_str_has_prefix(e->guest_path, path) &&
                    (e->guest_path[len] == '\0' || e->guest_path[len] == '/');
        }
        if (!found) {
            g_autofree char *why = tar_reason(tar_stderr, path);
            add_missing(x, path, why);
        }
    }
}

static gboolean
extract_by_agent(CarrelManager *mgr, const char *domain, CarrelExtraction *x,
                 CarrelArchiveSink *sink, const CarrelArchiveLimits *limits, GError **error)
{
    g_autofree char *guest_tar_path = g_strdup_printf("/tmp/carrel-%s.tar", x->id);
    g_autofree char *host_tar = g_build_filename(x->dir, "transfer.tar", NULL);
    g_autofree char *tar_stderr = NULL;
    /* Headers and padding on top of the data: 1.5 KiB per entry is generous. */
    guint64 max = limits->max_bytes + (guint64)limits->max_entries * 1536 + 1024 * 1024;
    gboolean ok;

    if (!presize_by_agent(mgr, domain, x->paths, sink, error) ||
        !guest_tar(mgr, domain, guest_tar_path, x->paths, &tar_stderr, error) ||
        !fetch_guest_tar(mgr, domain, guest_tar_path, host_tar, max, error))
        return FALSE;
    ok = carrel_archive_sink_add_tar(sink, host_tar, "/", error);
    (void)g_unlink(host_tar);
    if (ok)
        note_missing(x, carrel_archive_sink_entries(sink), tar_stderr);
    return ok;
}

/* ---- from the disk, through libguestfs ---- */

/*
 * A directory's files are sized in the guest's disk before any of them is copied: each one, then
 * all of them, must fit what the sink may still take. Sizes are apparent sizes, so a sparse file
 * counts whole and never lands on the host.
 */
static gboolean
admit_dir(CarrelGuestfs *gfs, CarrelArchiveSink *sink, const char *dir, const char *scratch_dir,
          GError **error)
{
    g_autoptr(GHashTable) tree = carrel_guestfs_walk(gfs, dir, scratch_dir, error);
    GHashTableIter iter;
    gpointer key, value;
    guint64 total = 0;

    if (!tree)
        return FALSE;
    g_hash_table_iter_init(&iter, tree);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        const CarrelGuestfsStat *st = value;
        g_autofree char *file = NULL;
        if (st->type != CARREL_DISK_FILE_REGULAR)
            continue;
        file = g_build_filename(dir, key, NULL);
        if (!carrel_archive_sink_admit(sink, file, st->size, 1, error))
            return FALSE;
        total += st->size;
    }
    return carrel_archive_sink_admit(sink, dir, total, g_hash_table_size(tree) + 1, error);
}

static gboolean
take_one(CarrelGuestfs *gfs, CarrelArchiveSink *sink, const char *path, const char *scratch_dir,
         GError **error)
{
    g_autofree char *scratch = g_build_filename(scratch_dir, "transfer.part", NULL);
    CarrelGuestfsStat st;
    g_autofree char *target = NULL;
    gboolean ok;

    if (!carrel_guestfs_check_parents(gfs, "/", path, error) ||
        !carrel_guestfs_lstat(gfs, path, &st, error))
        return FALSE;
    switch (st.type) {
    case CARREL_DISK_FILE_DIR:
        ok = admit_dir(gfs, sink, path, scratch_dir, error) &&
             carrel_guestfs_tar_out(gfs, path, scratch, error) &&
             carrel_archive_sink_add_tar(sink, scratch, path, error);
        (void)g_unlink(scratch);
        return ok;
    case CARREL_DISK_FILE_REGULAR:
        /* Sized before the copy: a file over the limit never leaves the guest's disk. */
        ok = carrel_archive_sink_admit(sink, path, st.size, 1, error) &&
             carrel_guestfs_download(gfs, path, scratch, error) &&
             carrel_archive_sink_add_file(sink, path, scratch, st.mode, st.uid, st.gid, st.mtime,
                                          error);
        (void)g_unlink(scratch);
        return ok;
    case CARREL_DISK_FILE_SYMLINK:
        target = carrel_guestfs_readlink(gfs, path, error);
        return target &&
               carrel_archive_sink_add_record(sink, path, CARREL_ARCHIVE_TYPE_SYMLINK, target,
                                              st.mode, st.uid, st.gid, st.mtime, error);
    case CARREL_DISK_FILE_OTHER:
        break;
    }
    return carrel_archive_sink_add_record(sink, path, CARREL_ARCHIVE_TYPE_OTHER, NULL, st.mode,
                                          st.uid, st.gid, st.mtime, error);
}

/* One appliance for every path: the exit path costs one launch whatever it collects. */
static gboolean
extract_by_disk(CarrelManager *mgr, const CarrelSession *session, CarrelExtraction *x,
                CarrelArchiveSink *sink, GError **error)
{
    CarrelGuestfsDisk disk = {session->overlay_path, "qcow2", "/"};
    g_autoptr(CarrelGuestfs) gfs =
        carrel_guestfs_open(&disk, 1, FALSE, mgr->accel == CARREL_ACCEL_TCG, error);

    if (!gfs)
        return FALSE;
    for (guint i = 0; x->paths[i]; i++) {
        g_autoptr(GError) local = NULL;
        gboolean ok = take_one(gfs, sink, x->paths[i], x->dir, &local);
        if (ok)
            continue;
        /* A limit stops the extraction; a path that is absent or unsafe is only noted. */
        if (g_error_matches(local, CARREL_ERROR, CARREL_ERROR_LIMIT) ||
            g_error_matches(local, CARREL_ERROR, CARREL_ERROR_DISK)) {
            g_propagate_error(error, g_steal_pointer(&local));
            return FALSE;
        }
        add_missing(x, x->paths[i], local->message);
    }
    return TRUE;
}

/* ---- records ---- */

static CarrelFileType
file_type_of(CarrelArchiveType type)
{
    switch (type) {
    case CARREL_ARCHIVE_TYPE_FILE:
        return CARREL_FILE_REGULAR;
    case CARREL_ARCHIVE_TYPE_DIR:
        return CARREL_FILE_DIR;
    case CARREL_ARCHIVE_TYPE_SYMLINK:
        return CARREL_FILE_SYMLINK;
    case CARREL_ARCHIVE_TYPE_HARDLINK:
        return CARREL_FILE_HARDLINK;
    case CARREL_ARCHIVE_TYPE_OTHER:
    case CARREL_ARCHIVE_TYPE_LAST:
        break;
    }
    return CARREL_FILE_OTHER;
}

static void
add_artifacts(CarrelExtraction *x, GPtrArray *entries)
{
    for (guint i = 0; i < entries->len; i++) {
        CarrelArchiveEntry *e = g_ptr_array_index(entries, i);
        CarrelArtifact *a = carrel_artifact_new();

        a->id = carrel_util_new_id("a-");
        a->extraction_id = g_strdup(x->id);
        a->session_id = g_strdup(x->session_id);
        a->guest_path = g_strdup(e->guest_path);
        a->path = g_strdup(e->path);
        a->type = file_type_of(e->type);
        a->size = e->size;
        a->mode = e->mode;
        a->uid = e->uid;
        a->gid = e->gid;
        a->mtime = e->mtime;
        a->sha256 = g_strdup(e->sha256);
        a->link_target = g_strdup(e->link_target);
        a->skipped = g_strdup(e->skipped);
        a->created_at = x->created_at;
        g_ptr_array_add(x->artifacts, a);
        if (a->type == CARREL_FILE_REGULAR && a->path)
            x->bytes += a->size;
    }
    x->count = entries->len;
}

static void
write_manifest(const CarrelExtraction *x)
{
    g_autoptr(JsonNode) node = carrel_extraction_to_json(x);
    g_autofree char *text = json_to_string(node, TRUE);
    g_autofree char *path = g_build_filename(x->dir, "manifest.json", NULL);

    /* The store holds the same; the file makes the folder self-describing for an operator. */
    (void)g_file_set_contents_full(path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, NULL);
}

static CarrelExtraction *
extraction_new(CarrelManager *mgr, const CarrelSession *session, char **paths, const char *reason,
               gboolean by_agent)
{
    CarrelExtraction *x = carrel_extraction_new();

    x->id = carrel_util_new_id("x-");
    x->session_id = g_strdup(session->id);
    x->reason = g_strdup(reason);
    x->source = g_strdup(by_agent ? "agent" : "disk");
    x->dir = extraction_dir(mgr, x->id);
    x->paths = g_strdupv(paths);
    x->created_at = carrel_util_now();
    return x;
}

CarrelExtraction *
carrel_manager_collect(CarrelManager *mgr, const CarrelSession *session, char **paths,
                       guint64 max_bytes, guint max_files, const char *reason, gboolean by_agent,
                       GError **error)
{
    g_autoptr(CarrelExtraction) x = extraction_new(mgr, session, paths, reason, by_agent);
    g_autofree char *files = g_build_filename(x->dir, "files", NULL);
    g_autofree char *domain = carrel_session_domain_name(session->id);
    CarrelArchiveLimits limits = {max_bytes, max_files};
    g_autoptr(CarrelArchiveSink) sink = NULL;
    g_autoptr(GError) local = NULL;
    gint64 t0 = g_get_monotonic_time();
    gboolean ok;

    if (!carrel_util_ensure_dir(x->dir, 0700, error) || !carrel_util_ensure_dir(files, 0700, error))
        return NULL;
    sink = carrel_archive_sink_new(files, &limits, error);
    if (!sink)
        return NULL;
    carrel_crash_during("extract.copying", 300);
    ok = by_agent ? extract_by_agent(mgr, domain, x, sink, &limits, &local)
                  : extract_by_disk(mgr, session, x, sink, &local);
    /* Nothing is lost: what came out before a limit or a failure stays recorded. */
    if (!ok)
        x->error = g_strdup(local->message);
    add_artifacts(x, carrel_archive_sink_entries(sink));
    x->duration_ms = (g_get_monotonic_time() - t0) / 1000;
    write_manifest(x);
    carrel_crash_point("extract.copied");
    if (!carrel_store_extraction_insert(mgr->store, x, error))
        return NULL;
    return g_steal_pointer(&x);
}

static JsonNode *
extraction_params(const CarrelExtractRequest *req)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "paths");
    json_builder_begin_array(b);
    for (guint i = 0; req->paths[i]; i++)
        json_builder_add_string_value(b, req->paths[i]);
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static JsonNode *
extraction_summary(const CarrelExtraction *x)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "extraction");
    json_builder_add_string_value(b, x->id);
    json_builder_set_member_name(b, "source");
    json_builder_add_string_value(b, x->source);
    json_builder_set_member_name(b, "count");
    json_builder_add_int_value(b, x->count);
    json_builder_set_member_name(b, "bytes");
    json_builder_add_int_value(b, (gint64)x->bytes);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static CarrelExtraction *
extract(CarrelManager *mgr, const char *id_or_name, const CarrelExtractRequest *req,
        const CarrelPrincipal *actor, GError **error)
{
    g_autoptr(CarrelSession) session = carrel_store_session_get(mgr->store, id_or_name, error);
    g_autoptr(CarrelSession) fresh = NULL;
    g_autoptr(JsonNode) params = NULL;
    g_autoptr(JsonNode) summary = NULL;
    CarrelExtraction *x = NULL;
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(GError) local = NULL;

    if (!session || !carrel_manager_mark_busy(mgr, session->id, "extract", error))
        return NULL;
    /* While it is marked busy no verb can stop or destroy the session half-way through. */
    fresh = carrel_store_session_get(mgr->store, session->id, &local);
    if (fresh && carrel_manager_check_has_disk(fresh, "extract from", &local))
        x = carrel_manager_collect(mgr, fresh, req->paths, req->max_bytes, req->max_files,
                                   "request", fresh->state == CARREL_SESSION_RUNNING, &local);
    carrel_manager_clear_busy(mgr, session->id);
    params = extraction_params(req);
    summary = x ? extraction_summary(x) : NULL;
    if (!carrel_manager_record_outcome(mgr, session->id, actor, "artifacts", "extract", params,
                                       summary, &local, t0, NULL, x != NULL))
        g_clear_pointer(&x, carrel_extraction_free);
    if (!x) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                   "extracting from '%s': ", session->id);
        return NULL;
    }
    return x;
}

CarrelExtraction *
carrel_manager_session_extract(CarrelManager *mgr, const CarrelPrincipal *who,
                               const char *id_or_name, const CarrelExtractRequest *req,
                               GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_EXTRACT, id_or_name,
                           extraction_params(req), error))
        return NULL;
    return carrel_door_finish(&door, extract(mgr, door.session_id, req, who, &local), &local,
                              error);
}

GPtrArray *
carrel_manager_session_extractions(CarrelManager *mgr, const CarrelPrincipal *who,
                                   const char *id_or_name, GError **error)
{
    g_auto(CarrelDoor) door = {0};

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_READ, id_or_name, NULL, error))
        return NULL;
    return carrel_store_extraction_list(mgr->store, door.session->id, error);
}

CarrelArtifact *
carrel_manager_artifact_get(CarrelManager *mgr, const CarrelPrincipal *who, const char *id,
                            char **ret_host_path, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(CarrelArtifact) a = carrel_store_artifact_get(mgr->store, id, error);
    g_autofree char *dir = NULL;

    /* An artifact is its session's: whoever may not see that session may not see it. */
    if (!a ||
        !carrel_door_enter(&door, mgr, who, CARREL_OP_ARTIFACT_READ, a->session_id, NULL, error))
        return NULL;
    if (ret_host_path && a->type == CARREL_FILE_REGULAR && a->path) {
        dir = extraction_dir(mgr, a->extraction_id);
        *ret_host_path = g_build_filename(dir, "files", a->path, NULL);
    }
    return g_steal_pointer(&a);
}

gboolean
carrel_manager_check_has_disk(const CarrelSession *session, const char *what, GError **error)
{
    switch (session->state) {
    case CARREL_SESSION_RUNNING:
    case CARREL_SESSION_PAUSED:
    case CARREL_SESSION_HIBERNATED:
    case CARREL_SESSION_STOPPED:
    case CARREL_SESSION_CRASHED:
        return TRUE;
    case CARREL_SESSION_CREATING:
    case CARREL_SESSION_DESTROYED:
    case CARREL_SESSION_LAST:
        break;
    }
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "cannot %s a session that is %s",
                what, carrel_session_state_to_string(session->state));
    return FALSE;
}
