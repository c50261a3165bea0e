/*
 * egress: the path, started on demand by core. One squid (its helper asks the decision socket),
 * one dnsmasq per session, two nftables tables. See egress.h.
 */
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "egress/egress-priv.h"

#define SQUID_BIN "/usr/sbin/squid"
#define CERTGEN_BIN "/usr/lib/squid/security_file_certgen"
#define DNSMASQ_BIN "/usr/sbin/dnsmasq"
#define NFT_BIN "/usr/sbin/nft"
#define OPENSSL_BIN "/usr/bin/openssl"
#define SQUID_USER "proxy"
#define LOG_POLL_MS 500
#define LOG_CHUNK_BYTES 65536

struct _CarrelEgress {
    CarrelEgressConfig config; /* strings owned below */
    char *run_dir;
    char *upstream;
    char *helper;
    guint *tls_ports;
    char **secret_headers;
    char *upstream_ca;
    char *ca_cert;
    char *squid_dir;
    char *access_log;
    goffset access_offset;
    CarrelEgressChild *squid;
    CarrelEgressDecider *decider;
    guint log_timer;
    GMutex lock;         /* members */
    GHashTable *members; /* session id -> Member */
};

void
carrel_egress_member_free(CarrelEgressMember *m)
{
    const char *argv[] = {NFT_BIN, "-f", "-", NULL};
    g_autofree char *script = NULL;

    if (!m)
        return;
    script = carrel_net_egress_nft_session(FALSE, m->address, m->dns_port, m->tap, NULL);
    if (script)
        (void)carrel_egress_run(argv, script, NULL);
    carrel_egress_child_stop(m->dnsmasq);
    g_free(m->session_id);
    g_free(m->address);
    g_free(m->tap);
    g_free(m);
}

void
carrel_egress_member_insert(CarrelEgress *eg, CarrelEgressMember *m)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&eg->lock);

    g_hash_table_replace(eg->members, m->session_id, m);
}

void
carrel_egress_session_remove(CarrelEgress *eg, const char *session_id)
{
    CarrelEgressMember *m = NULL;
    gpointer key = NULL;

    g_mutex_lock(&eg->lock);
    if (g_hash_table_steal_extended(eg->members, session_id, &key, (gpointer *)&m))
        (void)key;
    g_mutex_unlock(&eg->lock);
    /* Outside the lock: stopping dnsmasq takes a moment. */
    carrel_egress_member_free(m);
}

GStrv
carrel_egress_sessions(CarrelEgress *eg)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&eg->lock);
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    GHashTableIter iter;
    gpointer key;

    g_hash_table_iter_init(&iter, eg->members);
    while (g_hash_table_iter_next(&iter, &key, NULL))
        g_strv_builder_add(b, key);
    return g_strv_builder_end(b);
}

const char *
carrel_egress_ca_cert(CarrelEgress *eg)
{
    return eg->ca_cert;
}

const char *
carrel_egress_run_dir(CarrelEgress *eg)
{
    return eg->run_dir;
}

const char *
carrel_egress_upstream(CarrelEgress *eg)
{
    return eg->upstream;
}

void
carrel_egress_report(CarrelEgress *eg, const char *source, const CarrelEgressRecord *rec)
{
    if (eg->config.record)
        eg->config.record(source, rec, eg->config.data);
}

static gboolean
need_program(const char *path, const char *package, GError **error)
{
    if (g_file_test(path, G_FILE_TEST_IS_EXECUTABLE))
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                "the egress path needs %s (Debian package %s)", path, package);
    return FALSE;
}

/* squid runs as its own user: every folder above its files must let others through. */
static gboolean
check_reachable(const char *path, GError **error)
{
    g_autofree char *dir = g_path_get_dirname(path);

    while (!g_str_equal(dir, "/")) {
        struct stat st;
        char *up;

        if (stat(dir, &st) == 0 && !(st.st_mode & S_IXOTH)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                        "squid (user %s) cannot reach %s: %s has mode %04o (it needs o+x)",
                        SQUID_USER, path, dir, (guint)(st.st_mode & 07777));
            return FALSE;
        }
        up = g_path_get_dirname(dir);
        g_free(dir);
        dir = up;
    }
    return TRUE;
}

/* Owned by root, group of squid's user, so that squid and its helper reach what they need. */
static gboolean
make_dir(const char *path, gboolean squid_owns, GError **error)
{
    struct passwd *pw = getpwnam(SQUID_USER);

    if (!pw) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "no user '%s' (Debian package squid-openssl makes it)", SQUID_USER);
        return FALSE;
    }
    if (!carrel_util_ensure_dir(path, 0750, error))
        return FALSE;
    if (chown(path, squid_owns ? pw->pw_uid : 0, pw->pw_gid) != 0 || chmod(path, 0750) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "cannot give %s to %s", path,
                    SQUID_USER);
        return FALSE;
    }
    return TRUE;
}

