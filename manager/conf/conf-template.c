#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

CarrelTemplate *
carrel_template_new(void)
{
    return g_new0(CarrelTemplate, 1);
}

void
carrel_template_free(CarrelTemplate *tmpl)
{
    if (!tmpl)
        return;
    g_free(tmpl->name);
    g_free(tmpl->sha256);
    g_free(tmpl->format);
    g_free(tmpl->dir);
    g_free(tmpl->disk_path);
    g_free(tmpl->kernel_path);
    g_free(tmpl->initrd_path);
    g_free(tmpl->cmdline);
    g_free(tmpl->recipe_hash);
    g_free(tmpl);
}

/* {vcpus?, memory_mib?, screen?}: what a create without those gets; {} when the recipe said none.
 */
static void
add_defaults(JsonBuilder *b, const CarrelTemplate *tmpl)
{
    g_autofree char *screen =
        carrel_screen_size_format(tmpl->default_screen_width, tmpl->default_screen_height);

    json_builder_set_member_name(b, "defaults");
    json_builder_begin_object(b);
    if (tmpl->default_vcpus) {
        json_builder_set_member_name(b, "vcpus");
        json_builder_add_int_value(b, tmpl->default_vcpus);
    }
    if (tmpl->default_memory_mib) {
        json_builder_set_member_name(b, "memory_mib");
        json_builder_add_int_value(b, tmpl->default_memory_mib);
    }
    if (screen) {
        json_builder_set_member_name(b, "screen");
        json_builder_add_string_value(b, screen);
    }
    json_builder_end_object(b);
}

JsonNode *
carrel_template_to_json(const CarrelTemplate *tmpl, guint sessions_using)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *created = carrel_util_format_time(tmpl->created_at);
    g_autofree char *ref = g_strdup_printf("%s@%u", tmpl->name, tmpl->version);

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "name");
    json_builder_add_string_value(b, tmpl->name);
    json_builder_set_member_name(b, "version");
    json_builder_add_int_value(b, tmpl->version);
    json_builder_set_member_name(b, "ref");
    json_builder_add_string_value(b, ref);
    json_builder_set_member_name(b, "sha256");
    json_builder_add_string_value(b, tmpl->sha256);
    json_builder_set_member_name(b, "format");
    json_builder_add_string_value(b, tmpl->format);
    json_builder_set_member_name(b, "size_bytes");
    json_builder_add_int_value(b, (gint64)tmpl->size_bytes);
    json_builder_set_member_name(b, "virtual_size_bytes");
    json_builder_add_int_value(b, (gint64)tmpl->virtual_size_bytes);
    json_builder_set_member_name(b, "boot");
    json_builder_add_string_value(b, carrel_boot_to_string(tmpl->boot));
    carrel_conf_add_optional_string(b, "disk", tmpl->disk_path);
    carrel_conf_add_optional_string(b, "kernel", tmpl->kernel_path);
    carrel_conf_add_optional_string(b, "initrd", tmpl->initrd_path);
    carrel_conf_add_optional_string(b, "cmdline", tmpl->cmdline);
    carrel_conf_add_optional_string(b, "recipe_hash", tmpl->recipe_hash);
    add_defaults(b, tmpl);
    json_builder_set_member_name(b, "created_at");
    json_builder_add_string_value(b, created);
    json_builder_set_member_name(b, "sessions");
    json_builder_add_int_value(b, sessions_using);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static gboolean
invalid_name(GError **error)
{
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                "invalid template name: use 1-63 of [a-z0-9._-], starting with a letter or digit");
    return FALSE;
}

gboolean
carrel_template_ref_parse(const char *text, char **ret_name, guint *ret_version, GError **error)
{
    const char *at = text ? strchr(text, '@') : NULL;
    g_autofree char *name = at ? g_strndup(text, (gsize)(at - text)) : g_strdup(text);
    guint64 version = 0;

    if (!name || !*name) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a template name is required: NAME or NAME@VERSION");
        return FALSE;
    }
    if (at && strchr(at + 1, '@')) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a template reference has one '@' at most: NAME or NAME@VERSION");
        return FALSE;
    }
    if (!carrel_util_is_valid_name(name))
        return invalid_name(error);
    /* Digits only: no sign, no blank, no hex, whatever strtoull would let through. */
    if (at && (!g_ascii_isdigit(at[1]) ||
               !g_ascii_string_to_unsigned(at + 1, 10, 1, G_MAXUINT, &version, NULL))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "template version must be a positive number, as in 'tiny@2'");
        return FALSE;
    }
    *ret_name = g_steal_pointer(&name);
    *ret_version = (guint)version;
    return TRUE;
}

