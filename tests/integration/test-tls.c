/*
 * Integration: carreld's TCP listener over TLS (a real daemon on libvirt's test driver). The test
 * makes its own self-signed certificate with openssl, trusts exactly that one, and checks
 * HTTPS, the Secure login cookie, the console's https origin, that plain HTTP gets nowhere, and
 * that carreld refuses to start without TLS on a non-loopback address or with half a key pair.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <libsoup/soup.h>
#include <string.h>
#include <unistd.h>

#include "conf/conf.h"
#include "daemon-url.h"

typedef struct {
    char *dir;
    char *state;
    char *cert_path;
    char *key_path;
    char *other_key_path; /* a key of another certificate */
    GTlsCertificate *cert;
    guint port;
    char *url; /* https://127.0.0.1:PORT */
    char *log; /* the daemon's stderr */
    char *token;
    char *cookie; /* "carrel_session=..." after login */
    GSubprocess *daemon;
    SoupSession *http;
    guint accepted; /* certificates accepted: each was the test's own */
} Fixture;

static Fixture fx;

typedef struct {
    guint status;
    JsonNode *body;
    char *set_cookie;
    GError *error; /* the request failed before any HTTP status */
} Reply;

static void
reply_clear(Reply *r)
{
    g_clear_pointer(&r->body, json_node_unref);
    g_clear_pointer(&r->set_cookie, g_free);
    g_clear_error(&r->error);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Reply, reply_clear)

/* The daemon's certificate is self-signed: accepted when it is the one this test made. */
static gboolean
on_accept_certificate(SoupMessage *msg, GTlsCertificate *peer, GTlsCertificateFlags errors,
                      gpointer data)
{
    if (!g_tls_certificate_is_same(peer, fx.cert))
        return FALSE;
    fx.accepted++;
    return TRUE;
}

/* One request to base + path; auth is "cookie", "bearer" (the admin token) or NULL. */
static void
request_to(Reply *r, const char *base, gboolean trust, const char *method, const char *path,
           const char *body, const char *auth, const char *origin)
{
    g_autofree char *uri = g_strconcat(base, path, NULL);
    g_autoptr(SoupMessage) msg = soup_message_new(method, uri);
    g_autoptr(GBytes) out = NULL;
    SoupMessageHeaders *h;
    gsize len = 0;
    const char *data;

    assert_non_null(msg);
    if (trust)
        g_signal_connect(msg, "accept-certificate", G_CALLBACK(on_accept_certificate), NULL);
    h = soup_message_get_request_headers(msg);
    if (body) {
        g_autoptr(GBytes) in = g_bytes_new(body, strlen(body));
        soup_message_set_request_body_from_bytes(msg, "application/json", in);
    }
    if (g_strcmp0(auth, "cookie") == 0 && fx.cookie) {
        soup_message_headers_replace(h, "Cookie", fx.cookie);
    } else if (g_strcmp0(auth, "bearer") == 0) {
        g_autofree char *v = g_strconcat("Bearer ", fx.token, NULL);
        soup_message_headers_replace(h, "Authorization", v);
    }
    if (origin)
        soup_message_headers_replace(h, "Origin", origin);
    out = soup_session_send_and_read(fx.http, msg, NULL, &r->error);
    if (!out)
        return;
    r->status = soup_message_get_status(msg);
    data = g_bytes_get_data(out, &len);
    r->body = len ? carrel_conf_parse_json(data, len, NULL) : NULL;
    r->set_cookie = g_strdup(
        soup_message_headers_get_one(soup_message_get_response_headers(msg), "Set-Cookie"));
}

static void
request(Reply *r, const char *method, const char *path, const char *body, const char *auth,
        const char *origin)
{
    request_to(r, fx.url, TRUE, method, path, body, auth, origin);
    if (r->error)
        fail_msg("%s %s: %s", method, path, r->error->message);
}

static const char *
str(JsonNode *node, const char *name)
{
    assert_non_null(node);
    return json_object_get_string_member_with_default(json_node_get_object(node), name, NULL);
}

