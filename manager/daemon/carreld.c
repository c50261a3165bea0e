/* carreld: options, signals and wiring of the manager and the API. */
#include <errno.h>
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "carrel-config.h"
#include "api/api.h"
#include "core/core.h"
#include "net/net.h"

typedef struct {
    char *state_dir;
    char *socket_path;
    char *listen;
    char *tls_cert;
    char *tls_key;
    char *libvirt_uri;
    char *accel;
    char *memory_reclaim;
    char *recipes_dir;
    char *cache_dir;
    char *probe_kernel;
    char *policy;
    char *policy_dir;
    char *egress_dns;
    char *egress_helper;
    char *egress_ca;
    char *emulator;
    char *guest_tool;
    char *guest_tool_src;
    char *data_dir;
    char *libexec_dir;
    char *web_dir;
    char *spice_dir;
    gboolean test_hooks;
    gboolean probe_accel;
    gboolean crash_points;
    int agent_timeout_s;
    int screen_grace_s;
    int disk_reserve_mib;
    int upload_ttl_s;
    int max_streams;
    int shots_max;
    int shots_max_mib;
    int api_threads[3]; /* --api-quick-threads, --api-long-threads, --api-exec-threads; 0: default
                         */
    int api_queue;      /* --api-queue; 0: default */
    GSocketAddress *listen_address; /* --listen, checked */
    GTlsCertificate *tls;           /* --tls-cert with --tls-key, loaded */
} Options;

static void
options_clear(Options *opts)
{
    g_free(opts->state_dir);
    g_free(opts->socket_path);
    g_free(opts->listen);
    g_free(opts->tls_cert);
    g_free(opts->tls_key);
    g_free(opts->libvirt_uri);
    g_free(opts->accel);
    g_free(opts->memory_reclaim);
    g_free(opts->recipes_dir);
    g_free(opts->cache_dir);
    g_free(opts->probe_kernel);
    g_free(opts->policy);
    g_free(opts->policy_dir);
    g_free(opts->egress_dns);
    g_free(opts->egress_helper);
    g_free(opts->emulator);
    g_free(opts->egress_ca);
    g_free(opts->guest_tool);
    g_free(opts->guest_tool_src);
    g_free(opts->data_dir);
    g_free(opts->libexec_dir);
    g_free(opts->web_dir);
    g_free(opts->spice_dir);
    g_clear_object(&opts->listen_address);
    g_clear_object(&opts->tls);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Options, options_clear)

/*
 * Is this the build tree's carreld (tests, scripts/quickstart)? Only then are the source tree's
 * recipes, policies and web console used: an installed carreld must never pick up a checkout
 * that happens to be still there. Same file, not same name: meson install copies the binary.
 */
static gboolean
running_uninstalled(void)
{
    GStatBuf self;
    GStatBuf built;

    if (g_stat("/proc/self/exe", &self) < 0 ||
        g_stat(CARREL_BUILD_DIR "/manager/daemon/carreld", &built) < 0)
        return FALSE;
    return self.st_dev == built.st_dev && self.st_ino == built.st_ino;
}

/* Fills in the data dir's files (web console, recipes, policies) nobody named. */
static void
default_data_paths(Options *opts, gboolean uninstalled)
{
    const char *data = opts->data_dir;

    if (!data)
        data = uninstalled ? CARREL_SOURCE_DIR : CARREL_DATA_DIR;
    if (!opts->web_dir)
        opts->web_dir = g_build_filename(data, "web-console", NULL);
    if (!opts->recipes_dir)
        opts->recipes_dir = g_build_filename(data, "templates", NULL);
    if (!opts->policy_dir)
        opts->policy_dir = g_build_filename(data, "policies", NULL);
}

/* Fills in the helper programs (carrel-guest, squid's helper) nobody named. */
static void
default_libexec_paths(Options *opts, gboolean uninstalled)
{
    if (uninstalled && !opts->libexec_dir) {
        if (!opts->guest_tool)
            opts->guest_tool =
                g_build_filename(CARREL_BUILD_DIR, "guest-tools", "carrel-guest", NULL);
        if (!opts->egress_helper)
            opts->egress_helper = g_build_filename(CARREL_BUILD_DIR, "manager", "daemon",
                                                   "carrel-egress-helper", NULL);
        if (!opts->emulator)
            opts->emulator =
                g_build_filename(CARREL_BUILD_DIR, "manager", "daemon", "carrel-qemu", NULL);
        opts->guest_tool_src = g_build_filename(CARREL_SOURCE_DIR, "guest-tools", NULL);
        return;
    }
    if (!opts->libexec_dir)
        opts->libexec_dir = g_strdup(CARREL_LIBEXEC_DIR);
    if (!opts->guest_tool)
        opts->guest_tool = g_build_filename(opts->libexec_dir, "carrel-guest", NULL);
    if (!opts->egress_helper)
        opts->egress_helper = g_build_filename(opts->libexec_dir, "carrel-egress-helper", NULL);
    if (!opts->emulator)
        opts->emulator = g_build_filename(opts->libexec_dir, "carrel-qemu", NULL);
    /* No sources installed: the recipe hash covers the installed binaries instead, so an
     * upgraded carrel-guest still rebuilds the templates that carry it. */
    opts->guest_tool_src = g_strdup(opts->libexec_dir);
}

