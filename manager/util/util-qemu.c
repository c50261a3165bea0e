/*
 * util: QEMU's command line with guest RAM in a file, for carrel-qemu (pure, no I/O).
 */
#include <string.h>

#include "util/util.h"

/* libvirt's default RAM backend of a machine without NUMA, as libvirt 9 writes it. */
#define RAM_BACKEND_PREFIX "{\"qom-type\":\"memory-backend-ram\",\"id\":\"pc.ram\","

const char carrel_util_qemu_ignore_shared_qmp[] =
    "{\"execute\":\"qmp_capabilities\"}\n"
    "{\"execute\":\"migrate-set-capabilities\",\"arguments\":{\"capabilities\":"
    "[{\"capability\":\"x-ignore-shared\",\"state\":true}]}}\n";

/* The file's path from the variable's value; *ret_shared says how it is mapped. */
static const char *
parse_value(const char *value, gboolean *ret_shared, GError **error)
{
    const char *path = NULL;

    if (value && g_str_has_prefix(value, CARREL_UTIL_QEMU_MEMORY_SHARED)) {
        path = value + strlen(CARREL_UTIL_QEMU_MEMORY_SHARED);
        *ret_shared = TRUE;
    } else if (value && g_str_has_prefix(value, CARREL_UTIL_QEMU_MEMORY_PRIVATE)) {
        path = value + strlen(CARREL_UTIL_QEMU_MEMORY_PRIVATE);
        *ret_shared = FALSE;
    }
    if (!path || !g_path_is_absolute(path) || !carrel_util_is_clean_text(path)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "%s must be shared:PATH or private:PATH with an absolute PATH",
                    CARREL_UTIL_QEMU_MEMORY_ENV);
        return NULL;
    }
    return path;
}

/* path as a JSON string, quotes included. */
static char *
json_string(const char *path)
{
    GString *out = g_string_new("\"");

    for (const char *p = path; *p; p++) {
        if (*p == '"' || *p == '\\')
            g_string_append_c(out, '\\');
        g_string_append_c(out, *p);
    }
    g_string_append_c(out, '"');
    return g_string_free(out, FALSE);
}

/* The backend argument as a file backend: the same members, the file and its mapping added. */
static char *
file_backend(const char *arg, const char *path, gboolean shared)
{
    g_autofree char *quoted = json_string(path);
    const char *rest = arg + strlen("{\"qom-type\":\"memory-backend-ram\"");
    gsize rest_len = strlen(rest) - 1; /* without the closing brace */

    return g_strdup_printf("{\"qom-type\":\"memory-backend-file\"%.*s,\"mem-path\":%s,"
                           "\"share\":%s}",
                           (int)rest_len, rest, quoted, shared ? "true" : "false");
}

GStrv
carrel_util_qemu_memory_args(const char *const *argv, const char *value, int monitor_fd,
                             GError **error)
{
    g_autoptr(GStrvBuilder) out = g_strv_builder_new();
    gboolean shared = FALSE, found = FALSE;
    const char *path = parse_value(value, &shared, error);

    if (!path)
        return NULL;
    for (guint i = 0; argv[i]; i++) {
        const char *arg = argv[i];

        if (i > 0 && g_str_equal(argv[i - 1], "-object") &&
            g_str_has_prefix(arg, RAM_BACKEND_PREFIX) && g_str_has_suffix(arg, "}") && !found) {
            g_autofree char *file = file_backend(arg, path, shared);

            g_strv_builder_add(out, file);
            found = TRUE;
            continue;
        }
        g_strv_builder_add(out, arg);
    }
    if (!found) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "%s is set but QEMU's arguments have no RAM backend 'pc.ram' to put into a "
                    "file",
                    CARREL_UTIL_QEMU_MEMORY_ENV);
        return NULL;
    }
    /* A monitor only carrel-qemu's helper holds: a connected socket, nothing listens. */
    {
        g_autofree char *chardev = g_strdup_printf("socket,id=carrel-memory,fd=%d", monitor_fd);

        g_strv_builder_add_many(out, "-chardev", chardev, "-mon",
                                "chardev=carrel-memory,mode=control", NULL);
    }
    return g_strv_builder_end(out);
}

#define MONITOR_PREFIX "socket,id=charmonitor,"

gboolean
carrel_util_qemu_monitor_args(const char *const *argv, int qemu_fd, GStrv *ret_argv,
                              int *ret_listen_fd)
{
    g_autoptr(GStrvBuilder) out = g_strv_builder_new();
    int listen_fd = -1;

    for (guint i = 0; argv[i]; i++) {
        const char *arg = argv[i];

        if (listen_fd < 0 && i > 0 && g_str_equal(argv[i - 1], "-chardev") &&
            g_str_has_prefix(arg, MONITOR_PREFIX)) {
            g_auto(GStrv) parts = g_strsplit(arg + strlen(MONITOR_PREFIX), ",", -1);
            guint64 fd = G_MAXUINT64;

            /* Exactly libvirt's form: fd=N,server=on,wait=off; anything else is left alone. */
            if (g_strv_length(parts) != 3 || !g_str_has_prefix(parts[0], "fd=") ||
                !g_ascii_string_to_unsigned(parts[0] + 3, 10, 0, G_MAXINT, &fd, NULL))
                return FALSE;
            if (!g_str_equal(parts[1], "server=on") || !g_str_equal(parts[2], "wait=off"))
                return FALSE;
            listen_fd = (int)fd;
            {
                g_autofree char *mine =
                    g_strdup_printf(MONITOR_PREFIX "fd=%d,server=on,wait=off", qemu_fd);

                g_strv_builder_add(out, mine);
            }
            continue;
        }
        g_strv_builder_add(out, arg);
    }
    if (listen_fd < 0)
        return FALSE;
    *ret_argv = g_strv_builder_end(out);
    *ret_listen_fd = listen_fd;
    return TRUE;
}

char *
carrel_util_qemu_cpu_key(const char *const *argv, const char *binary_identity)
{
    static const char *const options[] = {"-cpu", "-machine", "-accel", "-smp", "-global", NULL};
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);

    g_checksum_update(sum, (const guchar *)binary_identity, -1);
    for (guint i = 1; argv[0] && argv[i]; i++) {
        if (!g_strv_contains(options, argv[i - 1]))
            continue;
        g_checksum_update(sum, (const guchar *)"\n", 1);
        g_checksum_update(sum, (const guchar *)argv[i - 1], -1);
        g_checksum_update(sum, (const guchar *)"=", 1);
        g_checksum_update(sum, (const guchar *)argv[i], -1);
    }
    return g_strdup(g_checksum_get_string(sum));
}
