/*
 * Unit tests of the api module's file replies: a file is sent from disk chunk by chunk, with
 * its length and name, and the bytes the client gets hash to the file's sha256, while the
 * process's peak memory does not grow by the file's size.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/api-priv.h"

/* Big enough that holding it whole would show in the peak, small enough for a shared host. */
#define BIG_FILE_BYTES (96 * 1024 * 1024)
#define PEAK_SLACK_BYTES (32 * 1024 * 1024)

#if defined(__SANITIZE_ADDRESS__)
/* ASan keeps freed blocks in a quarantine (256 MiB by default), which would show in the peak as
 * if the file were held: keep it small here (ASAN_OPTIONS still override it). */
const char *__asan_default_options(void);
const char *
__asan_default_options(void)
{
    return "quarantine_size_mb=1";
}
#endif

/* VmHWM of this process, in bytes. */
static guint64
peak_rss(void)
{
    g_autofree char *status = NULL;
    const char *at;

    assert_true(g_file_get_contents("/proc/self/status", &status, NULL, NULL));
    at = strstr(status, "VmHWM:");
    assert_non_null(at);
    return g_ascii_strtoull(at + strlen("VmHWM:"), NULL, 10) * 1024;
}

/* A file of size bytes of a repeating pattern; returns its sha256. */
static char *
write_big_file(const char *path, gsize size)
{
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_autofree guint8 *block = g_malloc(1024 * 1024);
    FILE *out = fopen(path, "wbe");

    assert_non_null(out);
    for (gsize i = 0; i < 1024 * 1024; i++)
        block[i] = (guint8)(i * 31 + 7);
    for (gsize done = 0; done < size; done += 1024 * 1024) {
        gsize n = MIN(size - done, (gsize)1024 * 1024);
        block[0] = (guint8)(done >> 20); /* no two megabytes alike */
        assert_int_equal(fwrite(block, 1, n, out), n);
        g_checksum_update(sum, block, n);
    }
    assert_int_equal(fclose(out), 0);
    return g_strdup(g_checksum_get_string(sum));
}

static void
serve_file(SoupServer *server, SoupServerMessage *msg, const char *path, GHashTable *query,
           gpointer data)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelApiReply) reply =
        carrel_api_reply_new_file(SOUP_STATUS_OK, data, "application/octet-stream", &error);

    assert_non_null(reply);
    assert_int_equal(carrel_api_reply_get_kind(reply), CARREL_API_REPLY_FILE);
    carrel_api_reply_set_attachment(reply, "big.bin");
    carrel_api_reply_write(reply, NULL, msg);
}

typedef struct {
    GUri *uri;
    GMainLoop *loop;
    char *sha256;
    guint64 received;
    goffset length;
    char *disposition;
    guint status;
} Fetch;

/* The client, in its own thread and context: reads the body as a stream, 1 MiB at a time. */
static gpointer
fetch_thread(gpointer data)
{
    Fetch *f = data;
    g_autoptr(GMainContext) ctx = g_main_context_new();

    g_main_context_push_thread_default(ctx);
    {
        g_autoptr(SoupSession) session = soup_session_new();
        g_autoptr(SoupMessage) msg = soup_message_new_from_uri("GET", f->uri);
        g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
        g_autofree guint8 *buf = g_malloc(1024 * 1024);
        g_autoptr(GError) error = NULL;
        g_autoptr(GInputStream) in = soup_session_send(session, msg, NULL, &error);
        gssize n;

        if (in) {
            while ((n = g_input_stream_read(in, buf, 1024 * 1024, NULL, &error)) > 0) {
                g_checksum_update(sum, buf, n);
                f->received += (guint64)n;
            }
        }
        f->status = soup_message_get_status(msg);
        f->length = soup_message_headers_get_content_length(soup_message_get_response_headers(msg));
        f->disposition = g_strdup(soup_message_headers_get_one(
            soup_message_get_response_headers(msg), "Content-Disposition"));
        f->sha256 = g_strdup(g_checksum_get_string(sum));
    }
    g_main_context_pop_thread_default(ctx);
    g_main_loop_quit(f->loop);
    return NULL;
}

/* (d) A download streams: same bytes, length and name, and the peak does not hold the file. */
static void
test_file_reply_streams(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("carrel-api-file-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "big.bin", NULL);
    g_autofree char *sha = write_big_file(path, BIG_FILE_BYTES);
    g_autoptr(SoupServer) server = soup_server_new(NULL, NULL);
    g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);
    g_autoptr(GError) error = NULL;
    g_autoptr(GSList) uris = NULL;
    Fetch f = {0};
    GThread *client;
    guint64 before;

    soup_server_add_handler(server, NULL, serve_file, path, NULL);
    assert_true(soup_server_listen_local(server, 0, SOUP_SERVER_LISTEN_IPV4_ONLY, &error));
    uris = soup_server_get_uris(server);
    assert_non_null(uris);
    f.uri = g_uri_parse_relative(uris->data, "/v1/artifacts/a-1", G_URI_FLAGS_NONE, NULL);
    f.loop = loop;
    before = peak_rss();
    client = g_thread_new("fetch", fetch_thread, &f);
    g_main_loop_run(loop);
    g_thread_join(client);

    assert_int_equal(f.status, SOUP_STATUS_OK);
    assert_int_equal(f.length, BIG_FILE_BYTES);
    assert_int_equal(f.received, BIG_FILE_BYTES);
    assert_string_equal(f.sha256, sha);
    assert_non_null(strstr(f.disposition, "big.bin"));
    /* Read whole (the old mapped-then-copied reply), the peak would grow by the file's size. */
    assert_true(peak_rss() - before < PEAK_SLACK_BYTES);

    g_slist_free_full(g_steal_pointer(&uris), (GDestroyNotify)g_uri_unref);
    g_uri_unref(f.uri);
    g_free(f.sha256);
    g_free(f.disposition);
    soup_server_disconnect(server);
    assert_true(carrel_util_remove_tree(dir, NULL));
}

/* What cannot be sent is an error before anything is written: absent, a directory, a link. */
static void
test_file_reply_refusals(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("carrel-api-file-XXXXXX", NULL);
    g_autofree char *link = g_build_filename(dir, "link", NULL);
    g_autofree char *missing = g_build_filename(dir, "missing", NULL);
    g_autoptr(GError) error = NULL;

    assert_null(carrel_api_reply_new_file(SOUP_STATUS_OK, missing, "text/plain", &error));
    assert_non_null(error);
    g_clear_error(&error);
    assert_null(carrel_api_reply_new_file(SOUP_STATUS_OK, dir, "text/plain", &error));
    assert_non_null(error);
    g_clear_error(&error);
    assert_int_equal(symlink("/etc/hostname", link), 0);
    assert_null(carrel_api_reply_new_file(SOUP_STATUS_OK, link, "text/plain", &error));
    assert_non_null(error);
    assert_true(carrel_util_remove_tree(dir, NULL));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_reply_streams),
        cmocka_unit_test(test_file_reply_refusals),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