/* The host's first resolver: what sessions with a network resolve through, unless told. */
static char *
host_resolver(void)
{
    g_autofree char *text = NULL;
    g_auto(GStrv) lines = NULL;

    if (!g_file_get_contents("/etc/resolv.conf", &text, NULL, NULL))
        return NULL;
    lines = g_strsplit(text, "\n", -1);
    for (guint i = 0; lines[i]; i++) {
        g_auto(GStrv) words = g_strsplit_set(g_strstrip(lines[i]), " \t", -1);
        if (g_strv_length(words) >= 2 && g_str_equal(words[0], "nameserver") &&
            g_hostname_is_ip_address(words[g_strv_length(words) - 1]) &&
            !strchr(words[g_strv_length(words) - 1], ':'))
            return g_strdup(words[g_strv_length(words) - 1]);
    }
    return NULL;
}

/* Reads a file an option names, for the error that names both. */
static gboolean
check_readable(const char *option, const char *path, GError **error)
{
    g_autofree char *data = NULL;
    g_autoptr(GError) local = NULL;

    if (g_file_get_contents(path, &data, NULL, &local))
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "cannot read %s '%s': %s", option,
                path, local->message);
    return FALSE;
}

#define TLS_SELF_CHECK_TIMEOUT_S 5

static gpointer
server_handshake(gpointer conn)
{
    GError *error = NULL;

    /* Closed on failure, so the client's side ends too instead of waiting for its timeout. */
    if (!g_tls_connection_handshake(conn, NULL, &error))
        g_io_stream_close(conn, NULL, NULL);
    return error;
}

/* Only the key pair is under test, not whether anyone trusts the certificate. */
static gboolean
accept_any(GTlsConnection *conn, GTlsCertificate *peer, GTlsCertificateFlags errors, gpointer data)
{
    return TRUE;
}

static GIOStream *
stream_from_fd(int fd, GError **error)
{
    g_autoptr(GSocket) sock = g_socket_new_from_fd(fd, error);

    if (!sock) {
        close(fd);
        return NULL;
    }
    g_socket_set_timeout(sock, TLS_SELF_CHECK_TIMEOUT_S);
    return G_IO_STREAM(g_socket_connection_factory_create_connection(sock));
}

/*
 * GLib takes any key with any certificate; a key that is not the certificate's would fail every
 * client's handshake later, with nothing said here. A handshake with itself over a socket pair
 * finds out at start.
 */
static gboolean
check_tls_pair(GTlsCertificate *cert, GError **error)
{
    g_autoptr(GIOStream) server_base = NULL;
    g_autoptr(GIOStream) client_base = NULL;
    g_autoptr(GIOStream) server = NULL;
    g_autoptr(GIOStream) client = NULL;
    g_autoptr(GError) client_error = NULL;
    GError *server_error;
    GThread *thread;
    int fds[2];

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "socketpair: %s",
                    g_strerror(errno));
        return FALSE;
    }
    server_base = stream_from_fd(fds[0], error);
    if (!server_base) {
        close(fds[1]);
        return FALSE;
    }
    client_base = stream_from_fd(fds[1], error);
    if (!client_base)
        return FALSE;
    server = g_tls_server_connection_new(server_base, cert, error);
    client = server ? g_tls_client_connection_new(client_base, NULL, error) : NULL;
    if (!client)
        return FALSE;
    g_signal_connect(client, "accept-certificate", G_CALLBACK(accept_any), NULL);
    thread = g_thread_new("tls-check", server_handshake, server);
    g_tls_connection_handshake(G_TLS_CONNECTION(client), NULL, &client_error);
    /* Either side failing makes the other fail too: the client's socket goes with it. */
    g_clear_object(&client);
    g_clear_object(&client_base);
    server_error = g_thread_join(thread);
    if (server_error || client_error) {
        /* Which side says why depends on the mismatch (a signature, a key type): both do. */
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a handshake with itself failed (server: %s; client: %s)",
                    server_error ? server_error->message : "ok",
                    client_error ? client_error->message : "ok");
        g_clear_error(&server_error);
        return FALSE;
    }
    return TRUE;
}

