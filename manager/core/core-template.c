#include <glib/gstdio.h>

#include "core/core-priv.h"
#include "disk/disk.h"

/* Build records a recipe leaves next to its disk (bounded: they come from a script). */
#define RECIPE_JSON_MAX (64 * 1024)
#define PACKAGES_MAX (1024 * 1024)

/* recipe.json of a build: a JSON object, or NULL when there is none. */
static JsonNode *
read_recipe(const char *build_dir, GError **error)
{
    g_autofree char *path = g_build_filename(build_dir, "recipe.json", NULL);
    g_autofree char *text = NULL;
    g_autoptr(JsonNode) node = NULL;
    gsize len = 0;

    if (!g_file_test(path, G_FILE_TEST_IS_REGULAR))
        return NULL;
    if (!g_file_get_contents(path, &text, &len, error))
        return NULL;
    if (len > RECIPE_JSON_MAX || !(node = carrel_conf_parse_json(text, len, NULL)) ||
        !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'%s' is not a JSON object of at most %d bytes", path, RECIPE_JSON_MAX);
        return NULL;
    }
    return g_steal_pointer(&node);
}

/* packages.txt of a build ("name<TAB>version" lines, dpkg-query's) as {name: version}. */
static JsonNode *
read_packages(const char *build_dir, GError **error)
{
    g_autofree char *path = g_build_filename(build_dir, "packages.txt", NULL);
    g_autofree char *text = NULL;
    g_auto(GStrv) lines = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    gsize len = 0;

    if (!g_file_test(path, G_FILE_TEST_IS_REGULAR))
        return NULL;
    if (!g_file_get_contents(path, &text, &len, error))
        return NULL;
    if (len > PACKAGES_MAX || !g_utf8_validate(text, (gssize)len, NULL)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'%s' is not UTF-8 text of at most %d bytes", path, PACKAGES_MAX);
        return NULL;
    }
    lines = g_strsplit(text, "\n", -1);
    json_builder_begin_object(b);
    for (guint i = 0; lines[i]; i++) {
        g_auto(GStrv) f = g_strsplit(lines[i], "\t", 3);
        if (g_strv_length(f) == 2 && *f[0] && *f[1]) {
            json_builder_set_member_name(b, f[0]);
            json_builder_add_string_value(b, f[1]);
        }
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static gboolean
write_manifest_full(const CarrelTemplate *tmpl, JsonNode *recipe, JsonNode *packages,
                    GError **error)
{
    g_autoptr(JsonNode) node = carrel_template_to_json(tmpl, 0);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autofree char *text = NULL;
    g_autofree char *path = g_build_filename(tmpl->dir, "manifest.json", NULL);
    JsonObject *obj = json_node_get_object(node);

    json_object_remove_member(obj, "sessions");
    if (recipe)
        json_object_set_member(obj, "recipe", json_node_copy(recipe));
    if (packages)
        json_object_set_member(obj, "packages", json_node_copy(packages));
    json_generator_set_root(gen, node);
    json_generator_set_pretty(gen, TRUE);
    text = json_generator_to_data(gen, NULL);
    return carrel_util_write_file(path, text, -1, 0444, error);
}

static gboolean
write_manifest(const CarrelTemplate *tmpl, GError **error)
{
    return write_manifest_full(tmpl, NULL, NULL, error);
}

gboolean
carrel_manager_template_record_build(const CarrelTemplate *tmpl, const char *build_dir,
                                     GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonNode) recipe = read_recipe(build_dir, &local);
    g_autoptr(JsonNode) packages = local ? NULL : read_packages(build_dir, &local);

    if (local) {
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    return write_manifest_full(tmpl, recipe, packages, error);
}

CarrelTemplate *
carrel_manager_recipe_defaults(const char *build_dir, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonNode) recipe = read_recipe(build_dir, &local);
    g_autoptr(CarrelTemplate) defaults = carrel_template_new();

    if (local) {
        g_propagate_error(error, g_steal_pointer(&local));
        return NULL;
    }
    if (!carrel_template_defaults_from_recipe(recipe, defaults, error)) {
        g_prefix_error(error, "'%s/recipe.json': ", build_dir);
        return NULL;
    }
    return g_steal_pointer(&defaults);
}

static gboolean
copy_boot_file(const char *src, const char *dir, const char *name, char **ret_path, GError **error)
{
    g_autofree char *dest = NULL;
    g_autoptr(GError) local = NULL;

    if (!src)
        return TRUE;
    dest = g_build_filename(dir, name, NULL);
    /* Read-only for everyone: QEMU (as libvirt-qemu) reads it, nobody writes it. */
    if (!carrel_util_copy_file(src, dest, 0444, &local)) {
        /* A source the daemon cannot read is the caller's mistake, not a host failure. */
        if (g_error_matches(local, CARREL_ERROR, CARREL_ERROR_DISK))
            g_propagate_error(error, g_steal_pointer(&local));
        else
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "%s", local->message);
        return FALSE;
    }
    *ret_path = g_steal_pointer(&dest);
    return TRUE;
}

