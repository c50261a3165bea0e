/*
 * screen WxH: the display's size, through XRandR 1.2. A virtual output (QXL) offers a few modes;
 * any other size gets a CVT reduced-blanking mode, created and added to the output. The screen
 * grows first (a CRTC must fit in it), the CRTC takes the mode, then the screen takes the size:
 * QXL refuses to turn its first CRTC off, so it is never disabled on the way.
 */
#include <math.h>
#include <string.h>
#include <X11/extensions/Xrandr.h>

#include "guest-x11.h"

#define POLL_INTERVAL_US (250 * 1000)
/* Physical size reported for the new size: 96 dpi, what Xorg assumes without a monitor. */
#define MM_PER_PIXEL (25.4 / 96.0)

void
carrel_guest_cvt_rb(guint width, guint height, CarrelGuestTiming *ret_timing)
{
    /* VESA CVT 1.2, reduced blanking (v1): fixed horizontal blanking, at least 460 us of
     * vertical blanking, the sync width telling the aspect ratio, clock in 0.25 MHz steps. */
    guint vsync = 10, vbi_lines, min_vbi;
    double h_period_us = ((1000000.0 / 60.0) - 460.0) / height;
    double clock_mhz;

    if (height % 3 == 0 && height * 4 / 3 == width)
        vsync = 4;
    else if (height % 9 == 0 && height * 16 / 9 == width)
        vsync = 5;
    else if (height % 10 == 0 && height * 16 / 10 == width)
        vsync = 6;
    else if ((height % 4 == 0 && height * 5 / 4 == width) ||
             (height % 9 == 0 && height * 15 / 9 == width))
        vsync = 7;
    vbi_lines = (guint)floor(460.0 / h_period_us) + 1;
    min_vbi = 3 + vsync + 6;
    ret_timing->width = width;
    ret_timing->height = height;
    ret_timing->htotal = width + 160;
    ret_timing->hsync_start = width + 48;
    ret_timing->hsync_end = width + 80;
    ret_timing->vtotal = height + MAX(vbi_lines, min_vbi);
    ret_timing->vsync_start = height + 3;
    ret_timing->vsync_end = height + 3 + vsync;
    clock_mhz = 0.25 * floor(60.0 * ret_timing->vtotal * ret_timing->htotal / 1000000.0 / 0.25);
    ret_timing->clock_hz = (gulong)llround(clock_mhz * 1000000.0);
}

/* The display, once it accepts clients (right after a boot X may still be starting). */
static CarrelGuestX11 *
open_display(const CarrelGuestOptions *options, GError **error)
{
    gint64 deadline = g_get_monotonic_time() + options->timeout_ms * 1000;

    for (;;) {
        g_autoptr(GError) local = NULL;
        CarrelGuestX11 *x = carrel_guest_x11_try_open(options, &local);
        gint64 now = g_get_monotonic_time();

        if (x)
            return x;
        if (now >= deadline) {
            g_propagate_error(error, g_steal_pointer(&local));
            return NULL;
        }
        g_usleep((gulong)MIN(POLL_INTERVAL_US, deadline - now));
    }
}

typedef struct {
    XRRScreenResources *res;
    RROutput output;
    RRCrtc crtc;
    char *output_name;
} Target;

static void
target_clear(Target *t)
{
    if (t->res)
        XRRFreeScreenResources(t->res);
    g_free(t->output_name);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Target, target_clear)

/* The first connected output and its CRTC (the one it uses, else the first it may use). */
static gboolean
find_output(CarrelGuestX11 *x, Target *t, GError **error)
{
    t->res = XRRGetScreenResources(x->dpy, x->root);
    for (int i = 0; t->res && i < t->res->noutput; i++) {
        XRROutputInfo *info = XRRGetOutputInfo(x->dpy, t->res, t->res->outputs[i]);
        gboolean usable =
            info && info->connection == RR_Connected && (info->crtc != None || info->ncrtc > 0);

        if (usable) {
            t->output = t->res->outputs[i];
            t->crtc = info->crtc != None ? info->crtc : info->crtcs[0];
            t->output_name = g_strndup(info->name, (gsize)info->nameLen);
        }
        if (info)
            XRRFreeOutputInfo(info);
        if (usable)
            return TRUE;
    }
    g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_X11,
                "display '%s' has no connected output", x->display_name);
    return FALSE;
}

/* A mode of exactly width x height: one the output has, else one the screen has (added to the
 * output), else a new CVT mode. */
static RRMode
find_or_make_mode(CarrelGuestX11 *x, const Target *t, guint width, guint height,
                  gboolean *ret_created)
{
    XRROutputInfo *info = XRRGetOutputInfo(x->dpy, t->res, t->output);
    RRMode found = None, any = None;
    CarrelGuestTiming tm;
    g_autofree char *name = NULL;
    XRRModeInfo mode = {0};

    for (int i = 0; i < t->res->nmode; i++) {
        const XRRModeInfo *m = &t->res->modes[i];
        if (m->width != width || m->height != height)
            continue;
        any = any != None ? any : m->id;
        for (int j = 0; info && j < info->nmode && found == None; j++)
            found = info->modes[j] == m->id ? m->id : None;
    }
    if (info)
        XRRFreeOutputInfo(info);
    *ret_created = FALSE;
    if (found != None)
        return found;
    if (any != None) {
        XRRAddOutputMode(x->dpy, t->output, any);
        return any;
    }
    carrel_guest_cvt_rb(width, height, &tm);
    name = g_strdup_printf("%ux%u_carrel", width, height);
    mode.width = tm.width;
    mode.height = tm.height;
    mode.dotClock = tm.clock_hz;
    mode.hSyncStart = tm.hsync_start;
    mode.hSyncEnd = tm.hsync_end;
    mode.hTotal = tm.htotal;
    mode.vSyncStart = tm.vsync_start;
    mode.vSyncEnd = tm.vsync_end;
    mode.vTotal = tm.vtotal;
    mode.name = name;
    mode.nameLength = (unsigned int)strlen(name);
    mode.modeFlags = RR_HSyncPositive | RR_VSyncNegative;
    found = XRRCreateMode(x->dpy, x->root, &mode);
    if (found != None) {
        XRRAddOutputMode(x->dpy, t->output, found);
        *ret_created = TRUE;
    }
    return found;
}