/* The certificate and its key; errors name the option and the file at fault. */
static GTlsCertificate *
load_tls(const char *cert_path, const char *key_path, GError **error)
{
    g_autoptr(GTlsCertificate) cert = NULL;
    g_autoptr(GError) local = NULL;

    if (!check_readable("--tls-cert", cert_path, error) ||
        !check_readable("--tls-key", key_path, error))
        return NULL;
    cert = g_tls_certificate_new_from_file(cert_path, &local);
    if (!cert) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "--tls-cert '%s' holds no valid PEM certificate: %s", cert_path,
                    local->message);
        return NULL;
    }
    g_clear_object(&cert);
    /* Both files read and the certificate parsed on its own: a failure now is the key's. */
    cert = g_tls_certificate_new_from_files(cert_path, key_path, &local);
    if (!cert) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "--tls-key '%s' holds no valid PEM private key: %s", key_path, local->message);
        return NULL;
    }
    if (!check_tls_pair(cert, &local)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "--tls-key '%s' is not the key of --tls-cert '%s': %s", key_path, cert_path,
                    local->message);
        return NULL;
    }
    return g_steal_pointer(&cert);
}

/* --listen and the TLS files, checked before anything starts: a mistake is an option error. */
static gboolean
check_listen(Options *opts, GError **error)
{
    g_autoptr(GError) local = NULL;
    gboolean tls = opts->tls_cert || opts->tls_key;

    if (tls && (!opts->tls_cert || !opts->tls_key)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "--tls-cert and --tls-key go together: give both files or neither");
        return FALSE;
    }
    if (tls && !opts->listen) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "--tls-cert and --tls-key are for the TCP listener: add --listen ADDR:PORT");
        return FALSE;
    }
    if (!opts->listen)
        return TRUE;
    opts->listen_address = carrel_net_parse_listen(opts->listen, tls, &local);
    if (!opts->listen_address) {
        if (g_error_matches(local, CARREL_ERROR, CARREL_ERROR_POLICY_DENIED))
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "%s; add --tls-cert FILE and --tls-key FILE to serve HTTPS there, or "
                        "keep 127.0.0.1 and use an SSH tunnel (ssh -L PORT:127.0.0.1:PORT HOST)",
                        local->message);
        else
            g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    if (tls)
        opts->tls = load_tls(opts->tls_cert, opts->tls_key, error);
    return !tls || opts->tls != NULL;
}

/* The numeric options, each within its range (0: the option's default). */
typedef struct {
    const char *name;
    gsize offset;
    int max;
} IntRange;

static const IntRange int_ranges[] = {
    {"--disk-reserve", G_STRUCT_OFFSET(Options, disk_reserve_mib), 65536},
    {"--agent-timeout", G_STRUCT_OFFSET(Options, agent_timeout_s), 3600},
    {"--screen-grace", G_STRUCT_OFFSET(Options, screen_grace_s), 3600},
    {"--upload-ttl", G_STRUCT_OFFSET(Options, upload_ttl_s), 7 * 24 * 3600},
    {"--screenshots-keep", G_STRUCT_OFFSET(Options, shots_max), 1000000},
    {"--screenshots-keep-mib", G_STRUCT_OFFSET(Options, shots_max_mib), 1024 * 1024},
    {"--max-streams", G_STRUCT_OFFSET(Options, max_streams), 1024},
};

