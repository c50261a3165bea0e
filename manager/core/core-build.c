#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/core-priv.h"

/* What a recipe's build script leaves in its output folder. */
static const char *const recipe_outputs[] = {"disk.qcow2", "vmlinuz", "initrd.img", "cmdline"};

#define BUILD_TIMEOUT_S (30 * 60)

typedef struct {
    CarrelManager *mgr;
    char *name;
} BuildData;

static void
build_data_free(gpointer data)
{
    BuildData *bd = data;

    g_free(bd->name);
    g_free(bd);
}

static gint
compare_strings(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static gboolean
collect_files(const char *root, const char *rel, GPtrArray *out, GError **error)
{
    g_autofree char *dir_path = g_build_filename(root, rel, NULL);
    g_autoptr(GDir) dir = g_dir_open(dir_path, 0, error);
    const char *entry;

    if (!dir)
        return FALSE;
    while ((entry = g_dir_read_name(dir))) {
        g_autofree char *child_rel = *rel ? g_build_filename(rel, entry, NULL) : g_strdup(entry);
        g_autofree char *child = g_build_filename(root, child_rel, NULL);
        if (g_file_test(child, G_FILE_TEST_IS_DIR) && !g_file_test(child, G_FILE_TEST_IS_SYMLINK)) {
            if (!collect_files(root, child_rel, out, error))
                return FALSE;
        } else {
            g_ptr_array_add(out, g_steal_pointer(&child_rel));
        }
    }
    return TRUE;
}

/* Feeds every file under dir (path, exec bit, contents), in sorted order, to sum. */
static gboolean
hash_tree(GChecksum *sum, const char *recipe_dir, GError **error)
{
    g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func(g_free);

    if (!collect_files(recipe_dir, "", files, error))
        return FALSE;
    g_ptr_array_sort(files, compare_strings);
    for (guint i = 0; i < files->len; i++) {
        const char *rel = g_ptr_array_index(files, i);
        g_autofree char *path = g_build_filename(recipe_dir, rel, NULL);
        g_autofree char *file_sum = carrel_util_sha256_file(path, error);
        const char *exec = g_file_test(path, G_FILE_TEST_IS_EXECUTABLE) ? "x" : "-";

        if (!file_sum)
            return FALSE;
        g_checksum_update(sum, (const guchar *)rel, -1);
        g_checksum_update(sum, (const guchar *)exec, 1);
        g_checksum_update(sum, (const guchar *)file_sum, -1);
    }
    return TRUE;
}

/* The folder beside the recipes that their build scripts source (templates/lib). */
#define RECIPE_LIB_DIR "lib"

char *
carrel_manager_recipe_hash(CarrelManager *mgr, const char *recipe_dir, GError **error)
{
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_autofree char *recipes = g_path_get_dirname(recipe_dir);
    g_autofree char *lib = g_build_filename(recipes, RECIPE_LIB_DIR, NULL);

    if (!hash_tree(sum, recipe_dir, error))
        return NULL;
    if (g_file_test(lib, G_FILE_TEST_IS_DIR)) {
        g_checksum_update(sum, (const guchar *)RECIPE_LIB_DIR, -1);
        if (!hash_tree(sum, lib, error))
            return NULL;
    }
    if (mgr->guest_tool && mgr->guest_tool_src) {
        g_checksum_update(sum, (const guchar *)"guest-tools", -1);
        if (!hash_tree(sum, mgr->guest_tool_src, error))
            return NULL;
    }
    return g_strdup(g_checksum_get_string(sum));
}

static gboolean
check_outputs(const char *dir, GError **error)
{
    for (gsize i = 0; i < G_N_ELEMENTS(recipe_outputs); i++) {
        g_autofree char *path = g_build_filename(dir, recipe_outputs[i], NULL);
        if (!g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "the recipe did not produce '%s'",
                        recipe_outputs[i]);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean
outputs_complete(const char *dir)
{
    g_autofree char *marker = g_build_filename(dir, ".complete", NULL);

    return g_file_test(marker, G_FILE_TEST_EXISTS) && check_outputs(dir, NULL);
}

static gboolean
relay_progress(CarrelJob *job, GSubprocess *proc, GError **error)
{
    GInputStream *err = g_subprocess_get_stderr_pipe(proc);
    g_autoptr(GDataInputStream) lines = g_data_input_stream_new(err);

    for (;;) {
        g_autoptr(GError) local = NULL;
        g_autofree char *line = g_data_input_stream_read_line_utf8(lines, NULL, NULL, &local);
        if (!line)
            break;
        if (g_str_has_prefix(line, "progress: "))
            carrel_job_progress(job, line + strlen("progress: "));
        else if (g_str_has_prefix(line, "error: ") || g_str_has_prefix(line, "E: "))
            carrel_job_progress(job, line);
    }
    return g_subprocess_wait_check(proc, NULL, error);
}

static gboolean
run_recipe(CarrelManager *mgr, CarrelJob *job, const char *script, const char *out_dir,
           GError **error)
{
    g_autoptr(GSubprocessLauncher) launcher = NULL;
    g_autoptr(GSubprocess) proc = NULL;

    launcher = g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDERR_PIPE |
                                         G_SUBPROCESS_FLAGS_STDOUT_SILENCE |
                                         G_SUBPROCESS_FLAGS_STDIN_INHERIT);
    g_subprocess_launcher_setenv(launcher, "DEBIAN_FRONTEND", "noninteractive", TRUE);
    if (mgr->guest_tool)
        g_subprocess_launcher_setenv(launcher, "CARREL_GUEST_BIN", mgr->guest_tool, TRUE);
    proc = g_subprocess_launcher_spawn(launcher, error, script, out_dir, NULL);
    if (!proc)
        return FALSE;
    if (!relay_progress(job, proc, error)) {
        g_prefix_error(error, "recipe '%s' failed: ", script);
        return FALSE;
    }
    return TRUE;
}

/* Builds into a temporary folder beside the cache entry, then renames it into place. */
static gboolean
build_into_cache(CarrelManager *mgr, CarrelJob *job, const char *script, const char *cached,
                 GError **error)
{
    g_autofree char *tmp = g_strconcat(cached, ".tmp", NULL);
    g_autofree char *marker = g_build_filename(tmp, ".complete", NULL);

    if (!carrel_util_remove_tree(tmp, error) || !carrel_util_ensure_dir(tmp, 0755, error))
        return FALSE;
    carrel_job_progress(job, "running the recipe (this takes a few minutes)");
    if (!run_recipe(mgr, job, script, tmp, error) || !check_outputs(tmp, error) ||
        !carrel_util_write_file(marker, "", 0, 0644, error) ||
        !carrel_util_remove_tree(cached, error)) {
        (void)carrel_util_remove_tree(tmp, NULL);
        return FALSE;
    }
    if (g_rename(tmp, cached) < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "renaming '%s': %s", tmp,
                    g_strerror(errno));
        return FALSE;
    }
    return TRUE;
}

/* Two carrelds sharing a cache (two test halves, two users) may build one recipe at once: the
 * first builds, the other waits here and then reuses its entry. The lock goes with the fd. */
static int
lock_entry(CarrelJob *job, const char *cached, GError **error)
{
    g_autofree char *dir = g_path_get_dirname(cached);
    g_autofree char *path = g_strconcat(cached, ".lock", NULL);
    int fd;

    if (!carrel_util_ensure_dir(dir, 0755, error))
        return -1;
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "opening '%s': %s", path,
                    g_strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        return fd;
    carrel_job_progress(job, "waiting for another build of this recipe");
    while (flock(fd, LOCK_EX) < 0) {
        if (errno == EINTR)
            continue;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "locking '%s': %s", path,
                    g_strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* The cache entry's outputs, built by this carreld or another, or reused. */
static gboolean
ensure_cached(CarrelManager *mgr, CarrelJob *job, const char *script, const char *cached,
              GError **error)
{
    int fd = lock_entry(job, cached, error);
    gboolean ok;

    if (fd < 0)
        return FALSE;
    if (outputs_complete(cached)) {
        carrel_job_progress(job, "reusing the cached build");
        ok = TRUE;
    } else {
        ok = build_into_cache(mgr, job, script, cached, error);
    }
    close(fd);
    return ok;
}

static CarrelTemplate *
find_built(CarrelManager *mgr, const char *name, const char *hash)
{
    g_autoptr(GPtrArray) all = carrel_store_template_list(mgr->store, NULL);

    for (guint i = 0; all && i < all->len; i++) {
        CarrelTemplate *t = g_ptr_array_index(all, i);
        if (g_str_equal(t->name, name) && g_strcmp0(t->recipe_hash, hash) == 0)
            return g_steal_pointer(&g_ptr_array_index(all, i));
    }
    return NULL;
}

static CarrelTemplate *
import_cached(CarrelManager *mgr, const char *name, const char *cached, const char *hash,
              GError **error)
{
    g_autoptr(CarrelTemplateImport) req = g_new0(CarrelTemplateImport, 1);
    g_autofree char *cmdline_path = g_build_filename(cached, "cmdline", NULL);
    g_autofree char *cmdline = NULL;

    if (!g_file_get_contents(cmdline_path, &cmdline, NULL, error))
        return NULL;
    req->name = g_strdup(name);
    req->format = g_strdup("qcow2");
    req->boot = CARREL_BOOT_DIRECT;
    req->disk = g_build_filename(cached, "disk.qcow2", NULL);
    /* An uncompressed vmlinux boots ~3 s faster under TCG (QEMU's PVH entry) when the recipe
     * makes one. */
    req->kernel = g_build_filename(cached, "vmlinux", NULL);
    if (!g_file_test(req->kernel, G_FILE_TEST_IS_REGULAR)) {
        g_free(req->kernel);
        req->kernel = g_build_filename(cached, "vmlinuz", NULL);
    }
    req->initrd = g_build_filename(cached, "initrd.img", NULL);
    req->cmdline = g_strdup(g_strstrip(cmdline));
    /* Checked before the import: a recipe with bad defaults makes no template. */
    req->defaults = carrel_manager_recipe_defaults(cached, error);
    if (!req->defaults)
        return NULL;
    return carrel_manager_template_import_full(mgr, req, hash, error);
}

static gboolean
build_while_busy(CarrelJob *job, gpointer data, JsonNode **ret_result, GError **error)
{
    BuildData *bd = data;
    g_autofree char *recipe_dir = g_build_filename(bd->mgr->recipes_dir, bd->name, NULL);
    g_autofree char *script = g_build_filename(recipe_dir, "build", NULL);
    g_autofree char *hash = carrel_manager_recipe_hash(bd->mgr, recipe_dir, error);
    g_autofree char *cached = NULL;
    g_autofree char *entry = NULL;
    g_autoptr(CarrelTemplate) tmpl = NULL;

    if (!hash)
        return FALSE;
    entry = g_strdup_printf("%s-%.16s", bd->name, hash);
    cached = g_build_filename(bd->mgr->cache_dir, "templates", entry, NULL);
    carrel_job_progress(job, entry);
    tmpl = find_built(bd->mgr, bd->name, hash);
    if (tmpl) {
        carrel_job_progress(job, "this recipe is already imported");
    } else {
        if (!ensure_cached(bd->mgr, job, script, cached, error))
            return FALSE;
        carrel_job_progress(job, "importing the image");
        tmpl = import_cached(bd->mgr, bd->name, cached, hash, error);
        if (!tmpl || !carrel_manager_template_record_build(tmpl, cached, error))
            return FALSE;
    }
    carrel_job_progress(job, "done");
    *ret_result = carrel_template_to_json(tmpl, 0);
    return TRUE;
}

static gboolean
build_job(CarrelJob *job, gpointer data, JsonNode **ret_result, GError **error)
{
    BuildData *bd = data;
    g_autofree char *key = g_strconcat("build:", bd->name, NULL);
    gboolean ok = build_while_busy(job, data, ret_result, error);

    if (!ok)
        g_prefix_error(error, "building template '%s': ", bd->name);
    carrel_manager_clear_busy(bd->mgr, key);
    return ok;
}

static CarrelJob *
start_build(CarrelManager *mgr, const char *name, GError **error)
{
    g_autofree char *script = NULL;
    g_autofree char *key = NULL;
    CarrelJob *job;
    BuildData *bd;

    if (!carrel_util_is_valid_name(name)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "invalid template name");
        return NULL;
    }
    script = g_build_filename(mgr->recipes_dir, name, "build", NULL);
    if (!g_file_test(script, G_FILE_TEST_IS_EXECUTABLE)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "no recipe '%s' (looked for '%s')",
                    name, script);
        return NULL;
    }
    key = g_strconcat("build:", name, NULL);
    if (!carrel_manager_disk_check(mgr, "building a template", error) ||
        !carrel_manager_mark_busy(mgr, key, "a build", error))
        return NULL;
    job = carrel_job_new("template-build", name);
    bd = g_new0(BuildData, 1);
    bd->mgr = mgr;
    bd->name = g_strdup(name);
    carrel_manager_add_job(mgr, job);
    carrel_job_run(job, build_job, bd, build_data_free);
    return job;
}

CarrelJob *
carrel_manager_template_build(CarrelManager *mgr, const CarrelPrincipal *who, const char *name,
                              GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    JsonNode *params = carrel_conf_new_object_node();

    json_object_set_string_member(json_node_get_object(params), "template", name ? name : "");
    /* The audit row says the build started; its outcome is the job's. */
    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_TEMPLATE_BUILD, NULL, params, error))
        return NULL;
    return carrel_door_finish(&door, start_build(mgr, name, &local), &local, error);
}
