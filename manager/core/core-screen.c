#include <errno.h>
#include <string.h>
#include <glib/gstdio.h>

#include "core/core-priv.h"
#include "image/image.h"

/* The region, when asked for, must lie on the screen. */
static GBytes *
apply_region(GBytes *ppm, const CarrelScreenshotRequest *req, guint width, guint height,
             GError **error)
{
    const guint *r = req->region;

    if (!req->has_region)
        return g_bytes_ref(ppm);
    if ((guint64)r[0] + r[2] > width || (guint64)r[1] + r[3] > height) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "region %u,%u,%u,%u is not inside the %ux%u screen", r[0], r[1], r[2], r[3],
                    width, height);
        return NULL;
    }
    return carrel_image_crop(ppm, r[0], r[1], r[2], r[3], error);
}

static GBytes *
apply_scale(GBytes *ppm, const CarrelScreenshotRequest *req, GError **error)
{
    guint width = 0, height = 0, to_w = 0, to_h = 0;

    if (!carrel_image_ppm_parse(ppm, &width, &height, NULL, error))
        return NULL;
    if (req->max_edge) {
        if (!carrel_image_fit_max_edge(width, height, req->max_edge, &to_w, &to_h, error))
            return NULL;
    } else if (req->scale != 1.0) {
        if (!carrel_image_fit_factor(width, height, req->scale, &to_w, &to_h, error))
            return NULL;
    } else {
        return g_bytes_ref(ppm);
    }
    if (to_w == width && to_h == height)
        return g_bytes_ref(ppm);
    return carrel_image_scale(ppm, to_w, to_h, error);
}

GBytes *
carrel_manager_screen_encode(GBytes *ppm, const CarrelScreenshotRequest *req, GError **error)
{
    g_autoptr(GBytes) cropped = NULL;
    g_autoptr(GBytes) scaled = NULL;
    guint width = 0, height = 0;

    if (!carrel_image_ppm_parse(ppm, &width, &height, NULL, error) ||
        !(cropped = apply_region(ppm, req, width, height, error)) ||
        !(scaled = apply_scale(cropped, req, error)))
        return NULL;
    return req->jpeg ? carrel_image_encode_jpeg(scaled, req->quality, error)
                     : carrel_image_encode_png(scaled, error);
}

/* A kept screenshot's name: "shot-" id, then .png or .jpg; nothing that could leave the folder. */
gboolean
carrel_manager_shot_name_ok(const char *name)
{
    gsize len = strlen(name);

    if (len < 10 || len > 80 || !g_str_has_prefix(name, "shot-") ||
        (!g_str_has_suffix(name, ".png") && !g_str_has_suffix(name, ".jpg")))
        return FALSE;
    for (gsize i = 0; i < len - 4; i++) {
        if (!g_ascii_isalnum(name[i]) && name[i] != '-')
            return FALSE;
    }
    return TRUE;
}

typedef struct {
    char *name;
    gint64 mtime_ns;
    guint64 size;
} KeptShot;

static void
kept_shot_clear(gpointer data)
{
    g_free(((KeptShot *)data)->name);
}

/* Newest first; names break ties so that the order is the same for every caller. */
static gint
kept_shot_newer(gconstpointer a, gconstpointer b)
{
    const KeptShot *x = a, *y = b;

    if (x->mtime_ns != y->mtime_ns)
        return x->mtime_ns > y->mtime_ns ? -1 : 1;
    return -g_strcmp0(x->name, y->name);
}

/* The kept screenshots of dir (regular files with a screenshot's name), newest first. */
static GArray *
kept_shots(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    GArray *shots = g_array_new(FALSE, TRUE, sizeof(KeptShot));
    const char *name;

    g_array_set_clear_func(shots, kept_shot_clear);
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = NULL;
        GStatBuf st;
        KeptShot shot;

        if (!carrel_manager_shot_name_ok(name))
            continue;
        path = g_build_filename(dir, name, NULL);
        if (g_lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        shot.name = g_strdup(name);
        shot.mtime_ns =
            (gint64)st.st_mtim.tv_sec * G_GINT64_CONSTANT(1000000000) + st.st_mtim.tv_nsec;
        shot.size = (guint64)st.st_size;
        g_array_append_val(shots, shot);
    }
    g_array_sort(shots, kept_shot_newer);
    return shots;
}

/*
 * A session keeps its newest screenshots within a count and a byte budget: the older ones go
 * (their events keep the name). The one just kept (newest) stays even alone over the budget.
 * A disk full of one session's screens would stop every other session's timeline.
 */
static void
prune_shots(CarrelManager *mgr, const char *dir, const char *just_kept)
{
    g_autoptr(GArray) shots = kept_shots(dir);
    guint64 bytes = 0;

    for (guint i = 0; i < shots->len; i++) {
        KeptShot *shot = &g_array_index(shots, KeptShot, i);
        g_autofree char *path = NULL;

        bytes += shot->size;
        if ((i < mgr->shots_max && bytes <= mgr->shots_max_bytes) ||
            g_str_equal(shot->name, just_kept))
            continue;
        path = g_build_filename(dir, shot->name, NULL);
        /* Another keeper of this session may have removed it already. */
        if (g_unlink(path) != 0 && errno != ENOENT)
            g_debug("removing screenshot '%s': %s", path, g_strerror(errno));
    }
}