static gboolean
give_to_squid_group(const char *path, guint mode, GError **error)
{
    struct group *gr = getgrnam(SQUID_USER);

    if (!gr || chown(path, 0, gr->gr_gid) != 0 || chmod(path, mode) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "cannot give %s to group %s", path,
                    SQUID_USER);
        return FALSE;
    }
    return TRUE;
}

/* The CA of squid's TLS port (made once; it never signs anything while every connection is
 * spliced, but squid wants one for an ssl-bump port). */
static gboolean
ensure_ca(CarrelEgress *eg, const char *ca_pem, GError **error)
{
    g_autofree char *key = g_build_filename(eg->run_dir, "ca.key", NULL);
    g_autofree char *crt = g_build_filename(eg->run_dir, "ca.crt", NULL);
    g_autofree char *k = NULL;
    g_autofree char *c = NULL;
    g_autofree char *both = NULL;
    const char *argv[] = {OPENSSL_BIN,
                          "req",
                          "-x509",
                          "-newkey",
                          "ec",
                          "-pkeyopt",
                          "ec_paramgen_curve:prime256v1",
                          "-nodes",
                          "-days",
                          "3650",
                          "-subj",
                          "/CN=carrel egress CA",
                          "-keyout",
                          key,
                          "-out",
                          crt,
                          NULL};

    if (g_file_test(ca_pem, G_FILE_TEST_EXISTS))
        return TRUE;
    if (!need_program(OPENSSL_BIN, "openssl", error) || !carrel_egress_run(argv, NULL, error) ||
        !g_file_get_contents(key, &k, NULL, error) || !g_file_get_contents(crt, &c, NULL, error))
        return FALSE;
    both = g_strconcat(c, k, NULL);
    (void)g_unlink(key);
    return carrel_util_write_file(ca_pem, both, -1, 0640, error) &&
           give_to_squid_group(ca_pem, 0640, error);
}

static gboolean
ensure_ssl_db(const char *ssl_db, GError **error)
{
    const char *create[] = {CERTGEN_BIN, "-c", "-s", ssl_db, "-M", "4MB", NULL};
    const char *chown_argv[] = {"chown", "-R", SQUID_USER ":" SQUID_USER, ssl_db, NULL};

    /* certgen makes the folder itself and refuses one that exists. */
    if (g_file_test(ssl_db, G_FILE_TEST_IS_DIR))
        return TRUE;
    return carrel_egress_run(create, NULL, error) && carrel_egress_run(chown_argv, NULL, error);
}

static gboolean
load_firewall(CarrelEgress *eg, GError **error)
{
    const char *argv[] = {NFT_BIN, "-f", "-", NULL};
    CarrelNetEgressFirewall fw = {
        .bridge = CARREL_NET_EGRESS_BRIDGE,
        .gateway = CARREL_NET_EGRESS_GATEWAY,
        .tap_prefix = CARREL_NET_EGRESS_TAP_PREFIX,
        .http_port = CARREL_NET_EGRESS_HTTP_PORT,
        .https_port = CARREL_NET_EGRESS_HTTPS_PORT,
        .dns_port_first = CARREL_NET_EGRESS_DNS_PORT_FIRST,
        .dns_port_last = CARREL_NET_EGRESS_DNS_PORT_LAST,
        .tls_ports = eg->tls_ports,
        .n_tls_ports = eg->config.n_tls_ports,
    };
    g_autofree char *script = carrel_net_egress_nft(&fw, error);

    if (!script || !carrel_egress_run(argv, script, error)) {
        g_prefix_error(error, "loading the egress firewall: ");
        return FALSE;
    }
    return TRUE;
}

static void
remove_firewall(void)
{
    const char *argv[] = {NFT_BIN, "-f", "-", NULL};

    (void)carrel_egress_run(argv,
                            "table inet carrel_egress\ndelete table inet carrel_egress\n"
                            "table bridge carrel_egress\ndelete table bridge carrel_egress\n",
                            NULL);
}

/* squid answers on its HTTP intercept port: it is up. */
static gboolean
wait_listening(guint port, guint timeout_ms)
{
    g_autoptr(GSocketClient) client = g_socket_client_new();

    g_socket_client_set_timeout(client, 1);
    for (guint waited = 0; waited < timeout_ms; waited += 100) {
        g_autoptr(GSocketConnection) conn = g_socket_client_connect_to_host(
            client, CARREL_NET_EGRESS_GATEWAY, (guint16)port, NULL, NULL);
        if (conn)
            return TRUE;
        g_usleep(100 * 1000);
    }
    return FALSE;
}

