/*
 * Evidence bundles end to end over the fake hypervisor: a session with a kept screenshot and an
 * extracted artifact is exported through the real API (GET /v1/sessions/{id}/export) and the
 * real client, and by the real `carrel export` binary; `carrel verify` passes it pinned to the
 * host key from /v1/version, and names the file when one byte of a screenshot, an artifact or
 * the timeline is flipped. The export is audited; a destroyed session still exports.
 */
#include <fcntl.h>
#include <unistd.h>

#include <gio/gunixoutputstream.h>

#include "carrel-config.h"
#include "core-fixture.h"
#include "api/api-priv.h"
#include "archive/archive.h"
#include "client/client.h"
#include "evidence/evidence.h"

#define TOKEN "export-test-token-0123456789"

typedef struct {
    char *url;
    char *path;
    char *out;
    gboolean ok;
    gint done;
} Download;

static gpointer
download_thread(gpointer data)
{
    Download *d = data;
    g_autoptr(CarrelClient) client = carrel_client_new(NULL, d->url, TOKEN, 60, NULL);
    g_autoptr(GFile) file = g_file_new_for_path(d->out);
    g_autoptr(GFileOutputStream) out =
        g_file_replace(file, NULL, FALSE, G_FILE_CREATE_NONE, NULL, NULL);
    g_auto(CarrelClientDownload) info = {0};

    d->ok = client && out &&
            carrel_client_download(client, d->path, G_OUTPUT_STREAM(out), &info, NULL) &&
            g_output_stream_close(G_OUTPUT_STREAM(out), NULL, NULL) && info.bytes > 0;
    g_atomic_int_set(&d->done, 1);
    return NULL;
}

/* Runs the main loop (the API's) until the flag is set. */
static void
spin(gint *flag)
{
    while (!g_atomic_int_get(flag))
        g_main_context_iteration(NULL, TRUE);
}

static void
on_exited(GObject *source, GAsyncResult *result, gpointer data)
{
    (void)g_subprocess_wait_finish(G_SUBPROCESS(source), result, NULL);
    g_atomic_int_set((gint *)data, 1);
}

/* Runs the carrel binary with argv while serving the API; its exit status and stdout. */
static int
run_carrel(const char *url, const char *const *args, char **ret_stdout)
{
    g_autoptr(GSubprocessLauncher) l = g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDOUT_PIPE);
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_autoptr(GSubprocess) p = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *bin = g_build_filename(CARREL_BUILD_DIR, "manager", "cli", "carrel", NULL);
    g_autoptr(GBytes) out = NULL;
    gint done = 0;

    g_subprocess_launcher_setenv(l, "CARREL_TOKEN", TOKEN, TRUE);
    g_subprocess_launcher_setenv(l, "CARREL_URL", url, TRUE);
    g_ptr_array_add(argv, bin);
    for (guint i = 0; args[i]; i++)
        g_ptr_array_add(argv, (gpointer)args[i]);
    g_ptr_array_add(argv, NULL);
    p = g_subprocess_launcher_spawnv(l, (const char *const *)argv->pdata, &error);
    assert_non_null(p);
    g_subprocess_wait_async(p, NULL, on_exited, &done);
    spin(&done);
    {
        GInputStream *in = g_subprocess_get_stdout_pipe(p);
        out = g_input_stream_read_bytes(in, 1 << 20, NULL, NULL);
    }
    *ret_stdout = out ? g_strndup(g_bytes_get_data(out, NULL), g_bytes_get_size(out)) : NULL;
    return g_subprocess_get_exit_status(p);
}

