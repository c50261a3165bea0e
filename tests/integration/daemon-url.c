#include "daemon-url.h"

char *
test_daemon_url(const char *state_dir, guint timeout_s, const char *log_path)
{
    g_autofree char *path = g_build_filename(state_dir, "web.url", NULL);
    g_autofree char *log = NULL;
    gint64 until = g_get_monotonic_time() + (gint64)timeout_s * G_USEC_PER_SEC;

    do {
        char *url = NULL;
        /* carreld writes the file whole (a rename): once there, it is complete. */
        if (g_file_get_contents(path, &url, NULL, NULL))
            return g_strstrip(url);
        g_usleep(50 * 1000);
    } while (g_get_monotonic_time() < until);
    g_printerr("carreld wrote no %s within %u s\n", path, timeout_s);
    if (log_path && g_file_get_contents(log_path, &log, NULL, NULL))
        g_printerr("carreld's log (%s):\n%s\n", log_path, log);
    return NULL;
}

guint
test_url_port(const char *url)
{
    g_autoptr(GUri) uri = g_uri_parse(url, G_URI_FLAGS_NONE, NULL);

    return uri && g_uri_get_port(uri) > 0 ? (guint)g_uri_get_port(uri) : 0;
}