static void
squid_line(const char *line, gpointer data)
{
    /* squid's own complaints go to its cache.log; stderr has only start-up failures. */
}

static gboolean
start_squid(CarrelEgress *eg, GError **error)
{
    g_autofree char *conf_path = g_build_filename(eg->run_dir, "squid.conf", NULL);
    g_autofree char *ca = g_build_filename(eg->run_dir, "ca.pem", NULL);
    g_autofree char *socket = g_build_filename(eg->run_dir, "decide.sock", NULL);
    g_autofree char *ssl_db = g_build_filename(eg->squid_dir, "ssl_db", NULL);
    g_autofree char *cache_log = g_build_filename(eg->squid_dir, "cache.log", NULL);
    g_autofree char *pid = g_build_filename(eg->squid_dir, "squid.pid", NULL);
    g_autofree char *ours = g_build_filename(eg->run_dir, "squid.carreld-pid", NULL);
    CarrelNetSquidSpec spec = {
        .gateway = CARREL_NET_EGRESS_GATEWAY,
        .http_port = CARREL_NET_EGRESS_HTTP_PORT,
        .https_port = CARREL_NET_EGRESS_HTTPS_PORT,
        .local_port = CARREL_NET_EGRESS_LOCAL_PORT,
        .subnet = CARREL_NET_EGRESS_SUBNET,
        .upstream_dns = eg->upstream,
        .helper = eg->helper,
        .helper_socket = socket,
        .ca_pem = ca,
        .ssl_db = ssl_db,
        .certgen = CERTGEN_BIN,
        .access_log = eg->access_log,
        .cache_log = cache_log,
        .pid_file = pid,
        .user = SQUID_USER,
        .headers = eg->config.secret_headers,
        .upstream_ca = eg->config.upstream_ca,
    };
    g_autofree char *conf = carrel_net_squid_conf(&spec, error);
    const char *parse[] = {SQUID_BIN, "-k", "parse", "-f", conf_path, NULL};
    const char *run[] = {SQUID_BIN, "-N", "-f", conf_path, NULL};

    if (!conf || !ensure_ca(eg, ca, error) || !ensure_ssl_db(ssl_db, error) ||
        !carrel_util_write_file(conf_path, conf, -1, 0644, error) ||
        !carrel_egress_run(parse, NULL, error))
        return FALSE;
    /* What the guests did before this start is not theirs to see again. */
    (void)g_unlink(eg->access_log);
    eg->access_offset = 0;
    eg->squid = carrel_egress_child_spawn(run, ours, squid_line, eg, NULL, error);
    if (!eg->squid)
        return FALSE;
    if (!wait_listening(CARREL_NET_EGRESS_HTTP_PORT, 15000)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "squid did not listen on %s:%u within 15 s (see %s)", CARREL_NET_EGRESS_GATEWAY,
                    CARREL_NET_EGRESS_HTTP_PORT, cache_log);
        return FALSE;
    }
    return TRUE;
}

/* New lines of squid's access log, each a record for core. */
static gboolean
poll_access_log(gpointer data)
{
    CarrelEgress *eg = data;
    g_autoptr(GFile) file = g_file_new_for_path(eg->access_log);
    g_autoptr(GFileInputStream) in = g_file_read(file, NULL, NULL);
    g_autofree char *buf = g_malloc(LOG_CHUNK_BYTES + 1);
    gsize got = 0;
    char *start;
    char *nl;

    if (!in || !g_seekable_seek(G_SEEKABLE(in), eg->access_offset, G_SEEK_SET, NULL, NULL) ||
        !g_input_stream_read_all(G_INPUT_STREAM(in), buf, LOG_CHUNK_BYTES, &got, NULL, NULL))
        return G_SOURCE_CONTINUE;
    buf[got] = '\0';
    /* Whole lines only: a line squid is still writing waits for the next turn. */
    for (start = buf; (nl = strchr(start, '\n')); start = nl + 1) {
        g_autofree char *source = NULL;
        g_autoptr(CarrelEgressRecord) rec = NULL;

        *nl = '\0';
        rec = carrel_egress_parse_squid_line(start, &source);
        if (rec)
            carrel_egress_report(eg, source, rec);
    }
    eg->access_offset += start - buf;
    /* One line longer than a chunk can never end: skip it. */
    if (start == buf && got == LOG_CHUNK_BYTES)
        eg->access_offset += got;
    return G_SOURCE_CONTINUE;
}