/* A session with a kept screenshot and an artifact (/out/a.txt, "hello"). */
static CarrelSession *
busy_session(Fixture *fx)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = create(fx, "evidence", &error);
    g_autofree char *tar = g_build_filename(fx->dir, "guest.tar", NULL);
    g_autoptr(CarrelArchiveWriter) w = carrel_archive_writer_new(tar, NULL, NULL);
    CarrelScreenshotRequest req = {.scale = 1};
    char *paths[] = {(char *)"/out", NULL};
    CarrelExtractRequest xreq = {.paths = paths, .max_bytes = 1 << 20, .max_files = 100};
    g_autoptr(CarrelExtraction) x = NULL;
    g_autoptr(GBytes) shot = NULL;
    g_autofree char *data = NULL;
    gsize len = 0;

    assert_non_null(s);
    shot = carrel_manager_session_screenshot(fx->mgr, ADMIN, s->id, &req, &error);
    assert_non_null(shot);
    assert_true(carrel_archive_writer_add_bytes(w, "/out/a.txt", (const guint8 *)"hello", 5, 0640,
                                                1000, 1000, NULL));
    assert_true(carrel_archive_writer_finish(w, NULL));
    assert_true(g_file_get_contents(tar, &data, &len, NULL));
    carrel_hypervisor_fake_set_read_fallback(fx->hv, g_bytes_new_take(g_steal_pointer(&data), len));
    x = carrel_manager_session_extract(fx->mgr, ADMIN, s->id, &xreq, &error);
    assert_non_null(x);
    return g_steal_pointer(&s);
}

static const CarrelEvidenceFile *
find_kind(const CarrelEvidenceManifest *m, const char *kind)
{
    for (guint i = 0; i < m->files->len; i++) {
        const CarrelEvidenceFile *f = g_ptr_array_index(m->files, i);
        if (g_str_equal(f->kind, kind))
            return f;
    }
    fail_msg("no file of kind %s", kind);
    return NULL;
}

static CarrelEvidenceReport *
verify_file(const char *path, const char *pin)
{
    int fd = g_open(path, O_RDONLY | O_CLOEXEC, 0);
    CarrelEvidenceReport *r;

    assert_true(fd >= 0);
    r = carrel_evidence_verify(fd, pin, NULL);
    close(fd);
    assert_non_null(r);
    return r;
}

/* A copy of path with one byte of member name flipped (walking the ustar headers). */
static char *
flipped(Fixture *fx, const char *path, const char *name)
{
    g_autofree char *tar = NULL;
    g_autofree char *base = g_strdelimit(g_strdup(name), "/", '_');
    char *copy = g_strdup_printf("%s/flipped-%s.tar", fx->dir, base);
    gsize len = 0, off = 0;

    assert_true(g_file_get_contents(path, &tar, &len, NULL));
    while (off + 512 <= len && tar[off]) {
        char size_text[13] = {0};
        gsize size;

        memcpy(size_text, tar + off + 124, 12);
        size = (gsize)g_ascii_strtoull(size_text, NULL, 8);
        if (tar[off + 156] != 'x' && strncmp(tar + off, name, 100) == 0) {
            tar[off + 512 + size / 2] ^= 0x20;
            assert_true(g_file_set_contents(copy, tar, (gssize)len, NULL));
            return copy;
        }
        off += 512 + (size + 511) / 512 * 512;
    }
    fail_msg("no member %s", name);
    return NULL;
}

static gboolean
audited_export(Fixture *fx, const char *session_id)
{
    CarrelAuditFilter filter = {.session_id = session_id, .operation = "session.export"};
    g_autoptr(GPtrArray) rows = carrel_store_audit_list(fx->mgr->store, &filter, NULL);

    return rows && rows->len > 0;
}