void
carrel_template_import_free(CarrelTemplateImport *req)
{
    if (!req)
        return;
    g_free(req->name);
    g_free(req->disk);
    g_free(req->format);
    g_free(req->kernel);
    g_free(req->initrd);
    g_free(req->cmdline);
    carrel_template_free(req->defaults);
    g_free(req);
}

static gboolean
check_host_path(const char *what, const char *path, GError **error)
{
    if (!path)
        return TRUE;
    if (!carrel_util_is_clean_text(path) || !g_path_is_absolute(path)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "%s must be an absolute path without control characters", what);
        return FALSE;
    }
    return TRUE;
}

static gboolean
import_check(CarrelTemplateImport *req, const char *boot, const char *firmware, GError **error)
{
    const char *boot_name = boot ? boot : firmware;

    if (!carrel_util_is_valid_name(req->name))
        return invalid_name(error);
    if (!req->format || (!g_str_equal(req->format, "qcow2") && !g_str_equal(req->format, "raw"))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'format' must be declared as 'qcow2' or 'raw' (images are never probed)");
        return FALSE;
    }
    req->boot = boot_name ? carrel_boot_from_string(boot_name)
                          : (req->kernel ? CARREL_BOOT_DIRECT : CARREL_BOOT_BIOS);
    if (req->boot == CARREL_BOOT_LAST) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "unknown boot method: use direct, bios or uefi");
        return FALSE;
    }
    if ((req->boot == CARREL_BOOT_DIRECT) != (req->kernel != NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a kernel is required for direct boot and only allowed with it");
        return FALSE;
    }
    if (!req->kernel && (req->initrd || req->cmdline)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "initrd and cmdline need a kernel");
        return FALSE;
    }
    if (req->cmdline && (!carrel_util_is_clean_text(req->cmdline) ||
                         strlen(req->cmdline) > CARREL_LIMIT_CMDLINE_LEN)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "cmdline must be at most %d characters without control characters",
                    CARREL_LIMIT_CMDLINE_LEN);
        return FALSE;
    }
    return check_host_path("disk", req->disk, error) &&
           check_host_path("kernel", req->kernel, error) &&
           check_host_path("initrd", req->initrd, error);
}

CarrelTemplateImport *
carrel_template_import_from_json(JsonNode *node, GError **error)
{
    static const char *const allowed[] = {"name",   "disk",   "format",  "boot", "firmware",
                                          "kernel", "initrd", "cmdline", NULL};
    g_autoptr(CarrelTemplateImport) req = g_new0(CarrelTemplateImport, 1);
    g_autofree char *boot = NULL;
    g_autofree char *firmware = NULL;
    JsonObject *obj;

    if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "expected a JSON object");
        return NULL;
    }
    obj = json_node_get_object(node);
    if (!carrel_conf_check_members(obj, allowed, error) ||
        !carrel_conf_get_string(obj, "name", TRUE, &req->name, error) ||
        !carrel_conf_get_string(obj, "disk", TRUE, &req->disk, error) ||
        !carrel_conf_get_string(obj, "format", FALSE, &req->format, error) ||
        !carrel_conf_get_string(obj, "boot", FALSE, &boot, error) ||
        !carrel_conf_get_string(obj, "firmware", FALSE, &firmware, error) ||
        !carrel_conf_get_string(obj, "kernel", FALSE, &req->kernel, error) ||
        !carrel_conf_get_string(obj, "initrd", FALSE, &req->initrd, error) ||
        !carrel_conf_get_string(obj, "cmdline", FALSE, &req->cmdline, error))
        return NULL;
    if (!import_check(req, boot, firmware, error))
        return NULL;
    return g_steal_pointer(&req);
}

CarrelWarmState *
carrel_warm_state_new(void)
{
    return g_new0(CarrelWarmState, 1);
}

void
carrel_warm_state_free(CarrelWarmState *warm)
{
    if (!warm)
        return;
    g_free(warm->template_name);
    g_free(warm->memory_path);
    g_free(warm->disk_path);
    g_free(warm->memory_file);
    g_free(warm);
}

JsonNode *
carrel_warm_state_to_json(const CarrelWarmState *warm)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *created = carrel_util_format_time(warm->created_at);

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "vcpus");
    json_builder_add_int_value(b, warm->vcpus);
    json_builder_set_member_name(b, "memory_mib");
    json_builder_add_int_value(b, warm->memory_mib);
    json_builder_set_member_name(b, "memory_bytes");
    json_builder_add_int_value(b, (gint64)warm->memory_bytes);
    json_builder_set_member_name(b, "machine_revision");
    json_builder_add_int_value(b, warm->machine_revision);
    /* Guest RAM in a file the clones map: memory_bytes is then the device state alone. */
    json_builder_set_member_name(b, "memory_in_file");
    json_builder_add_boolean_value(b, warm->memory_file != NULL);
    json_builder_set_member_name(b, "created_at");
    json_builder_add_string_value(b, created);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