/* The extra upstream CAs, where squid's user may read them. */
static gboolean
copy_upstream_ca(CarrelEgress *eg, GError **error)
{
    g_autofree char *pem = NULL;
    g_autofree char *copy = NULL;
    gsize len = 0;

    if (!eg->upstream_ca)
        return TRUE;
    copy = g_build_filename(eg->run_dir, "upstream-ca.pem", NULL);
    if (!g_file_get_contents(eg->upstream_ca, &pem, &len, error) ||
        !carrel_util_write_file(copy, pem, (gssize)len, 0640, error) ||
        !give_to_squid_group(copy, 0640, error)) {
        g_prefix_error(error, "the proxy's upstream CAs: ");
        return FALSE;
    }
    g_free(eg->upstream_ca);
    eg->upstream_ca = g_steal_pointer(&copy);
    eg->config.upstream_ca = eg->upstream_ca;
    return TRUE;
}

static gboolean
start_decider(CarrelEgress *eg, GError **error)
{
    g_autofree char *socket = g_build_filename(eg->run_dir, "decide.sock", NULL);

    eg->decider = carrel_egress_decider_new(socket, eg->config.decide, eg->config.data, error);
    /* squid's helper runs as squid's user. */
    return eg->decider && give_to_squid_group(socket, 0660, error);
}

/* The resolvers an earlier carreld left (killed before it could stop them). */
static void
kill_stale_resolvers(const char *run_dir)
{
    g_autofree char *dir = g_build_filename(run_dir, "dns", NULL);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;

    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (g_str_has_suffix(name, ".pid"))
            carrel_egress_kill_stale(path, "dnsmasq");
    }
}

CarrelEgress *
carrel_egress_start(const CarrelEgressConfig *config, GError **error)
{
    g_autoptr(CarrelEgress) eg = g_new0(CarrelEgress, 1);
    g_autofree char *ours = NULL;

    eg->config = *config;
    eg->run_dir = g_strdup(config->run_dir);
    eg->upstream = g_strdup(config->upstream_dns);
    eg->helper = g_strdup(config->helper_path);
    eg->tls_ports = g_memdup2(config->tls_ports, sizeof(guint) * config->n_tls_ports);
    eg->secret_headers = g_strdupv(config->secret_headers);
    eg->upstream_ca = g_strdup(config->upstream_ca);
    eg->config.secret_headers = eg->secret_headers;
    eg->config.upstream_ca = eg->upstream_ca;
    eg->ca_cert = g_build_filename(eg->run_dir, "ca.crt", NULL);
    eg->squid_dir = g_build_filename(eg->run_dir, "squid", NULL);
    eg->access_log = g_build_filename(eg->squid_dir, "access.log", NULL);
    eg->members = g_hash_table_new_full(g_str_hash, g_str_equal, NULL,
                                        (GDestroyNotify)carrel_egress_member_free);
    g_mutex_init(&eg->lock);
    ours = g_build_filename(eg->run_dir, "squid.carreld-pid", NULL);
    carrel_egress_kill_stale(ours, "squid");
    kill_stale_resolvers(eg->run_dir);
    if (!need_program(SQUID_BIN, "squid-openssl", error) ||
        !need_program(CERTGEN_BIN, "squid-openssl", error) ||
        !need_program(DNSMASQ_BIN, "dnsmasq-base", error) ||
        !need_program(NFT_BIN, "nftables", error) ||
        !need_program(eg->helper, "carrel (carrel-egress-helper)", error) ||
        !check_reachable(eg->run_dir, error) || !make_dir(eg->run_dir, FALSE, error) ||
        !make_dir(eg->squid_dir, TRUE, error) || !copy_upstream_ca(eg, error) ||
        !load_firewall(eg, error) || !start_decider(eg, error) || !start_squid(eg, error)) {
        g_prefix_error(error, "starting the egress path: ");
        return NULL;
    }
    eg->log_timer = g_timeout_add(LOG_POLL_MS, poll_access_log, eg);
    return g_steal_pointer(&eg);
}

void
carrel_egress_free(CarrelEgress *eg)
{
    if (!eg)
        return;
    if (eg->log_timer)
        g_source_remove(eg->log_timer);
    if (eg->members)
        g_hash_table_unref(eg->members);
    carrel_egress_child_stop(eg->squid);
    carrel_egress_decider_free(eg->decider);
    remove_firewall();
    g_mutex_clear(&eg->lock);
    g_free(eg->run_dir);
    g_free(eg->upstream);
    g_free(eg->helper);
    g_free(eg->tls_ports);
    g_strfreev(eg->secret_headers);
    g_free(eg->upstream_ca);
    g_free(eg->ca_cert);
    g_free(eg->squid_dir);
    g_free(eg->access_log);
    g_free(eg);
}