/* A self-signed certificate for 127.0.0.1 and its key, made now (nothing is checked in). */
static gboolean
make_certificate(const char *cert_path, const char *key_path, GError **error)
{
    g_autoptr(GSubprocess) proc = g_subprocess_new(
        G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_SILENCE, error, "openssl",
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
        key_path, "-out", cert_path, NULL);

    if (!proc || !g_subprocess_wait_check(proc, NULL, error)) {
        g_prefix_error(error, "openssl req (Debian package openssl): ");
        return FALSE;
    }
    return TRUE;
}

/* Runs carreld with extra arguments, expecting it to refuse to start; returns its stderr. */
static char *
refused_start(const char *const *extra, int *ret_status)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_autoptr(GError) error = NULL;
    g_autofree char *sock = g_build_filename(fx.dir, "refused.sock", NULL);
    g_autofree char *state = g_build_filename(fx.dir, "refused-state", NULL);
    char *err = NULL;

    g_ptr_array_add(argv, (char *)g_getenv("CARREL_DAEMON"));
    g_ptr_array_add(argv, (char *)"--state-dir");
    g_ptr_array_add(argv, state);
    g_ptr_array_add(argv, (char *)"--socket");
    g_ptr_array_add(argv, sock);
    g_ptr_array_add(argv, (char *)"--libvirt-uri");
    g_ptr_array_add(argv, (char *)"test:///default");
    for (gsize i = 0; extra[i]; i++)
        g_ptr_array_add(argv, (char *)extra[i]);
    g_ptr_array_add(argv, NULL);
    /* A daemon that started after all is killed by the timeout, and the status says so. */
    if (!carrel_util_run_status((const char *const *)argv->pdata, 30, ret_status, NULL, &err,
                                &error))
        fail_msg("carreld: %s", error->message);
    return err;
}

static void
wait_ready(void)
{
    g_autofree char *log = NULL;

    for (int i = 0; i < 200; i++) {
        g_auto(Reply) r = {0};
        request_to(&r, fx.url, TRUE, "GET", "/v1/healthz", NULL, NULL, NULL);
        if (r.status == 200)
            return;
        g_usleep(50 * 1000);
    }
    if (g_file_get_contents(fx.log, &log, NULL, NULL))
        g_printerr("carreld's log:\n%s\n", log);
    fail_msg("carreld did not answer on %s", fx.url);
}

static int
setup(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *token_path = NULL;
    g_autoptr(GSubprocessLauncher) launcher = NULL;
    g_autofree char *sock = NULL;
    g_autofree char *other_cert = NULL;

    fx.dir = g_dir_make_tmp("carrel-tls-XXXXXX", NULL);
    fx.state = g_build_filename(fx.dir, "state", NULL);
    fx.cert_path = g_build_filename(fx.dir, "cert.pem", NULL);
    fx.key_path = g_build_filename(fx.dir, "key.pem", NULL);
    fx.other_key_path = g_build_filename(fx.dir, "other-key.pem", NULL);
    other_cert = g_build_filename(fx.dir, "other-cert.pem", NULL);
    if (!make_certificate(fx.cert_path, fx.key_path, &error) ||
        !make_certificate(other_cert, fx.other_key_path, &error)) {
        g_printerr("making a certificate: %s\n", error->message);
        return -1;
    }
    fx.cert = g_tls_certificate_new_from_file(fx.cert_path, &error);
    assert_non_null(fx.cert);
    sock = g_build_filename(fx.dir, "carreld.sock", NULL);
    fx.log = g_build_filename(fx.dir, "carreld.log", NULL);
    launcher = g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_NONE);
    g_subprocess_launcher_set_stderr_file_path(launcher, fx.log);
    fx.daemon = g_subprocess_launcher_spawn(
        launcher, &error, g_getenv("CARREL_DAEMON"), "--state-dir", fx.state, "--socket", sock,
        "--libvirt-uri", "test:///default", "--listen", "127.0.0.1:0", "--tls-cert", fx.cert_path,
        "--tls-key", fx.key_path, NULL);
    assert_non_null(fx.daemon);
    fx.http = soup_session_new_with_options("timeout", 30, NULL);
    fx.url = test_daemon_url(fx.state, 60, fx.log);
    assert_non_null(fx.url);
    assert_true(g_str_has_prefix(fx.url, "https://127.0.0.1:"));
    fx.port = test_url_port(fx.url);
    assert_int_not_equal(fx.port, 0);
    token_path = g_build_filename(fx.state, "admin.token", NULL);
    assert_true(g_file_get_contents(token_path, &fx.token, NULL, NULL));
    g_strstrip(fx.token);
    wait_ready();
    return 0;
}