guint
carrel_manager_count_kept_shots(CarrelManager *mgr, const CarrelSession *session,
                                guint64 *ret_bytes)
{
    g_autofree char *dir = g_build_filename(session->dir, "screenshots", NULL);
    g_autoptr(GArray) shots = kept_shots(dir);
    guint64 bytes = 0;

    for (guint i = 0; i < shots->len; i++)
        bytes += g_array_index(shots, KeptShot, i).size;
    if (ret_bytes)
        *ret_bytes = bytes;
    return shots->len;
}

/* Keeps an image for the timeline under sessions/<id>/screenshots; returns its reference. */
char *
carrel_manager_keep_screenshot(CarrelManager *mgr, const CarrelSession *session, GBytes *image,
                               gboolean jpeg)
{
    g_autofree char *dir = g_build_filename(session->dir, "screenshots", NULL);
    g_autofree char *id = carrel_util_new_id("shot-");
    g_autofree char *name = g_strconcat(id, jpeg ? ".jpg" : ".png", NULL);
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autoptr(GError) error = NULL;
    gsize len = 0;
    const char *data = g_bytes_get_data(image, &len);

    if (!carrel_util_ensure_dir(dir, 0700, &error) ||
        !carrel_util_write_new_file(path, data, len, 0600, &error)) {
        g_warning("session '%s': keeping a screenshot: %s", session->id, error->message);
        return NULL;
    }
    prune_shots(mgr, dir, name);
    return g_steal_pointer(&name);
}

static GBytes *
screenshot(CarrelManager *mgr, const char *id_or_name, const CarrelScreenshotRequest *req,
           const CarrelPrincipal *actor, GError **error)
{
    g_autoptr(CarrelSession) session = NULL;
    g_autofree char *domain = NULL;
    g_autofree char *ref = NULL;
    g_autoptr(GBytes) ppm = NULL;
    g_autoptr(GBytes) image = NULL;
    g_autoptr(GError) local = NULL;
    gint64 started = g_get_monotonic_time();

    /* A paused guest still has a screen: reviewers look at paused sessions. */
    session = carrel_store_session_get(mgr->store, id_or_name, error);
    if (!session)
        return NULL;
    if (session->state != CARREL_SESSION_RUNNING && session->state != CARREL_SESSION_PAUSED) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "cannot take a screenshot of a session that is %s",
                    carrel_session_state_to_string(session->state));
        return NULL;
    }
    domain = carrel_session_domain_name(session->id);
    if (carrel_hypervisor_screenshot(mgr->hv, domain, &ppm, NULL, NULL, &local))
        image = carrel_manager_screen_encode(ppm, req, &local);
    /* A viewer's thumbnail is neither kept nor an event: the timeline is what acted on the
     * session, and a console left open must not count as activity against its idle timeout. */
    if (image && !req->thumbnail)
        ref = carrel_manager_keep_screenshot(mgr, session, image, req->jpeg);
    if (!req->thumbnail &&
        !carrel_manager_record_outcome(mgr, session->id, actor, "action", "screenshot", NULL, NULL,
                                       &local, started, ref, image != NULL))
        g_clear_pointer(&image, g_bytes_unref);
    if (!image) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "session '%s': ", session->id);
        return NULL;
    }
    return g_steal_pointer(&image);
}

GBytes *
carrel_manager_session_screenshot(CarrelManager *mgr, const CarrelPrincipal *who,
                                  const char *id_or_name, const CarrelScreenshotRequest *req,
                                  GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_SCREENSHOT, id_or_name, NULL, error))
        return NULL;
    return carrel_door_finish(&door, screenshot(mgr, door.session_id, req, who, &local), &local,
                              error);
}

GBytes *
carrel_manager_session_kept_screenshot(CarrelManager *mgr, const CarrelPrincipal *who,
                                       const char *id_or_name, const char *name,
                                       const char **ret_type, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    CarrelSession *session = NULL;
    g_autofree char *path = NULL;
    g_autofree char *data = NULL;
    gsize len = 0;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_READ, id_or_name, NULL, error))
        return NULL;
    session = door.session;
    if (!carrel_manager_shot_name_ok(name)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "malformed screenshot name");
        return NULL;
    }
    path = g_build_filename(session->dir, "screenshots", name, NULL);
    if (!g_file_get_contents(path, &data, &len, NULL)) {
        gboolean named = FALSE;

        if (!carrel_store_event_names_screenshot(mgr->store, session->id, name, &named, error))
            return NULL;
        if (named)
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_GONE,
                        "screenshot '%s' of session '%s' was pruned: a session keeps its "
                        "newest %u screenshots, at most %" G_GUINT64_FORMAT " MiB",
                        name, session->id, mgr->shots_max, mgr->shots_max_bytes / (1024 * 1024));
        else
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND,
                        "session '%s' has no screenshot '%s'", session->id, name);
        return NULL;
    }
    *ret_type = g_str_has_suffix(name, ".png") ? "image/png" : "image/jpeg";
    return g_bytes_new_take(g_steal_pointer(&data), len);
}
