/*
 * The fake guest's screen size: carrel-guest screen answered as a guest would, and screenshots
 * of the size it set.
 */
#include <string.h>

#define CARREL_HYPERVISOR_BACKEND_H_ALLOW
#include "hypervisor/hypervisor-backend.h"
#include "image/image.h"
#include "tests/fake/hypervisor-fake-priv.h"

/* carrel-guest screen WxH, as the guest would answer it: the domain's screen takes the size. */
gboolean
fake_guest_screen(FakeBackend *be, FakeDomain *dom, const CarrelGuestExec *run,
                  CarrelExecResult *ret_result)
{
    guint width = 0, height = 0;
    g_autofree char *reply = NULL;

    if (!run->argv[0] || !g_str_has_suffix(run->argv[0], "/carrel-guest") || !run->argv[1] ||
        !g_str_equal(run->argv[1], "screen") || be->exec_hang)
        return FALSE;
    be->screen_calls++;
    if (be->screen_refused || !run->argv[2] ||
        !carrel_screen_size_parse(run->argv[2], &width, &height, NULL)) {
        reply = g_strdup("{\"error\":{\"code\":\"x11\",\"message\":\"no such mode\"}}");
        ret_result->exit_code = 1;
    } else {
        reply = g_strdup_printf("{\"width\":%u,\"height\":%u,\"previous\":{\"width\":%u,"
                                "\"height\":%u}}",
                                width, height, dom->screen_width ? dom->screen_width : 4,
                                dom->screen_height ? dom->screen_height : 3);
        dom->screen_width = width;
        dom->screen_height = height;
    }
    ret_result->stdout_bytes = g_bytes_new(reply, strlen(reply));
    ret_result->stderr_bytes = g_bytes_new(NULL, 0);
    return TRUE;
}

/* A drawn (not blank) PPM of the size carrel-guest screen set. */
GBytes *
fake_sized_screen(guint width, guint height)
{
    g_autofree char *header = g_strdup_printf("P6\n%u %u\n255\n", width, height);
    gsize header_len = strlen(header);
    gsize len = header_len + (gsize)width * height * 3;
    guint8 *data = g_malloc(len);

    memcpy(data, header, header_len);
    for (gsize i = header_len; i < len; i++)
        data[i] = (guint8)(i * 7);
    return g_bytes_new_take(data, len);
}

void
carrel_hypervisor_fake_set_screen_refused(CarrelHypervisor *hv, gboolean refused)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    be->screen_refused = refused;
}

guint
carrel_hypervisor_fake_get_screen(CarrelHypervisor *hv, const char *name, guint *ret_width,
                                  guint *ret_height)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);
    FakeDomain *dom = name ? g_hash_table_lookup(be->domains, name) : NULL;

    if (ret_width)
        *ret_width = dom ? dom->screen_width : 0;
    if (ret_height)
        *ret_height = dom ? dom->screen_height : 0;
    return be->screen_calls;
}

#define DRAWING_WIDTH 8
#define DRAWING_HEIGHT 6

GBytes *
fake_drawing_screen(FakeBackend *be)
{
    g_autofree char *header = g_strdup_printf("P6\n%u %u\n255\n", DRAWING_WIDTH, DRAWING_HEIGHT);
    gsize header_len = strlen(header);
    gsize len = header_len + DRAWING_WIDTH * DRAWING_HEIGHT * 3;
    guint8 *data = g_malloc(len);

    if (be->draw_wait > 0) {
        be->draw_wait--;
    } else if (be->draw_left > 0) {
        be->draw_generation++;
        if (be->draw_left != G_MAXUINT)
            be->draw_left--;
        be->draw_wait = be->draw_gap;
    }
    memcpy(data, header, header_len);
    for (gsize i = header_len; i < len; i += 3) {
        data[i] = (guint8)(be->draw_generation & 0xff);
        data[i + 1] = (guint8)((be->draw_generation >> 8) & 0xff);
        data[i + 2] = 0x40;
    }
    return g_bytes_new_take(data, len);
}

void
fake_drawing_hid(FakeBackend *be)
{
    be->draw_wait = be->draw_delay;
    be->draw_left = be->draw_frames;
}

void
carrel_hypervisor_fake_set_drawing(CarrelHypervisor *hv, gboolean on, guint delay, guint frames)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    be->drawing = on;
    be->draw_delay = delay;
    be->draw_frames = frames;
    be->draw_gap = 0;
    be->draw_wait = 0;
    be->draw_left = 0;
    be->draw_generation = 0;
}

void
carrel_hypervisor_fake_set_drawing_gap(CarrelHypervisor *hv, guint gap)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    be->draw_gap = gap;
}

gint
carrel_hypervisor_fake_screen_generation(GBytes *image)
{
    g_autoptr(GBytes) ppm = carrel_image_to_ppm(image, NULL);
    guint width = 0, height = 0;
    gsize offset = 0;
    const guint8 *px;

    if (!ppm || !carrel_image_ppm_parse(ppm, &width, &height, &offset, NULL) ||
        width != DRAWING_WIDTH || height != DRAWING_HEIGHT)
        return -1;
    px = (const guint8 *)g_bytes_get_data(ppm, NULL) + offset;
    return px[2] == 0x40 ? (gint)(px[0] | (px[1] << 8)) : -1;
}

guint
carrel_hypervisor_fake_get_screenshots(CarrelHypervisor *hv)
{
    FakeBackend *be = hv->backend_data;
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&be->lock);

    return be->screenshots;
}
