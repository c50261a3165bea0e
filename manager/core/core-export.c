/*
 * core: evidence bundles. An export gathers what carrel kept of one session (its record, its
 * audit rows, timeline, kept screenshots, artifacts, egress log and policy) into a tar signed
 * with the host key (evidence module), spooled under the state dir for the caller to send.
 * It reads only what the store and the state dir hold, so it works in any state, a destroyed
 * session's included, as long as its records are kept.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "carrel-config.h"
#include "core/core-priv.h"
#include "record/record.h"

#define HOST_KEY_FILE "host-key.pem"
#define PAGE 1000

CarrelEvidenceKey *
carrel_manager_load_host_key(const char *state_dir, GError **error)
{
    g_autofree char *path = g_build_filename(state_dir, HOST_KEY_FILE, NULL);

    return carrel_evidence_key_load_or_create(path, error);
}

const char *
carrel_manager_get_host_key(CarrelManager *mgr)
{
    return carrel_evidence_key_public(mgr->host_key);
}

const char *
carrel_manager_get_host_fingerprint(CarrelManager *mgr)
{
    return carrel_evidence_key_fingerprint(mgr->host_key);
}

static void
append_line(GString *out, JsonNode *node)
{
    g_autofree char *line = json_to_string(node, FALSE);

    g_string_append(out, line);
    g_string_append_c(out, '\n');
}

/* Every audit row of the session, oldest first, as the chain holds them. */
static char *
audit_rows(CarrelManager *mgr, const char *session_id, GError **error)
{
    g_autoptr(GPtrArray) all =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_audit_record_free);
    CarrelAuditFilter filter = {.session_id = session_id, .limit = PAGE};

    for (;;) {
        GPtrArray *page = carrel_store_audit_list(mgr->store, &filter, error);
        guint len;

        if (!page)
            return NULL;
        len = page->len;
        if (len > 0)
            filter.after_seq = ((CarrelAuditRecord *)g_ptr_array_index(page, len - 1))->seq;
        g_ptr_array_extend_and_steal(all, page);
        if (len < PAGE)
            break;
    }
    return carrel_evidence_audit_to_jsonl(all);
}