static int
teardown(void **state)
{
    if (fx.daemon && g_subprocess_get_identifier(fx.daemon))
        g_subprocess_force_exit(fx.daemon);
    g_clear_object(&fx.daemon);
    g_clear_object(&fx.http);
    g_clear_object(&fx.cert);
    if (fx.dir && !g_getenv("CARREL_TEST_KEEP"))
        carrel_util_remove_tree(fx.dir, NULL);
    g_free(fx.dir);
    g_free(fx.state);
    g_free(fx.cert_path);
    g_free(fx.key_path);
    g_free(fx.other_key_path);
    g_free(fx.url);
    g_free(fx.log);
    g_free(fx.token);
    g_free(fx.cookie);
    return 0;
}

static void
test_healthz_over_https(void **state)
{
    g_auto(Reply) r = {0};
    guint before = fx.accepted;

    request(&r, "GET", "/v1/healthz", NULL, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(str(r.body, "status"), "ok");
    /* On a fresh session the certificate is checked again: it is the test's own. */
    g_clear_object(&fx.http);
    fx.http = soup_session_new_with_options("timeout", 30, NULL);
    reply_clear(&r);
    request(&r, "GET", "/v1/healthz", NULL, NULL, NULL);
    assert_int_equal(r.status, 200);
    assert_true(fx.accepted > before);
}

/* A client that does not trust the certificate gets no answer: it really is TLS. */
static void
test_untrusted_certificate_refused(void **state)
{
    g_autoptr(SoupSession) fresh = soup_session_new_with_options("timeout", 30, NULL);
    SoupSession *kept = fx.http;
    g_auto(Reply) r = {0};

    fx.http = fresh;
    request_to(&r, fx.url, FALSE, "GET", "/v1/healthz", NULL, NULL, NULL);
    fx.http = kept;
    assert_non_null(r.error);
    assert_true(r.error->domain == G_TLS_ERROR);
}

static void
test_web_url_is_https(void **state)
{
    g_auto(Reply) r = {0};

    request(&r, "GET", "/v1/version", NULL, "bearer", NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(str(r.body, "web_url"), fx.url);
}

static void
test_login_cookie_is_secure(void **state)
{
    g_autofree char *login = g_strdup_printf("{\"token\":\"%s\"}", fx.token);
    g_auto(Reply) r = {0};

    request(&r, "POST", "/v1/login", login, NULL, fx.url);
    assert_int_equal(r.status, 200);
    assert_non_null(r.set_cookie);
    assert_non_null(strstr(r.set_cookie, "; Secure"));
    assert_non_null(strstr(r.set_cookie, "; HttpOnly"));
    assert_non_null(strstr(r.set_cookie, "SameSite=Strict"));
    fx.cookie = g_strdup(r.set_cookie);
    *strchr(fx.cookie, ';') = '\0';
    reply_clear(&r);
    request(&r, "GET", "/v1/whoami", NULL, "cookie", NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(str(r.body, "name"), "admin");
}

/* Over TLS the console's origin is https://HOST; a page of http://HOST is someone else's. */
static void
test_origin_over_tls(void **state)
{
    g_autofree char *http_origin = g_strdup_printf("http://127.0.0.1:%u", fx.port);
    g_auto(Reply) r = {0};

    assert_non_null(fx.cookie);
    request(&r, "POST", "/v1/tokens", "{\"role\":\"reviewer\",\"name\":\"alice\"}", "cookie",
            fx.url);
    assert_int_equal(r.status, 201);
    reply_clear(&r);
    request(&r, "POST", "/v1/tokens", "{\"role\":\"reviewer\",\"name\":\"mallory\"}", "cookie",
            http_origin);
    assert_int_equal(r.status, 403);
    reply_clear(&r);
    request(&r, "POST", "/v1/tokens", "{\"role\":\"reviewer\",\"name\":\"mallory\"}", "cookie",
            "https://evil.example");
    assert_int_equal(r.status, 403);
}

static void
test_plain_http_fails(void **state)
{
    g_autofree char *plain = g_strdup_printf("http://127.0.0.1:%u", fx.port);
    g_auto(Reply) r = {0};

    request_to(&r, plain, FALSE, "GET", "/v1/healthz", NULL, NULL, NULL);
    if (!r.error)
        fail_msg("plain HTTP answered %u", r.status);
}

static void
test_non_loopback_needs_tls(void **state)
{
    g_autofree char *listen = g_strdup("0.0.0.0:0");
    const char *extra[] = {"--listen", listen, NULL};
    int status = 0;
    g_autofree char *err = refused_start(extra, &status);

    assert_int_equal(status, 2);
    assert_non_null(strstr(err, "is not a loopback address"));
    assert_non_null(strstr(err, "--tls-cert"));
    assert_non_null(strstr(err, "--tls-key"));
    assert_non_null(strstr(err, "SSH tunnel"));
}

static void
test_half_key_pair_refused(void **state)
{
    g_autofree char *listen = g_strdup("0.0.0.0:0");
    const char *cert_only[] = {"--listen", listen, "--tls-cert", fx.cert_path, NULL};
    const char *key_only[] = {"--listen", listen, "--tls-key", fx.key_path, NULL};
    int status = 0;
    g_autofree char *err = refused_start(cert_only, &status);
    g_autofree char *err2 = NULL;

    assert_int_equal(status, 2);
    assert_non_null(strstr(err, "--tls-cert and --tls-key go together"));
    err2 = refused_start(key_only, &status);
    assert_int_equal(status, 2);
    assert_non_null(strstr(err2, "--tls-cert and --tls-key go together"));
}

static void
test_bad_files_named(void **state)
{
    g_autofree char *listen = g_strdup("0.0.0.0:0");
    g_autofree char *missing = g_build_filename(fx.dir, "missing.pem", NULL);
    const char *no_cert[] = {"--listen",  listen,      "--tls-cert", missing,
                             "--tls-key", fx.key_path, NULL};
    const char *key_as_cert[] = {"--listen",  listen,      "--tls-cert", fx.key_path,
                                 "--tls-key", fx.key_path, NULL};
    const char *wrong_key[] = {"--listen",        listen, "--tls-cert", fx.cert_path, "--tls-key",
                               fx.other_key_path, NULL};
    int status = 0;
    g_autofree char *err1 = refused_start(no_cert, &status);
    g_autofree char *err2 = NULL;
    g_autofree char *err3 = NULL;

    assert_int_equal(status, 2);
    assert_non_null(strstr(err1, "cannot read --tls-cert"));
    assert_non_null(strstr(err1, missing));
    err2 = refused_start(key_as_cert, &status);
    assert_int_equal(status, 2);
    assert_non_null(strstr(err2, "holds no valid PEM certificate"));
    err3 = refused_start(wrong_key, &status);
    assert_int_equal(status, 2);
    assert_non_null(strstr(err3, "is not the key of --tls-cert"));
    assert_non_null(strstr(err3, fx.other_key_path));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthz_over_https),
        cmocka_unit_test(test_untrusted_certificate_refused),
        cmocka_unit_test(test_web_url_is_https),
        cmocka_unit_test(test_login_cookie_is_secure),
        cmocka_unit_test(test_origin_over_tls),
        cmocka_unit_test(test_plain_http_fails),
        cmocka_unit_test(test_non_loopback_needs_tls),
        cmocka_unit_test(test_half_key_pair_refused),
        cmocka_unit_test(test_bad_files_named),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