static gboolean
check_ranges(const Options *opts, GError **error)
{
    for (guint i = 0; i < G_N_ELEMENTS(int_ranges); i++) {
        int value = G_STRUCT_MEMBER(int, opts, int_ranges[i].offset);
        if (value < 0 || value > int_ranges[i].max) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "%s must be between 0 (its default) and %d", int_ranges[i].name,
                        int_ranges[i].max);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean
parse_options(int argc, char **argv, Options *opts, GError **error)
{
    GOptionEntry entries[] = {
        {"state-dir", 0, 0, G_OPTION_ARG_FILENAME, &opts->state_dir,
         "State directory (default /var/lib/carrel)", "DIR"},
        {"socket", 0, 0, G_OPTION_ARG_FILENAME, &opts->socket_path,
         "API Unix socket (default /run/carrel/carreld.sock; \"\" for none, with --listen)",
         "PATH"},
        {"listen", 0, 0, G_OPTION_ARG_STRING, &opts->listen,
         "Also listen on TCP: loopback only, unless with --tls-cert and --tls-key; port 0 takes "
         "a free one (written to STATE/web.url)",
         "ADDR:PORT"},
        {"tls-cert", 0, 0, G_OPTION_ARG_FILENAME, &opts->tls_cert,
         "PEM certificate (chain) of the TCP listener, which then speaks HTTPS only", "FILE"},
        {"tls-key", 0, 0, G_OPTION_ARG_FILENAME, &opts->tls_key, "PEM private key of --tls-cert",
         "FILE"},
        {"libvirt-uri", 0, 0, G_OPTION_ARG_STRING, &opts->libvirt_uri,
         "libvirt connection (default qemu:///system)", "URI"},
        {"accel", 0, 0, G_OPTION_ARG_STRING, &opts->accel, "auto, kvm or tcg (default auto)",
         "MODE"},
        {"data-dir", 0, 0, G_OPTION_ARG_FILENAME, &opts->data_dir,
         "Installed data: DIR/web-console, DIR/templates and DIR/policies (default " CARREL_DATA_DIR
         "; the source tree when run from the build tree)",
         "DIR"},
        {"libexec-dir", 0, 0, G_OPTION_ARG_FILENAME, &opts->libexec_dir,
         "carrel-guest and carrel-egress-helper (default " CARREL_LIBEXEC_DIR
         "; the build tree's when run from it)",
         "DIR"},
        {"recipes-dir", 0, 0, G_OPTION_ARG_FILENAME, &opts->recipes_dir,
         "Template recipes (default DATA-DIR/templates)", "DIR"},
        {"cache-dir", 0, 0, G_OPTION_ARG_FILENAME, &opts->cache_dir,
         "Cache of built images (default /var/cache/carrel)", "DIR"},
        {"probe-kernel", 0, 0, G_OPTION_ARG_FILENAME, &opts->probe_kernel,
         "Kernel booted to prove KVM (default: newest /boot/vmlinuz-*)", "FILE"},
        {"policy-dir", 0, 0, G_OPTION_ARG_FILENAME, &opts->policy_dir,
         "Named policies: every NAME.policy in it (default DATA-DIR/policies)", "DIR"},
        {"policy", 0, 0, G_OPTION_ARG_FILENAME, &opts->policy,
         "The default policy's file, over the folder's default.policy", "FILE"},
        {"egress-dns", 0, 0, G_OPTION_ARG_STRING, &opts->egress_dns,
         "Upstream resolver of sessions with a network (default: the first nameserver of "
         "/etc/resolv.conf)",
         "ADDR"},
        {"egress-ca", 0, 0, G_OPTION_ARG_FILENAME, &opts->egress_ca,
         "More CAs (PEM) the proxy trusts for servers it decrypts for (a test's stand-in)", "FILE"},
        {"egress-helper", 0, 0, G_OPTION_ARG_FILENAME, &opts->egress_helper,
         "squid's helper that asks carreld (default LIBEXEC-DIR/carrel-egress-helper)", "FILE"},
        {"emulator", 0, 0, G_OPTION_ARG_FILENAME, &opts->emulator,
         "What sessions start as QEMU (default LIBEXEC-DIR/carrel-qemu: QEMU with transparent huge "
         "pages off where the host has a shared zero page; \"\" for libvirt's own QEMU)",
         "FILE"},
        {"memory-reclaim", 0, 0, G_OPTION_ARG_STRING, &opts->memory_reclaim,
         "Whether warm clones of carrel-qemu get a memory reclaim: auto (where a read of "
         "untouched memory allocates it, probed at start), on or off (default auto; libvirt's "
         "QEMU always has one; none for a clone that maps its warm state's RAM file)",
         "MODE"},
        {"guest-tool", 0, 0, G_OPTION_ARG_FILENAME, &opts->guest_tool,
         "carrel-guest binary installed by template recipes (default LIBEXEC-DIR/carrel-guest)",
         "FILE"},
        {"web-dir", 0, 0, G_OPTION_ARG_FILENAME, &opts->web_dir,
         "Web console files served at / (default DATA-DIR/web-console)", "DIR"},
        {"spice-html5-dir", 0, 0, G_OPTION_ARG_FILENAME, &opts->spice_dir,
         "spice-html5 served at /spice-html5/ (default /usr/share/spice-html5)", "DIR"},
        {"test-hooks", 0, 0, G_OPTION_ARG_NONE, &opts->test_hooks,
         "Enable routes only tests use (POST /v1/test/approvals); never in production", NULL},
        {"crash-points", 0, 0, G_OPTION_ARG_NONE, &opts->crash_points,
         "Print the crash points a test may arm (with --test-hooks and CARREL_CRASH_AT=POINT, "
         "carreld exits at once on reaching it) and exit",
         NULL},
        {"probe-accel", 0, 0, G_OPTION_ARG_NONE, &opts->probe_accel,
         "Print the accelerator carreld would use (kvm or tcg) and exit; the reason goes to "
         "stderr. Scripts that start QEMU or libguestfs take this decision",
         NULL},
        {"agent-timeout", 0, 0, G_OPTION_ARG_INT, &opts->agent_timeout_s,
         "Seconds to wait for a guest agent (default 300)", "S"},
        {"screen-grace", 0, 0, G_OPTION_ARG_INT, &opts->screen_grace_s,
         "Seconds a guest's agent may stay silent before its session is judged ready by its "
         "screen holding still, for images without one (default 45)",
         "S"},
        {"disk-reserve", 0, 0, G_OPTION_ARG_INT, &opts->disk_reserve_mib,
         "MiB kept in STATE/disk-reserve (preallocated) and given up when the disk fills, so "
         "carreld's store can still write; while it is given up or less is free, creates, "
         "snapshots and uploads are refused with 507 no_space (1-65536, default 64)",
         "MIB"},
        {"upload-ttl", 0, 0, G_OPTION_ARG_INT, &opts->upload_ttl_s,
         "Seconds an upload (POST /v1/uploads) waits for a create to use it before it is removed "
         "(default 3600)",
         "S"},
        {"screenshots-keep", 0, 0, G_OPTION_ARG_INT, &opts->shots_max,
         "Screenshots of its timeline a session keeps, the newest (default 500); older ones "
         "are removed, their events stay",
         "N"},
        {"screenshots-keep-mib", 0, 0, G_OPTION_ARG_INT, &opts->shots_max_mib,
         "MiB of screenshots a session keeps at most (default 256)", "MIB"},
        {"max-streams", 0, 0, G_OPTION_ARG_INT, &opts->max_streams,
         "Event streams (GET /v1/stream) one token may hold open at once; more get 429 "
         "(default 8)",
         "N"},
        {"api-quick-threads", 0, 0, G_OPTION_ARG_INT, &opts->api_threads[0],
         "Threads of the API's quick requests: reads and short calls (default 8)", "N"},
        {"api-long-threads", 0, 0, G_OPTION_ARG_INT, &opts->api_threads[1],
         "Threads of long VM operations: create, start, stop, snapshot, revert, fork, hibernate, "
         "destroy, template build and warm, extract (default 4)",
         "N"},
        {"api-exec-threads", 0, 0, G_OPTION_ARG_INT, &opts->api_threads[2],
         "Threads of exec, files, screenshots and computer use (default 16)", "N"},
        {"api-queue", 0, 0, G_OPTION_ARG_INT, &opts->api_queue,
         "Requests of one class that may wait for a thread; more get 503 with Retry-After "
         "(default 64). GET /v1/healthz needs no thread",
         "N"},
        {NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- the carrel daemon");

    /* The man page carreld(8) is made from this help (scripts/help-to-scd): say it here. */
    g_option_context_set_summary(
        ctx, "carreld clones desktop VMs from golden templates and runs them with libvirt and "
             "QEMU, and serves the HTTP API (Unix socket, optional TCP) that the carrel CLI, MCP "
             "clients and the web console use. SIGTERM or SIGINT stops it cleanly: sessions keep "
             "running and the next carreld adopts them.");
    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, error))
        return FALSE;
    if (argc > 1) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "unexpected argument '%s'",
                    argv[1]);
        return FALSE;
    }
    if (opts->socket_path && !*opts->socket_path && !opts->listen) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "--socket \"\" (no Unix socket) needs --listen");
        return FALSE;
    }
    if (!check_ranges(opts, error))
        return FALSE;
