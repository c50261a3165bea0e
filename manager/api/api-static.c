/*
 * api: the web console's static files (web-console/ at /, spice-html5 at /spice-html5/), read
 * without following links and served with a strict content security policy.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api-priv.h"

#define STATIC_FILE_MAX (8 * 1024 * 1024)

/* Scripts, styles and images only from here; no inline code; sockets only back to carreld. */
#define WEB_CSP                                                                                    \
    "default-src 'self'; img-src 'self' data: blob:; connect-src 'self' ws: wss:; "                \
    "style-src 'self'; script-src 'self'; media-src 'self' blob:; object-src 'none'; "             \
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

static const char *
content_type(const char *path)
{
    static const char *const table[][2] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".json", "application/json"},
        {".txt", "text/plain; charset=utf-8"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(table); i++) {
        if (g_str_has_suffix(path, table[i][0]))
            return table[i][1];
    }
    return NULL;
}

/* Path segments that stay inside the served folder: no dot files, no '..', no backslashes. */
static gboolean
static_path_ok(const char *rel)
{
    g_auto(GStrv) parts = g_strsplit(rel, "/", -1);

    if (!*rel || strlen(rel) > 256)
        return FALSE;
    for (guint i = 0; parts[i]; i++) {
        if (parts[i][0] == '\0' || parts[i][0] == '.' || strchr(parts[i], '\\') ||
            !carrel_util_is_clean_text(parts[i]))
            return FALSE;
    }
    return TRUE;
}

/* Reads root/rel: a regular file, opened without following a symlink at its last component. */
static GBytes *
read_static(const char *root, const char *rel)
{
    g_autofree char *path = g_build_filename(root, rel, NULL);
    g_autofree char *data = NULL;
    struct stat st;
    gssize got;
    int fd;

    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > STATIC_FILE_MAX) {
        close(fd);
        return NULL;
    }
    data = g_malloc(st.st_size + 1);
    got = read(fd, data, st.st_size);
    close(fd);
    if (got != st.st_size)
        return NULL;
    return g_bytes_new_take(g_steal_pointer(&data), st.st_size);
}

static CarrelApiReply *
static_error(guint status, const char *text)
{
    return carrel_api_reply_new_bytes(status, g_bytes_new_static(text, strlen(text)),
                                      "text/plain; charset=utf-8");
}

CarrelApiReply *
carrel_api_static_reply(CarrelApi *api, const char *method, const char *path)
{
    g_autofree char *decoded = g_uri_unescape_string(path, NULL);
    const char *root = api->web_dir;
    const char *rel;
    const char *type;
    GBytes *body = NULL;
    CarrelApiReply *reply;

    if (!g_str_equal(method, "GET") && !g_str_equal(method, "HEAD"))
        return static_error(SOUP_STATUS_METHOD_NOT_ALLOWED, "method not allowed\n");
    rel = decoded ? decoded + 1 : "";
    if (g_str_equal(rel, ""))
        rel = "index.html";
    if (g_str_has_prefix(rel, "spice-html5/")) {
        root = api->spice_dir;
        rel += strlen("spice-html5/");
    }
    type = content_type(rel);
    if (!root || !decoded || !static_path_ok(rel) || !type || !(body = read_static(root, rel)))
        return static_error(SOUP_STATUS_NOT_FOUND, "not found\n");
    reply = carrel_api_reply_new_bytes(SOUP_STATUS_OK, body, type);
    carrel_api_reply_add_header(reply, "Content-Security-Policy", WEB_CSP);
    carrel_api_reply_add_header(reply, "X-Content-Type-Options", "nosniff");
    carrel_api_reply_add_header(reply, "Referrer-Policy", "no-referrer");
    carrel_api_reply_add_header(reply, "Cache-Control", "no-cache");
    return reply;
}
