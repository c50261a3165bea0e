/*
 * SPICE access of a running domain: where its SPICE server listens and the live <graphics>
 * element that sets a password through virDomainUpdateDeviceFlags. The XML scan is pure.
 */
#include <string.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

/* Attributes the scan replaces in the re-serialised <graphics> element. */
static const char *const replaced_attrs[] = {"passwd", "passwdValidTo", "connected", NULL};

typedef struct {
    guint depth;
    gboolean in_devices;
    guint graphics_depth; /* depth of the SPICE <graphics> being copied, 0 outside */
    gboolean found;
    gint64 run_id;
    guint port;
    const char *password;
    const char *valid_to;
    GString *graphics;
} SpiceScan;

const char *
carrel_hypervisor_markup_attr(const char **names, const char **values, const char *want)
{
    for (guint i = 0; names[i]; i++) {
        if (g_str_equal(names[i], want))
            return values[i];
    }
    return NULL;
}

static void
append_element(SpiceScan *scan, const char *element, const char **names, const char **values,
               gboolean root)
{
    g_string_append_printf(scan->graphics, "<%s", element);
    for (guint i = 0; names[i]; i++) {
        g_autofree char *escaped = NULL;
        if (root && g_strv_contains(replaced_attrs, names[i]))
            continue;
        escaped = g_markup_escape_text(values[i], -1);
        g_string_append_printf(scan->graphics, " %s='%s'", names[i], escaped);
    }
    if (root && scan->password) {
        g_autofree char *pw = g_markup_escape_text(scan->password, -1);
        g_autofree char *until = g_markup_escape_text(scan->valid_to, -1);
        /* keep: viewers already connected stay connected when the password changes. */
        g_string_append_printf(scan->graphics, " passwd='%s' passwdValidTo='%s' connected='keep'",
                               pw, until);
    }
    g_string_append(scan->graphics, ">");
}

static gboolean
parse_uint_attr(const char *text, guint64 max, guint64 *ret_value)
{
    return text && g_ascii_string_to_unsigned(text, 10, 0, max, ret_value, NULL);
}

static void
scan_graphics_start(SpiceScan *scan, const char **names, const char **values, GError **error)
{
    const char *port = carrel_hypervisor_markup_attr(names, values, "port");
    guint64 value = 0;

    if (scan->found) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "domain has more than one SPICE display");
        return;
    }
    scan->found = TRUE;
    scan->graphics_depth = scan->depth;
    /* -1 (or no port) while QEMU has not started: reported as 0. */
    if (port && parse_uint_attr(port, 65535, &value))
        scan->port = (guint)value;
    append_element(scan, "graphics", names, values, TRUE);
}

static void
scan_start(GMarkupParseContext *ctx, const char *element, const char **names, const char **values,
           gpointer user_data, GError **error)
{
    SpiceScan *scan = user_data;
    const char *type;
    guint64 id = 0;

    scan->depth++;
    if (scan->graphics_depth) {
        append_element(scan, element, names, values, FALSE);
        return;
    }
    if (scan->depth == 1 && g_str_equal(element, "domain")) {
        scan->run_id =
            parse_uint_attr(carrel_hypervisor_markup_attr(names, values, "id"), G_MAXINT32, &id)
                ? (gint64)id
                : -1;
    } else if (scan->depth == 2 && g_str_equal(element, "devices")) {
        scan->in_devices = TRUE;
    } else if (scan->depth == 3 && scan->in_devices && g_str_equal(element, "graphics")) {
        type = carrel_hypervisor_markup_attr(names, values, "type");
        if (g_strcmp0(type, "spice") == 0)
            scan_graphics_start(scan, names, values, error);
    }
}

static void
scan_end(GMarkupParseContext *ctx, const char *element, gpointer user_data, GError **error)
{
    SpiceScan *scan = user_data;

    if (scan->graphics_depth) {
        g_string_append_printf(scan->graphics, "</%s>", element);
        if (scan->depth == scan->graphics_depth)
            scan->graphics_depth = 0;
    }
    if (scan->depth == 2)
        scan->in_devices = FALSE;
    scan->depth--;
}

gboolean
carrel_hypervisor_spice_scan(const char *xml, const char *password, gint64 valid_until,
                             CarrelSpiceInfo *ret_info, char **ret_graphics, GError **error)
{
    static const GMarkupParser parser = {scan_start, scan_end, NULL, NULL, NULL};
    g_autoptr(GString) graphics = g_string_new(NULL);
    g_autoptr(GDateTime) until = NULL;
    g_autofree char *valid_to = NULL;
    g_autoptr(GMarkupParseContext) ctx = NULL;
    SpiceScan scan = {.run_id = -1, .password = password, .graphics = graphics};

    if (strlen(xml) > CARREL_HYPERVISOR_SCAN_MAX_BYTES) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "domain xml is too large");
        return FALSE;
    }
    if (password) {
        until = g_date_time_new_from_unix_utc(MAX(valid_until, 0));
        valid_to = until ? g_date_time_format(until, "%Y-%m-%dT%H:%M:%S") : NULL;
        if (!valid_to) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "invalid password expiry");
            return FALSE;
        }
        scan.valid_to = valid_to;
    }
    ctx = g_markup_parse_context_new(&parser, 0, &scan, NULL);
    if (!g_markup_parse_context_parse(ctx, xml, -1, error) ||
        !g_markup_parse_context_end_parse(ctx, error)) {
        g_prefix_error(error, "reading domain xml: ");
        return FALSE;
    }
    if (!scan.found) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED, "domain has no SPICE display");
        return FALSE;
    }
    if (ret_info) {
        ret_info->port = scan.port;
        ret_info->run_id = scan.run_id;
    }
    if (ret_graphics)
        *ret_graphics = g_string_free(g_steal_pointer(&graphics), FALSE);
    return TRUE;
}

gboolean
carrel_hypervisor_spice_info(CarrelHypervisor *hv, const char *name, CarrelSpiceInfo *ret_info,
                             GError **error)
{
    CarrelSpiceInfo info = {0};

    g_return_val_if_fail(hv != NULL && name != NULL && ret_info != NULL, FALSE);
    if (!hv->ops->spice_info(hv, name, &info, error)) {
        g_prefix_error(error, "domain '%s': reading its SPICE display: ", name);
        return FALSE;
    }
    if (info.port == 0 || info.run_id < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "domain '%s': its SPICE display is not listening", name);
        return FALSE;
    }
    *ret_info = info;
    return TRUE;
}

gboolean
carrel_hypervisor_spice_password(CarrelHypervisor *hv, const char *name, const char *password,
                                 gint64 valid_until, GError **error)
{
    g_return_val_if_fail(hv != NULL && name != NULL && password != NULL, FALSE);
    if (!*password || strlen(password) > CARREL_SPICE_PASSWORD_MAX ||
        !carrel_util_is_clean_text(password)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "invalid SPICE password");
        return FALSE;
    }
    if (!hv->ops->spice_password(hv, name, password, valid_until, error)) {
        g_prefix_error(error, "domain '%s': setting its SPICE password: ", name);
        return FALSE;
    }
    return TRUE;
}
