/* ready: waits until the display answers and a window manager manages it. */
#include "guest-x11.h"

#define POLL_INTERVAL_US (250 * 1000)

/* Only one client may select SubstructureRedirect on the root: the window manager (twm
 * included, which has no EWMH).  The root's all_event_masks is the union of every client's
 * selection, so this needs no attempt to select it ourselves, which would make a window manager
 * starting at that instant fail with BadAccess. */
static gboolean
redirect_is_taken(CarrelGuestX11 *x)
{
    XWindowAttributes attributes = {0};
    int status;

    carrel_guest_x11_trap_begin(x);
    status = XGetWindowAttributes(x->dpy, x->root, &attributes);
    if (carrel_guest_x11_trap_end(x) != 0 || !status)
        return FALSE;
    return (attributes.all_event_masks & SubstructureRedirectMask) != 0;
}

static gboolean
find_wm(CarrelGuestX11 *x, char **ret_name)
{
    int number = 0;

    *ret_name = NULL;
    if (!redirect_is_taken(x))
        return FALSE;
    if (carrel_guest_x11_ewmh_wm(x, ret_name) && *ret_name)
        return TRUE;
    carrel_guest_display_number(x->display_name, &number);
    *ret_name = carrel_guest_proc_find_wm(number);
    return TRUE;
}

static JsonNode *
ready_json(CarrelGuestX11 *x, const char *wm, gint64 waited_ms)
{
    g_autoptr(JsonBuilder) builder = carrel_guest_json_begin();

    json_builder_set_member_name(builder, "ready");
    json_builder_add_boolean_value(builder, TRUE);
    json_builder_set_member_name(builder, "display");
    json_builder_add_string_value(builder, x->display_name);
    json_builder_set_member_name(builder, "wm");
    if (wm)
        json_builder_add_string_value(builder, wm);
    else
        json_builder_add_null_value(builder);
    json_builder_set_member_name(builder, "screen");
    json_builder_begin_object(builder);
    json_builder_set_member_name(builder, "width");
    json_builder_add_int_value(builder, DisplayWidth(x->dpy, x->screen));
    json_builder_set_member_name(builder, "height");
    json_builder_add_int_value(builder, DisplayHeight(x->dpy, x->screen));
    json_builder_end_object(builder);
    json_builder_set_member_name(builder, "waited_ms");
    json_builder_add_int_value(builder, waited_ms);
    return carrel_guest_json_end(builder);
}

JsonNode *
carrel_guest_cmd_ready(const CarrelGuestOptions *options, GError **error)
{
    gint64 start = g_get_monotonic_time();
    gint64 deadline = start + options->timeout_ms * 1000;
    g_autoptr(GError) last_error = NULL;

    for (;;) {
        g_autoptr(CarrelGuestX11) x = NULL;
        g_autofree char *wm = NULL;
        gint64 now;

        g_clear_error(&last_error);
        x = carrel_guest_x11_try_open(options, &last_error);
        if (x && find_wm(x, &wm))
            return ready_json(x, wm, (g_get_monotonic_time() - start) / 1000);
        if (x)
            g_set_error(&last_error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_TIMEOUT,
                        "no window manager runs on display '%s'", options->display);
        now = g_get_monotonic_time();
        if (now >= deadline)
            break;
        g_usleep((gulong)MIN(POLL_INTERVAL_US, deadline - now));
    }
    g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_TIMEOUT,
                "display '%s' not ready after %" G_GINT64_FORMAT " ms: %s", options->display,
                options->timeout_ms, last_error->message);
    return NULL;
}