#define DEFAULT(field, value)                                                                      \
    if (!opts->field)                                                                              \
    opts->field = g_strdup(value)
    DEFAULT(state_dir, "/var/lib/carrel");
    DEFAULT(socket_path, "/run/carrel/carreld.sock");
    DEFAULT(libvirt_uri, "qemu:///system");
    DEFAULT(accel, "auto");
    DEFAULT(memory_reclaim, "auto");
    DEFAULT(cache_dir, "/var/cache/carrel");
    DEFAULT(spice_dir, "/usr/share/spice-html5");
#undef DEFAULT
    default_data_paths(opts, running_uninstalled());
    default_libexec_paths(opts, running_uninstalled());
    if (!opts->egress_dns)
        opts->egress_dns = host_resolver();
    if (opts->egress_dns && !g_hostname_is_ip_address(opts->egress_dns)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "--egress-dns must be an IP address, not '%s'", opts->egress_dns);
        return FALSE;
    }
    return check_listen(opts, error);
}

static CarrelAccel
choose_accel(const Options *opts, char **ret_reason, GError **error)
{
    CarrelAccel requested = carrel_accel_from_string(opts->accel);

    if (requested == CARREL_ACCEL_LAST) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "--accel must be auto, kvm or tcg, not '%s'", opts->accel);
        return CARREL_ACCEL_LAST;
    }
    if (requested == CARREL_ACCEL_AUTO && g_str_has_prefix(opts->libvirt_uri, "test:")) {
        *ret_reason = g_strdup("libvirt test driver: no guest runs, so no probe");
        return CARREL_ACCEL_TCG;
    }
    if (requested != CARREL_ACCEL_AUTO) {
        *ret_reason = g_strdup("requested with --accel");
        return requested;
    }
    return carrel_hypervisor_resolve_accel(requested, opts->probe_kernel, 15, ret_reason);
}