static char *
timeline_lines(CarrelManager *mgr, const char *session_id, GError **error)
{
    g_autoptr(GString) out = g_string_new(NULL);
    gint64 after = 0;

    for (;;) {
        g_autoptr(GPtrArray) page =
            carrel_store_event_list(mgr->store, session_id, after, PAGE, error);

        if (!page)
            return NULL;
        for (guint i = 0; i < page->len; i++) {
            const CarrelEvent *event = g_ptr_array_index(page, i);
            g_autoptr(JsonNode) node = carrel_event_to_json(event);

            append_line(out, node);
            after = event->seq;
        }
        if (page->len < PAGE)
            break;
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

static char *
egress_lines(CarrelManager *mgr, const char *session_id, GError **error)
{
    g_autoptr(GString) out = g_string_new(NULL);
    gint64 after = 0;

    for (;;) {
        g_autoptr(GPtrArray) page =
            carrel_store_egress_list(mgr->store, session_id, after, PAGE, error);

        if (!page)
            return NULL;
        for (guint i = 0; i < page->len; i++) {
            const CarrelEgressRecord *rec = g_ptr_array_index(page, i);
            g_autoptr(JsonNode) node = carrel_egress_record_to_json(rec);

            append_line(out, node);
            after = rec->seq;
        }
        if (page->len < PAGE)
            break;
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

static gboolean
add_text(CarrelEvidenceWriter *w, const char *name, const char *kind, const char *text,
         GError **error)
{
    return text && carrel_evidence_writer_add_bytes(w, name, kind, text, strlen(text), error);
}

static gboolean
add_json(CarrelEvidenceWriter *w, const char *name, const char *kind, JsonNode *node,
         GError **error)
{
    g_autofree char *text = json_to_string(node, TRUE);
    g_autofree char *line = g_strconcat(text, "\n", NULL);

    return add_text(w, name, kind, line, error);
}

static int
compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The kept screenshots (sessions/<id>/screenshots), by name; none when the folder is gone. */
static gboolean
add_screenshots(CarrelEvidenceWriter *w, const CarrelSession *session, GError **error)
{
    g_autofree char *dir = g_build_filename(session->dir, "screenshots", NULL);
    g_autoptr(GDir) d = session->dir ? g_dir_open(dir, 0, NULL) : NULL;
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    const char *entry;

    while (d && (entry = g_dir_read_name(d)))
        if (carrel_manager_shot_name_ok(entry))
            g_ptr_array_add(names, g_strdup(entry));
    g_ptr_array_sort(names, compare_names);
    for (guint i = 0; i < names->len; i++) {
        const char *name = g_ptr_array_index(names, i);
        g_autofree char *path = g_build_filename(dir, name, NULL);
        g_autofree char *member = g_strconcat("screenshots/", name, NULL);
        g_autoptr(GError) local = NULL;

        /* Pruned between the listing and now: it is simply no longer kept. */
        if (!carrel_evidence_writer_add_file(w, member, "screenshot", path, &local) &&
            !g_error_matches(local, CARREL_ERROR, CARREL_ERROR_NOT_FOUND)) {
            g_propagate_error(error, g_steal_pointer(&local));
            return FALSE;
        }
    }
    return TRUE;
}

/*
 * The screen recording: recording.json (segments with their sha256 and the events index, as
 * GET /v1/sessions/{id}/recording says) and each finished segment as recording/<name>. The one
 * being written is left out: it is not a whole file yet.
 */
static gboolean
add_recording(CarrelManager *mgr, CarrelEvidenceWriter *w, const CarrelSession *session,
              GError **error)
{
    g_autofree char *dir = NULL;
    g_autoptr(CarrelRecordIndex) index = NULL;
    g_autoptr(JsonNode) node = NULL;

    if (!session->dir)
        return TRUE;
    dir = carrel_manager_recording_dir(session);
    if (!(index = carrel_record_index_load(dir, error)))
        return FALSE;
    if (index->segments->len == 0 && index->dropped == 0)
        return TRUE;
    for (guint i = 0; i < index->segments->len; i++) {
        const CarrelRecordSegment *seg = g_ptr_array_index(index->segments, i);
        g_autofree char *path = NULL;
        g_autofree char *member = NULL;
        g_autoptr(GError) local = NULL;

        if (seg->open)
            continue;
        path = g_build_filename(dir, seg->name, NULL);
        member = g_strconcat("recording/", seg->name, NULL);
        /* Dropped for the budget between the listing and now: no longer kept. */
        if (!carrel_evidence_writer_add_file(w, member, "recording", path, &local) &&
            !g_error_matches(local, CARREL_ERROR, CARREL_ERROR_NOT_FOUND)) {
            g_propagate_error(error, g_steal_pointer(&local));
            return FALSE;
        }
    }
    node = carrel_manager_recording_to_json(mgr, session, error);
    return node && add_json(w, "recording.json", "recording", node, error);
}

/*
 * Artifacts: artifacts.json (every extraction with its records: guest paths, modes, sha256 as
 * computed when they were taken) and the bytes of each regular file as artifacts/<x-id>/<a-id>,
 * so no guest-chosen name becomes a member name.
 */
static gboolean
add_artifacts(CarrelManager *mgr, CarrelEvidenceWriter *w, const char *session_id, GError **error)
{
    g_autoptr(GPtrArray) xs = carrel_store_extraction_list(mgr->store, session_id, error);
    g_autoptr(JsonArray) list = json_array_new();
    g_autoptr(JsonNode) node = json_node_new(JSON_NODE_ARRAY);

    if (!xs)
        return FALSE;
    for (guint i = 0; i < xs->len; i++) {
        const CarrelExtraction *x = g_ptr_array_index(xs, i);

        json_array_add_element(list, carrel_extraction_to_json(x));
        for (guint j = 0; x->artifacts && j < x->artifacts->len; j++) {
            const CarrelArtifact *a = g_ptr_array_index(x->artifacts, j);
            g_autofree char *path = NULL;
            g_autofree char *member = NULL;
            g_autoptr(GError) local = NULL;

            if (a->type != CARREL_FILE_REGULAR || !a->path)
                continue;
            path = g_build_filename(mgr->state_dir, "artifacts", x->id, "files", a->path, NULL);
            member = g_strdup_printf("artifacts/%s/%s", x->id, a->id);
            if (!carrel_evidence_writer_add_file(w, member, "artifact", path, &local) &&
                !g_error_matches(local, CARREL_ERROR, CARREL_ERROR_NOT_FOUND)) {
                g_propagate_error(error, g_steal_pointer(&local));
                return FALSE;
            }
        }
    }
    json_node_set_array(node, list);
    return xs->len == 0 || add_json(w, "artifacts.json", "artifacts", node, error);
}

static gboolean
add_policy(CarrelManager *mgr, CarrelEvidenceWriter *w, const CarrelSession *session,
           GError **error)
{
    const CarrelPolicy *policy = carrel_policy_set_lookup(
        mgr->policies, session->policy ? session->policy : CARREL_POLICY_DEFAULT);
    g_autoptr(JsonNode) node = NULL;

    /* A policy no longer loaded is not guessed at: the manifest still names it. */
    if (!policy)
        return TRUE;
    node = carrel_policy_to_json(policy);
    return add_json(w, "policy.json", "policy", node, error);
}

static gboolean
add_contents(CarrelManager *mgr, CarrelEvidenceWriter *w, const CarrelSession *session,
             GError **error)
{
    g_autoptr(JsonNode) record = carrel_session_to_json(session);
    g_autofree char *audit = NULL;
    g_autofree char *timeline = NULL;
    g_autofree char *egress = NULL;

    if (!add_json(w, "session.json", "session", record, error) ||
        !(audit = audit_rows(mgr, session->id, error)) ||
        !add_text(w, CARREL_EVIDENCE_AUDIT, "audit", audit, error) ||
        !(timeline = timeline_lines(mgr, session->id, error)) ||
        !add_text(w, "timeline.jsonl", "timeline", timeline, error) ||
        !add_screenshots(w, session, error) || !add_artifacts(mgr, w, session->id, error) ||
        !add_recording(mgr, w, session, error) || !(egress = egress_lines(mgr, session->id, error)))
        return FALSE;
    if (*egress && !add_text(w, "egress.jsonl", "egress", egress, error))
        return FALSE;
    return add_policy(mgr, w, session, error);
}

static CarrelEvidenceManifest *
manifest_for(const CarrelSession *session, const CarrelPrincipal *who, gint64 now)
{
    CarrelEvidenceManifest *m = carrel_evidence_manifest_new();

    m->session_id = g_strdup(session->id);
    m->session_name = g_strdup(session->name);
    m->template_name = g_strdup(session->template_name);
    m->template_version = session->template_version;
    m->state = g_strdup(carrel_session_state_to_string(session->state));
    m->policy = g_strdup(session->policy);
    m->created_at = session->created_at;
    m->updated_at = session->updated_at;
    m->exported_at = now;
    m->exported_by = g_strdup(who->label);
    m->carrel_version = g_strdup(CARREL_VERSION);
    return m;
}

static gboolean
write_bundle(CarrelManager *mgr, const CarrelSession *session, const CarrelPrincipal *who, int fd,
             GError **error)
{
    gint64 now = g_get_real_time() / G_USEC_PER_SEC;
    g_autoptr(CarrelEvidenceWriter) w = carrel_evidence_writer_new(fd, now, error);
    g_autoptr(CarrelEvidenceManifest) m = manifest_for(session, who, now);

    return w && add_contents(mgr, w, session, error) &&
           carrel_evidence_writer_finish(w, m, mgr->host_key, error);
}

static gboolean export(CarrelManager *mgr, const CarrelSession *session, const CarrelPrincipal *who,
                       CarrelTransfer *t, GError **error)
{
    g_autofree char *spool = NULL;
    int fd = carrel_manager_upload_spool(mgr, &spool, error);
    struct stat st;
    gboolean ok;

    if (fd < 0)
        return FALSE;
    ok = write_bundle(mgr, session, who, fd, error);
    if (ok && fstat(fd, &st) < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_DISK, "bundle: %s", g_strerror(errno));
        ok = FALSE;
    }
    close(fd);
    if (!ok) {
        (void)g_unlink(spool);
        g_prefix_error(error, "exporting session '%s': ", session->id);
        return FALSE;
    }
    t->host_path = g_steal_pointer(&spool);
    t->bytes = (guint64)st.st_size;
    return TRUE;
}

gboolean
carrel_manager_session_export(CarrelManager *mgr, const CarrelPrincipal *who,
                              const char *id_or_name, CarrelTransfer *ret_transfer, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_auto(CarrelTransfer) t = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_EXPORT, id_or_name, NULL, error))
        return FALSE;
    if (!carrel_door_finish_ok(&door, export(mgr, door.session, who, &t, &local), &local, error))
        return FALSE;
    *ret_transfer = (CarrelTransfer){.host_path = g_steal_pointer(&t.host_path), .bytes = t.bytes};
    return TRUE;
}