static void
set_screen_size(CarrelGuestX11 *x, guint width, guint height)
{
    XRRSetScreenSize(x->dpy, x->root, (int)width, (int)height, (int)lround(width * MM_PER_PIXEL),
                     (int)lround(height * MM_PER_PIXEL));
}

static gboolean
root_size(CarrelGuestX11 *x, guint *ret_width, guint *ret_height)
{
    Window root;
    int px, py;
    unsigned int w = 0, h = 0, border, depth;

    if (!XGetGeometry(x->dpy, x->root, &root, &px, &py, &w, &h, &border, &depth))
        return FALSE;
    *ret_width = w;
    *ret_height = h;
    return TRUE;
}

static gboolean
check_range(CarrelGuestX11 *x, guint width, guint height, GError **error)
{
    int event_base, error_base, major = 0, minor = 0, min_w, min_h, max_w, max_h;

    if (!XRRQueryExtension(x->dpy, &event_base, &error_base) ||
        !XRRQueryVersion(x->dpy, &major, &minor) || major < 1 || (major == 1 && minor < 2)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_X11,
                    "display '%s' has no RandR 1.2", x->display_name);
        return FALSE;
    }
    if (!XRRGetScreenSizeRange(x->dpy, x->root, &min_w, &min_h, &max_w, &max_h))
        return TRUE;
    if ((int)width < min_w || (int)height < min_h || (int)width > max_w || (int)height > max_h) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "display '%s' takes %dx%d to %dx%d, not %ux%u", x->display_name, min_w, min_h,
                    max_w, max_h, width, height);
        return FALSE;
    }
    return TRUE;
}

/* Grow, set the CRTC, shrink: within one server grab so no client sees a half-done size. */
static gboolean
apply(CarrelGuestX11 *x, Target *t, guint width, guint height, guint old_w, guint old_h,
      gboolean *ret_created, GError **error)
{
    RRMode mode;
    Status status = RRSetConfigFailed;
    int xerror;

    XGrabServer(x->dpy);
    carrel_guest_x11_trap_begin(x);
    mode = find_or_make_mode(x, t, width, height, ret_created);
    if (mode != None) {
        if (width > old_w || height > old_h)
            set_screen_size(x, MAX(width, old_w), MAX(height, old_h));
        XSync(x->dpy, False);
        status = XRRSetCrtcConfig(x->dpy, t->res, t->crtc, CurrentTime, 0, 0, mode, RR_Rotate_0,
                                  &t->output, 1);
        if (status == RRSetConfigSuccess)
            set_screen_size(x, width, height);
    }
    XSync(x->dpy, False);
    xerror = carrel_guest_x11_trap_end(x);
    XUngrabServer(x->dpy);
    XSync(x->dpy, False);
    if (mode == None || status != RRSetConfigSuccess || xerror != 0) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_X11,
                    "output '%s' did not take %ux%u (%s, X error %d)", t->output_name, width,
                    height, mode == None ? "no mode" : "crtc refused", xerror);
        return FALSE;
    }
    return TRUE;
}

static JsonNode *
screen_json(guint width, guint height, guint old_w, guint old_h, const char *output,
            gboolean created)
{
    g_autoptr(JsonBuilder) b = carrel_guest_json_begin();

    json_builder_set_member_name(b, "width");
    json_builder_add_int_value(b, width);
    json_builder_set_member_name(b, "height");
    json_builder_add_int_value(b, height);
    json_builder_set_member_name(b, "previous");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "width");
    json_builder_add_int_value(b, old_w);
    json_builder_set_member_name(b, "height");
    json_builder_add_int_value(b, old_h);
    json_builder_end_object(b);
    json_builder_set_member_name(b, "output");
    json_builder_add_string_value(b, output);
    json_builder_set_member_name(b, "mode_created");
    json_builder_add_boolean_value(b, created);
    return carrel_guest_json_end(b);
}

JsonNode *
carrel_guest_cmd_screen(const CarrelGuestOptions *options, GError **error)
{
    g_autoptr(CarrelGuestX11) x = NULL;
    g_auto(Target) t = {0};
    guint width = 0, height = 0, old_w = 0, old_h = 0, now_w = 0, now_h = 0;
    gboolean created = FALSE;

    if (!carrel_guest_screen_parse(options->argv[0], &width, &height, error) ||
        !(x = open_display(options, error)) || !check_range(x, width, height, error) ||
        !root_size(x, &old_w, &old_h) || !find_output(x, &t, error))
        return NULL;
    if ((width != old_w || height != old_h) &&
        !apply(x, &t, width, height, old_w, old_h, &created, error))
        return NULL;
    if (!root_size(x, &now_w, &now_h) || now_w != width || now_h != height) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_X11,
                    "display '%s' is %ux%u, not %ux%u", x->display_name, now_w, now_h, width,
                    height);
        return NULL;
    }
    return screen_json(width, height, old_w, old_h, t.output_name, created);
}
