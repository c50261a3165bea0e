/*
 * The emulator every session's domain names: carrel-qemu (manager/daemon/carrel-qemu.c), QEMU
 * without transparent huge pages. libvirt starts it as its QEMU user, not as root, so every
 * folder on its path must let others through. A build tree in a private folder (/root/...) does
 * not: carreld then runs a copy in its state dir, which QEMU reaches already (the session disks
 * are there). The copy is rewritten only when it differs, since libvirt probes an emulator
 * again (seconds) whenever the file changes.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "core/core-priv.h"

/* Whether a user other than root and the owner may run path (each folder searchable). */
static gboolean
others_can_run(const char *path)
{
    g_autofree char *dir = g_path_get_dirname(path);
    struct stat st;

    if (g_stat(path, &st) != 0 || !S_ISREG(st.st_mode) || !(st.st_mode & S_IXOTH))
        return FALSE;
    for (;;) {
        g_autofree char *parent = NULL;

        if (g_stat(dir, &st) != 0 || !(st.st_mode & S_IXOTH))
            return FALSE;
        parent = g_path_get_dirname(dir);
        if (g_str_equal(parent, dir))
            return TRUE;
        g_free(dir);
        dir = g_steal_pointer(&parent);
    }
}

/* The copy under the state dir, written when it is missing or differs from path. */
static char *
copy_to_state(const char *state_dir, const char *path, GError **error)
{
    g_autofree char *dir = g_build_filename(state_dir, "emulator", NULL);
    g_autofree char *copy = g_build_filename(dir, "carrel-qemu", NULL);
    g_autofree char *want = NULL;
    g_autofree char *have = NULL;
    gsize want_len = 0, have_len = 0;

    if (!g_file_get_contents(path, &want, &want_len, error)) {
        g_prefix_error(error, "reading the emulator: ");
        return NULL;
    }
    if (g_mkdir_with_parents(dir, 0755) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "making '%s': %s", dir,
                    g_strerror(errno));
        return NULL;
    }
    if (g_file_get_contents(copy, &have, &have_len, NULL) && have_len == want_len &&
        memcmp(have, want, want_len) == 0 && g_chmod(copy, 0755) == 0)
        return g_steal_pointer(&copy);
    if (!g_file_set_contents_full(copy, want, (gssize)want_len, G_FILE_SET_CONTENTS_CONSISTENT,
                                  0755, error)) {
        g_prefix_error(error, "copying the emulator into the state dir: ");
        return NULL;
    }
    return g_steal_pointer(&copy);
}

/*
 * The folder where carrel-qemu keeps what QEMU answered about its CPU (its monitor relay,
 * manager/daemon/carrel-qemu-relay.c): QEMU's user writes it. Without one (a hypervisor with no
 * QEMU of its own, no DAC label) QEMU starts as before, each start answering libvirt's ~400
 * questions about its CPU itself.
 */
static char *
cpu_cache(CarrelManager *mgr)
{
    g_autofree char *dir = g_build_filename(mgr->state_dir, "emulator", "cpu", NULL);
    g_autofree char *parent = g_path_get_dirname(dir);
    g_autoptr(GError) local = NULL;

    if (g_mkdir_with_parents(parent, 0755) != 0 ||
        !carrel_hypervisor_make_qemu_dir(mgr->hv, dir, &local)) {
        if (local && !g_error_matches(local, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED))
            g_warning("QEMU answers libvirt's questions about its CPU at every start: %s",
                      local->message);
        return NULL;
    }
    return g_steal_pointer(&dir);
}

gboolean
carrel_manager_emulator_init(CarrelManager *mgr, const char *path, GError **error)
{
    if (!path || !*path)
        return TRUE;
    if (!g_path_is_absolute(path) || access(path, X_OK) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "emulator '%s' cannot be run: %s", path,
                    g_path_is_absolute(path) ? g_strerror(errno) : "not an absolute path");
        return FALSE;
    }
    if (others_can_run(path))
        mgr->emulator = g_strdup(path);
    else if (!(mgr->emulator = copy_to_state(mgr->state_dir, path, error)))
        return FALSE;
    mgr->cpu_cache = cpu_cache(mgr);
    return TRUE;
}