/* Checks the copy, never the source: the source may change between a check and a copy. */
static gboolean
check_disk(CarrelTemplate *tmpl, GError **error)
{
    g_autoptr(CarrelDiskInfo) info = carrel_disk_info_read(tmpl->disk_path, tmpl->format, error);

    if (!info ||
        !carrel_disk_check_importable(info, tmpl->format, CARREL_LIMIT_VIRTUAL_SIZE_BYTES, error) ||
        !carrel_disk_check_consistent(tmpl->disk_path, tmpl->format, error))
        return FALSE;
    tmpl->virtual_size_bytes = info->virtual_size;
    return TRUE;
}

static gboolean
fill_files(const CarrelTemplateImport *req, CarrelTemplate *tmpl, GError **error)
{
    g_autofree char *disk_name = g_strconcat("base.", req->format, NULL);
    GStatBuf st;

    if (!carrel_util_ensure_dir(tmpl->dir, 0755, error) ||
        !copy_boot_file(req->disk, tmpl->dir, disk_name, &tmpl->disk_path, error) ||
        !copy_boot_file(req->kernel, tmpl->dir, "kernel", &tmpl->kernel_path, error) ||
        !copy_boot_file(req->initrd, tmpl->dir, "initrd.img", &tmpl->initrd_path, error) ||
        !check_disk(tmpl, error))
        return FALSE;
    tmpl->sha256 = carrel_util_sha256_file(tmpl->disk_path, error);
    if (!tmpl->sha256)
        return FALSE;
    if (g_stat(tmpl->disk_path, &st) == 0)
        tmpl->size_bytes = (guint64)st.st_size;
    return write_manifest(tmpl, error);
}

static CarrelTemplate *
import_while_busy(CarrelManager *mgr, const CarrelTemplateImport *req, const char *recipe_hash,
                  GError **error)
{
    g_autoptr(CarrelTemplate) tmpl = carrel_template_new();
    g_autofree char *version_text = NULL;

    tmpl->name = g_strdup(req->name);
    tmpl->format = g_strdup(req->format);
    tmpl->boot = req->boot;
    tmpl->cmdline = g_strdup(req->cmdline);
    tmpl->recipe_hash = g_strdup(recipe_hash);
    if (req->defaults) {
        tmpl->default_vcpus = req->defaults->default_vcpus;
        tmpl->default_memory_mib = req->defaults->default_memory_mib;
        tmpl->default_screen_width = req->defaults->default_screen_width;
        tmpl->default_screen_height = req->defaults->default_screen_height;
    }
    tmpl->created_at = carrel_util_now();
    tmpl->version = carrel_store_template_next_version(mgr->store, req->name, error);
    if (tmpl->version == 0)
        return NULL;
    version_text = g_strdup_printf("%u", tmpl->version);
    tmpl->dir = g_build_filename(mgr->state_dir, "templates", req->name, version_text, NULL);
    if (g_file_test(tmpl->dir, G_FILE_TEST_EXISTS) &&
        !carrel_util_remove_tree(tmpl->dir, error)) /* leftover of an interrupted import */
        return NULL;
    if (!fill_files(req, tmpl, error) || !carrel_store_template_insert(mgr->store, tmpl, error)) {
        (void)carrel_util_remove_tree(tmpl->dir, NULL);
        return NULL;
    }
    return g_steal_pointer(&tmpl);
}