/* The admin token lives in a 0600 file; the store keeps only its hash. */
static gboolean
ensure_admin_token(CarrelManager *mgr, const char *state_dir, GError **error)
{
    g_autofree char *path = g_build_filename(state_dir, "admin.token", NULL);
    g_autofree char *token = NULL;

    if (g_file_get_contents(path, &token, NULL, NULL)) {
        g_strstrip(token);
    } else {
        token = carrel_util_new_token();
        if (!carrel_util_write_file(path, token, -1, 0600, error))
            return FALSE;
        g_message("wrote a new admin token to %s", path);
    }
    if (g_chmod(path, 0600) < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INTERNAL, "cannot restrict '%s'", path);
        return FALSE;
    }
    return carrel_manager_ensure_admin_token(mgr, token, error);
}

static gboolean
on_quit_signal(gpointer user_data)
{
    g_message("signal received: shutting down (sessions keep running)");
    g_main_loop_quit(user_data);
    return G_SOURCE_CONTINUE;
}

static void
log_reconcile(const CarrelReconcileReport *r)
{
    g_message("reconciled: %u adopted, %u found stopped, %u vanished, %u half-created cleaned, "
              "%u orphan domains removed",
              r->adopted, r->stopped, r->vanished, r->cleaned, r->orphans);
}

/* --memory-reclaim: auto asks the kernel (util's probe); on and off say instead. */
static gboolean
choose_reclaim(const Options *opts, gboolean *ret_reads_allocate, GError **error)
{
    const char *mode = opts->memory_reclaim;

    if (g_str_equal(mode, "on") || g_str_equal(mode, "off")) {
        *ret_reads_allocate = g_str_equal(mode, "on");
        g_message("memory: reclaim of carrel-qemu's warm clones %s (--memory-reclaim)", mode);
        return TRUE;
    }
    if (!g_str_equal(mode, "auto")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "--memory-reclaim must be auto, on or off, not '%s'", mode);
        return FALSE;
    }
    if (!carrel_util_reads_allocate(CARREL_UTIL_READS_PROBE_BYTES, ret_reads_allocate, error)) {
        g_prefix_error(error, "probing the host's memory: ");
        return FALSE;
    }
    if (*ret_reads_allocate)
        g_message("memory: a read of untouched memory allocates it here (no shared zero page): "
                  "warm clones get a memory reclaim, and carrel-qemu keeps transparent huge pages");
    else
        g_message("memory: reads of untouched memory map the shared zero page: carrel-qemu's "
                  "warm clones need no memory reclaim");
    return TRUE;
}

static CarrelManager *
open_manager(const Options *opts, GError **error)
{
    g_autofree char *reason = NULL;
    CarrelHypervisor *hv;
    CarrelManagerConfig config = {0};
    CarrelReconcileReport report;
    g_autoptr(GError) egress_error = NULL;
    g_autoptr(CarrelManager) mgr = NULL;

    config.accel = choose_accel(opts, &reason, error);
    if (config.accel == CARREL_ACCEL_LAST)
        return NULL;
    g_message("accelerator: %s (%s)", carrel_accel_to_string(config.accel), reason);
    if (!choose_reclaim(opts, &config.reads_allocate, error))
        return NULL;
    g_message("recipes: %s; web console: %s; carrel-guest: %s; egress helper: %s; emulator: %s",
              opts->recipes_dir, opts->web_dir, opts->guest_tool, opts->egress_helper,
              *opts->emulator ? opts->emulator : "libvirt's QEMU");
    hv = carrel_hypervisor_open_libvirt(opts->libvirt_uri, error);
    if (!hv)
        return NULL;
    config.state_dir = opts->state_dir;
    config.recipes_dir = opts->recipes_dir;
    config.cache_dir = opts->cache_dir;
    config.accel_reason = reason;
    config.agent_timeout_s = (guint)opts->agent_timeout_s;
    config.screen_grace_s = (guint)opts->screen_grace_s;
    config.disk_reserve_mib = (guint)opts->disk_reserve_mib;
    config.upload_ttl_s = (guint)opts->upload_ttl_s;
    config.shots_max = (guint)opts->shots_max;
    config.shots_max_mib = (guint)opts->shots_max_mib;
    config.policy_path = opts->policy;
    config.policy_dir = opts->policy_dir;
    config.egress_dns = opts->egress_dns;
    config.egress_helper = opts->egress_helper;
    config.emulator = opts->emulator;
    config.egress_ca = opts->egress_ca;
    if (g_file_test(opts->guest_tool, G_FILE_TEST_IS_EXECUTABLE)) {
        config.guest_tool = opts->guest_tool;
        config.guest_tool_src = opts->guest_tool_src;
    } else {
        g_message("no carrel-guest at %s: built templates will lack it", opts->guest_tool);
    }
    mgr = carrel_manager_new(&config, hv, error);
    if (mgr) {
        g_autofree char *names = carrel_manager_policy_names(mgr);
        g_message("policies: %s (from %s)", names, opts->policy_dir);
    }
    if (!mgr || !ensure_admin_token(mgr, opts->state_dir, error) ||
        !carrel_manager_reconcile(mgr, &report, error))
        return NULL;
    log_reconcile(&report);
    /* Sessions that ran on with a network get their path back before anyone asks; without it
     * they reach nothing, which is safe, so carreld serves anyway. */
    if (!carrel_manager_egress_resume(mgr, &egress_error))
        g_warning("sessions with a network have none until this is fixed: %s",
                  egress_error->message);
    /* Crashed or powered-off guests are noticed within seconds, and their exit paths run. */
    carrel_manager_start_watch(mgr, 0);
    return g_steal_pointer(&mgr);
}