static void
test_export_route_and_cli(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) any = g_inet_socket_address_new(lo, 0);
    g_autoptr(CarrelSession) s = NULL;
    g_autoptr(CarrelApi) api = NULL;
    g_autoptr(CarrelEvidenceReport) r = NULL;
    g_autofree char *cli_out = g_build_filename(fx->dir, "cli.tar", NULL);
    g_autofree char *out = NULL;
    const char *fp = carrel_manager_get_host_fingerprint(fx->mgr);
    Download d = {0};
    GThread *t;

    assert_true(carrel_manager_ensure_admin_token(fx->mgr, TOKEN, &error));
    s = busy_session(fx);
    api = carrel_api_new(fx->mgr, "test", &error);
    assert_non_null(api);
    assert_true(carrel_api_listen_tcp(api, any, NULL, &error));
    d.url = g_strdup(carrel_api_web_url(api));
    d.path = g_strdup_printf("/v1/sessions/%s/export", s->id);
    d.out = g_build_filename(fx->dir, "api.tar", NULL);

    /* The route: a bundle that verifies against the host key, with what the session did. */
    t = g_thread_new("download", download_thread, &d);
    spin(&d.done);
    g_thread_join(t);
    assert_true(d.ok);
    r = verify_file(d.out, fp);
    assert_true(carrel_evidence_report_ok(r));
    assert_true(r->key_pinned);
    assert_true(r->audit_rows >= 2); /* the create and the extract at least */
    assert_string_equal(r->manifest->session_id, s->id);
    assert_string_equal(r->manifest->template_name, "tiny");
    assert_string_equal(find_kind(r->manifest, "artifact")->sha256,
                        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
    (void)find_kind(r->manifest, "screenshot");
    (void)find_kind(r->manifest, "timeline");
    (void)find_kind(r->manifest, "policy");
    assert_true(audited_export(fx, s->id));

    /* The CLI: export, then verify offline pinned to the key; a flipped byte is named. */
    {
        const char *exp[] = {"export", "--json", s->id, "-o", cli_out, NULL};
        const char *ver[] = {"verify", cli_out, "--key", fp, NULL};
        const char *wrong[] = {"verify", cli_out, "--key", "sha256:00", NULL};

        assert_int_equal(run_carrel(d.url, exp, &out), 0);
        assert_non_null(strstr(out, fp));
        g_free(out);
        assert_int_equal(run_carrel(d.url, ver, &out), 0);
        assert_non_null(strstr(out, "OK"));
        g_free(out);
        assert_int_equal(run_carrel(d.url, wrong, &out), 10);
        g_free(out);
        out = NULL;
    }
    {
        g_autoptr(CarrelEvidenceReport) cli_r = verify_file(cli_out, fp);
        const char *names[] = {find_kind(cli_r->manifest, "screenshot")->path,
                               find_kind(cli_r->manifest, "artifact")->path, "timeline.jsonl"};

        for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
            g_autofree char *copy = flipped(fx, cli_out, names[i]);
            const char *ver[] = {"verify", "--json", copy, NULL};
            g_autofree char *text = NULL;

            assert_int_equal(run_carrel(d.url, ver, &text), 10);
            assert_non_null(strstr(text, "\"kind\":\"changed\""));
            assert_non_null(strstr(text, names[i]));
        }
    }
    g_free(d.url);
    g_free(d.path);
    g_free(d.out);
}

static void
test_export_destroyed(void **state)
{
    Fixture *fx = *state;
    g_autoptr(CarrelTemplate) tmpl G_GNUC_UNUSED = import(fx, "tiny");
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelSession) s = busy_session(fx);
    g_autoptr(CarrelSession) gone = carrel_manager_session_destroy(fx->mgr, ADMIN, s->id, &error);
    g_autoptr(CarrelEvidenceReport) r = NULL;
    g_auto(CarrelTransfer) t = {0};
    gint64 rows;

    assert_non_null(gone);
    assert_true(carrel_manager_session_export(fx->mgr, ADMIN, s->id, &t, &error));
    assert_null(error);
    r = verify_file(t.host_path, carrel_manager_get_host_key(fx->mgr));
    assert_true(carrel_evidence_report_ok(r));
    assert_string_equal(r->manifest->state, "destroyed");
    rows = r->audit_rows;
    (void)g_unlink(t.host_path);
    /* The destroy is among its rows; the first export is in the next one. */
    carrel_transfer_clear(&t);
    assert_true(carrel_manager_session_export(fx->mgr, ADMIN, s->id, &t, &error));
    {
        g_autoptr(CarrelEvidenceReport) again = verify_file(t.host_path, NULL);
        assert_true(carrel_evidence_report_ok(again));
        assert_int_equal(again->audit_rows, rows + 1);
    }
    (void)g_unlink(t.host_path);
    /* An unknown session is NOT_FOUND, and leaves no spool file. */
    carrel_transfer_clear(&t);
    assert_false(carrel_manager_session_export(fx->mgr, ADMIN, "s-000000000000", &t, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_export_route_and_cli, setup, teardown),
        cmocka_unit_test_setup_teardown(test_export_destroyed, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