CarrelTemplate *
carrel_manager_template_import_full(CarrelManager *mgr, const CarrelTemplateImport *req,
                                    const char *recipe_hash, GError **error)
{
    g_autofree char *key = g_strconcat("template:", req->name, NULL);
    CarrelTemplate *tmpl;

    if (!carrel_manager_disk_check(mgr, "importing a template", error) ||
        !carrel_manager_mark_busy(mgr, key, "an import", error))
        return NULL;
    tmpl = import_while_busy(mgr, req, recipe_hash, error);
    carrel_manager_clear_busy(mgr, key);
    if (!tmpl)
        g_prefix_error(error, "importing template '%s': ", req->name);
    return tmpl;
}

static JsonNode *
template_params(const char *name, guint version)
{
    JsonNode *node = carrel_conf_new_object_node();

    json_object_set_string_member(json_node_get_object(node), "template", name ? name : "");
    if (version)
        json_object_set_int_member(json_node_get_object(node), "version", version);
    return node;
}

CarrelTemplate *
carrel_manager_template_import(CarrelManager *mgr, const CarrelPrincipal *who,
                               const CarrelTemplateImport *req, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_TEMPLATE_IMPORT, NULL,
                           template_params(req->name, 0), error))
        return NULL;
    return carrel_door_finish(&door, carrel_manager_template_import_full(mgr, req, NULL, &local),
                              &local, error);
}

GPtrArray *
carrel_manager_template_list(CarrelManager *mgr, const CarrelPrincipal *who, GError **error)
{
    g_auto(CarrelDoor) door = {0};

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_TEMPLATE_READ, NULL, NULL, error))
        return NULL;
    return carrel_store_template_list(mgr->store, error);
}

CarrelTemplate *
carrel_manager_template_get(CarrelManager *mgr, const CarrelPrincipal *who, const char *name,
                            guint version, GError **error)
{
    g_auto(CarrelDoor) door = {0};

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_TEMPLATE_READ, NULL, NULL, error))
        return NULL;
    return carrel_store_template_get(mgr->store, name, version, error);
}

guint
carrel_manager_template_sessions(CarrelManager *mgr, const char *name, guint version)
{
    return carrel_store_template_count_sessions(mgr->store, name, version, NULL);
}

static GStrv
remove_versions(CarrelManager *mgr, const char *name, guint version, GError **error)
{
    g_autoptr(GPtrArray) all = carrel_store_template_list(mgr->store, error);
    g_autoptr(GStrvBuilder) refs = g_strv_builder_new();
    g_autoptr(GError) count_error = NULL;
    g_autofree char *shown = version ? g_strdup_printf("%s@%u", name, version) : g_strdup(name);
    guint used;
    gboolean any = FALSE;

    if (!all)
        return NULL;
    used = carrel_store_template_count_sessions(mgr->store, name, version, &count_error);
    if (count_error || used > 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "template '%s' is used by %u session(s): remove them first", shown, used);
        return NULL;
    }
    for (guint i = 0; i < all->len; i++) {
        CarrelTemplate *t = g_ptr_array_index(all, i);
        g_autofree char *ref = NULL;
        if (!g_str_equal(t->name, name) || (version && t->version != version))
            continue;
        /* The row first: a version without its files is never left behind in the store. */
        if (!carrel_store_template_delete(mgr->store, t->name, t->version, error) ||
            !carrel_util_remove_tree(t->dir, error))
            return NULL;
        ref = g_strdup_printf("%s@%u", t->name, t->version);
        g_strv_builder_add(refs, ref);
        any = TRUE;
    }
    if (!any) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "template '%s' does not exist",
                    shown);
        return NULL;
    }
    if (!version) {
        g_autofree char *top = g_build_filename(mgr->state_dir, "templates", name, NULL);
        if (!carrel_util_remove_tree(top, error))
            return NULL;
    }
    return g_strv_builder_end(refs);
}

static GStrv
remove_while_busy(CarrelManager *mgr, const char *name, guint version, GError **error)
{
    g_autofree char *key = g_strconcat("template:", name, NULL);
    GStrv refs;

    if (!carrel_manager_mark_busy(mgr, key, "a removal", error))
        return NULL;
    refs = remove_versions(mgr, name, version, error);
    carrel_manager_clear_busy(mgr, key);
    return refs;
}

GStrv
carrel_manager_template_remove(CarrelManager *mgr, const CarrelPrincipal *who, const char *name,
                               guint version, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_TEMPLATE_REMOVE, NULL,
                           template_params(name, version), error))
        return NULL;
    return carrel_door_finish(&door, remove_while_busy(mgr, name, version, &local), &local, error);
}