/* The Unix socket, unless --socket "" asked for none: an empty path would otherwise bind the
 * one unnamed abstract socket of the whole host, which a second daemon then cannot have. */
static gboolean
listen_socket(CarrelApi *api, const Options *opts, GError **error)
{
    g_autofree char *socket_dir = NULL;

    if (!*opts->socket_path)
        return TRUE;
    socket_dir = g_path_get_dirname(opts->socket_path);
    if (!carrel_util_ensure_dir(socket_dir, 0755, error) ||
        !carrel_api_listen_unix(api, opts->socket_path, error))
        return FALSE;
    g_message("listening on %s", opts->socket_path);
    return TRUE;
}

/* The TCP listener; its URL, with the port really bound (--listen ADDR:0 takes any free one),
 * goes to STATE/web.url for scripts and tests. A stale file is removed first, so that a reader
 * waiting for it never takes the URL of an earlier run. */
static gboolean
listen_tcp(CarrelApi *api, const Options *opts, GError **error)
{
    g_autofree char *path = g_build_filename(opts->state_dir, "web.url", NULL);
    g_autofree char *line = NULL;

    (void)g_unlink(path);
    if (!carrel_api_listen_tcp(api, opts->listen_address, opts->tls, error))
        return FALSE;
    g_message("listening on %s (%s)", carrel_api_web_url(api), opts->tls ? "TLS" : "loopback only");
    line = g_strconcat(carrel_api_web_url(api), "\n", NULL);
    if (!g_file_set_contents(path, line, -1, error)) {
        g_prefix_error(error, "writing the listener's URL: ");
        return FALSE;
    }
    return TRUE;
}

/* --api-*-threads and --api-queue over the defaults (a negative value is out of range). */
static gboolean
set_pool_sizes(CarrelApi *api, const Options *opts, GError **error)
{
    CarrelApiPoolSizes sizes = CARREL_API_POOL_SIZES_DEFAULT;
    guint *threads[] = {&sizes.quick, &sizes.long_ops, &sizes.exec};

    for (guint i = 0; i < G_N_ELEMENTS(threads); i++)
        if (opts->api_threads[i])
            *threads[i] = (guint)opts->api_threads[i];
    if (opts->api_queue)
        sizes.queue = (guint)opts->api_queue;
    if (!carrel_api_set_pool_sizes(api, &sizes, error)) {
        g_prefix_error(error, "--api-*-threads, --api-queue: ");
        return FALSE;
    }
    return TRUE;
}

static gboolean
start_api(CarrelApi *api, const Options *opts, GError **error)
{
    if (!set_pool_sizes(api, opts, error))
        return FALSE;
    carrel_api_set_web(api, opts->web_dir, opts->spice_dir, opts->test_hooks);
    carrel_api_set_max_streams(api, (guint)opts->max_streams);
    if (opts->test_hooks)
        g_warning("test hooks are enabled: this daemon is for tests only");
    if (!listen_socket(api, opts, error))
        return FALSE;
    return opts->listen_address ? listen_tcp(api, opts, error) : TRUE;
}

/* Seconds a SIGTERM waits for running verbs: a cold create under TCG takes about 20 s. */
#define DRAIN_VERBS_S 60

typedef struct {
    CarrelManager *mgr;
    gint done; /* atomic: 1 + the verbs still running when the wait ended */
} Drain;

static gpointer
drain_verbs(gpointer data)
{
    Drain *d = data;

    g_atomic_int_set(&d->done, (gint)carrel_manager_drain(d->mgr, DRAIN_VERBS_S) + 1);
    g_main_context_wakeup(NULL);
    return NULL;
}

/* The verbs first, waited for in a thread while the main loop still serves (reads go on, new
 * verbs get BUSY); then the replies in flight get a moment to be written. */
static void
drain(CarrelManager *mgr, CarrelApi *api)
{
    Drain d = {.mgr = mgr};
    GThread *thread;

    g_message("stopping: waiting up to %d s for running verbs", DRAIN_VERBS_S);
    thread = g_thread_new("drain", drain_verbs, &d);
    while (!g_atomic_int_get(&d.done))
        g_main_context_iteration(NULL, TRUE);
    g_thread_join(thread);
    if (d.done > 1)
        g_message("stopping with %d verb(s) still running: the next carreld settles them",
                  d.done - 1);
    for (int i = 0; i < 100 && carrel_api_in_flight(api) > 0; i++) {
        g_main_context_iteration(NULL, FALSE);
        g_usleep(100 * 1000);
    }
    /*
     * A handler that is done has its reply queued, not yet written: let libsoup write it, until
     * the loop has had nothing to do for two looks in a row (up to 1 s; it was always 1 s, which
     * every stop and restart paid).
     */
    for (int i = 0, quiet = 0; i < 20 && quiet < 2; i++) {
        quiet = g_main_context_pending(NULL) ? 0 : quiet + 1;
        while (g_main_context_pending(NULL))
            g_main_context_iteration(NULL, FALSE);
        g_usleep(50 * 1000);
    }
}

static int
run(const Options *opts)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelManager) mgr = NULL;
    g_autoptr(CarrelApi) api = NULL;
    g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);

    mgr = open_manager(opts, &error);
    if (mgr) {
        api = carrel_api_new(mgr, CARREL_VERSION, &error);
    }
    if (!mgr || !api || !start_api(api, opts, &error)) {
        g_printerr("carreld: %s\n", error->message);
        return EXIT_FAILURE;
    }
    g_unix_signal_add(SIGTERM, on_quit_signal, loop);
    g_unix_signal_add(SIGINT, on_quit_signal, loop);
    g_message("carreld %s ready", CARREL_VERSION);
    g_main_loop_run(loop);
    drain(mgr, api);
    /* Sessions keep running; their path does not outlive carreld (the next one starts it). */
    carrel_manager_egress_stop(mgr);
    if (*opts->socket_path)
        (void)g_unlink(opts->socket_path);
    if (carrel_manager_jobs_running(mgr) > 0) {
        /* A build or warm thread still uses the manager: exit without freeing it; the job's
         * temporary files are cleaned by the next run of the same job. */
        g_message("leaving %u running job(s) behind", carrel_manager_jobs_running(mgr));
        g_clear_pointer(&api, carrel_api_free);
        (void)g_steal_pointer(&mgr);
    }
    return EXIT_SUCCESS;
}

/* Tests of recovery only: a daemon without --test-hooks ignores CARREL_CRASH_AT. */
static gboolean
arm_crash_point(const Options *opts, GError **error)
{
    const char *point = g_getenv("CARREL_CRASH_AT");

    if (!point || !*point)
        return TRUE;
    if (!opts->test_hooks) {
        g_warning("CARREL_CRASH_AT is ignored without --test-hooks");
        return TRUE;
    }
    if (!carrel_crash_arm(point, error))
        return FALSE;
    g_warning("crash point '%s' is armed: this daemon exits when it reaches it", point);
    return TRUE;
}

/* carreld --probe-accel: the same decision carreld makes at start, for scripts. */
static int
probe_accel(const Options *opts)
{
    g_autofree char *reason = NULL;
    g_autoptr(GError) error = NULL;
    CarrelAccel accel = choose_accel(opts, &reason, &error);

    if (accel == CARREL_ACCEL_LAST) {
        g_printerr("carreld: %s\n", error->message);
        return 2;
    }
    g_printerr("carreld: accelerator: %s (%s)\n", carrel_accel_to_string(accel), reason);
    g_print("%s\n", carrel_accel_to_string(accel));
    return EXIT_SUCCESS;
}

int
main(int argc, char **argv)
{
    g_auto(Options) opts = {0};
    g_autoptr(GError) error = NULL;

    setlocale(LC_ALL, "");
    if (!parse_options(argc, argv, &opts, &error)) {
        g_printerr("carreld: %s\n", error->message);
        return 2;
    }
    if (opts.probe_accel)
        return probe_accel(&opts);
    if (opts.crash_points) {
        for (const char *const *p = carrel_crash_points(); *p; p++)
            g_print("%s\n", *p);
        return EXIT_SUCCESS;
    }
    if (!arm_crash_point(&opts, &error)) {
        g_printerr("carreld: %s\n", error->message);
        return 2;
    }
    return run(&opts);
}
