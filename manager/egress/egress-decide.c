/*
 * egress: the decision socket. squid's external ACL helper relays each of squid's lines here
 * and each answer back; answers may come in any order (an ask waits for a person), so every
 * line keeps its channel id.
 */
#include <glib/gstdio.h>
#include <string.h>

#include "egress/egress-priv.h"

#define LINE_MAX_BYTES 8192

struct _CarrelEgressQuery {
    char *channel;
    char *source;
    char *name;
    guint port;
    gboolean tls;
    gboolean connect;
    gboolean host_mismatch;
    GOutputStream *out; /* the helper's connection; NULL in tests */
};

struct _CarrelEgressDecider {
    GSocketService *service;
    char *path;
    CarrelEgressDecideFunc decide;
    gpointer data;
};

void
carrel_egress_query_free(CarrelEgressQuery *q)
{
    if (!q)
        return;
    g_free(q->channel);
    g_free(q->source);
    g_free(q->name);
    g_clear_object(&q->out);
    g_free(q);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelEgressQuery, carrel_egress_query_free)

const char *
carrel_egress_query_source(const CarrelEgressQuery *q)
{
    return q->source;
}

const char *
carrel_egress_query_name(const CarrelEgressQuery *q)
{
    return q->name;
}

guint
carrel_egress_query_port(const CarrelEgressQuery *q)
{
    return q->port;
}

const char *
carrel_egress_query_protocol(const CarrelEgressQuery *q)
{
    return q->tls ? "tls" : "http";
}

/* A field as squid sent it: %-encoded, "-" when empty. */
static char *
field(const char *text)
{
    g_autofree char *plain = NULL;

    if (!text || g_str_equal(text, "-"))
        return NULL;
    plain = g_uri_unescape_string(text, NULL);
    if (!plain || !*plain || !carrel_util_is_clean_text(plain) || strchr(plain, ' '))
        return NULL;
    return g_ascii_strdown(plain, -1);
}

/* "host:port" or "[v6]:port" without the port. */
static char *
strip_port(char *host)
{
    char *colon = host ? strrchr(host, ':') : NULL;

    if (colon && host[0] != '[' && strchr(host, ':') == colon)
        *colon = '\0';
    return host;
}

CarrelEgressQuery *
carrel_egress_query_parse(const char *line, GOutputStream *out)
{
    g_auto(GStrv) f = g_strsplit(line, " ", -1);
    g_autoptr(CarrelEgressQuery) q = g_new0(CarrelEgressQuery, 1);
    g_autofree char *host = NULL;
    g_autofree char *sni = NULL;
    g_autofree char *url_host = NULL;
    guint64 port = 0;

    /* ID SOURCE HOST SNI URL_HOST PORT METHOD, then what squid adds. */
    if (g_strv_length(f) < 7 || strlen(f[0]) > 16 || strspn(f[0], "0123456789") != strlen(f[0]) ||
        !g_hostname_is_ip_address(f[1]) ||
        !g_ascii_string_to_unsigned(f[5], 10, 1, 65535, &port, NULL))
        return NULL;
    q->channel = g_strdup(f[0]);
    q->source = g_strdup(f[1]);
    host = strip_port(field(f[2]));
    sni = field(f[3]);
    url_host = field(f[4]);
    q->name = g_strdup(sni ? sni : host ? host : url_host ? url_host : "");
    q->port = (guint)port;
    q->connect = g_str_equal(f[6], "CONNECT");
    q->tls = q->connect || sni != NULL;
    /* The step-2 look at a TLS connection carries its address as Host: only a name counts. */
    q->host_mismatch = sni && host && !g_hostname_is_ip_address(host) && !g_str_equal(host, sni);
    q->out = out ? g_object_ref(out) : NULL;
    return g_steal_pointer(&q);
}

gboolean
carrel_egress_query_is_connect(const CarrelEgressQuery *q)
{
    return q->connect;
}

gboolean
carrel_egress_query_host_mismatch(const CarrelEgressQuery *q)
{
    return q->host_mismatch;
}

char *
carrel_egress_query_reply_line(const CarrelEgressQuery *q, gboolean allow, const char *word,
                               const char *const *notes)
{
    GString *line = g_string_new(NULL);

    g_string_append_printf(line, "%s %s log=%s", q->channel, allow ? "OK" : "ERR", word);
    /* Values were checked when loaded: printable, no quote, no backslash. */
    for (guint i = 0; notes && notes[i] && notes[i + 1]; i += 2)
        g_string_append_printf(line, " %s=\"%s\"", notes[i], notes[i + 1]);
    g_string_append_c(line, '\n');
    return g_string_free(line, FALSE);
}

void
carrel_egress_query_answer(CarrelEgressQuery *q, gboolean allow, const char *word)
{
    carrel_egress_query_answer_notes(q, allow, word, NULL);
}

void
carrel_egress_query_answer_notes(CarrelEgressQuery *q, gboolean allow, const char *word,
                                 const char *const *notes)
{
    g_autofree char *reply = carrel_egress_query_reply_line(q, allow, word, notes);

    /* A helper gone (squid restarted) has nobody to answer: its request is gone too. */
    if (q->out && !g_output_stream_is_closed(q->out))
        (void)g_output_stream_write_all(q->out, reply, strlen(reply), NULL, NULL, NULL);
    /* A secret's value is not left behind in freed memory. */
    explicit_bzero(reply, strlen(reply));
    carrel_egress_query_free(q);
}

typedef struct {
    CarrelEgressDecider *decider;
    GSocketConnection *conn;
    GDataInputStream *in;
} Connection;

static void
connection_free(Connection *c)
{
    g_clear_object(&c->in);
    g_clear_object(&c->conn);
    g_free(c);
}

static void read_next(Connection *c);

static void
on_line(GObject *source, GAsyncResult *res, gpointer data)
{
    Connection *c = data;
    gsize len = 0;
    g_autofree char *line =
        g_data_input_stream_read_line_finish(G_DATA_INPUT_STREAM(source), res, &len, NULL);
    CarrelEgressQuery *q;
    GOutputStream *out;

    if (!line || len > LINE_MAX_BYTES) {
        connection_free(c);
        return;
    }
    out = g_io_stream_get_output_stream(G_IO_STREAM(c->conn));
    q = carrel_egress_query_parse(line, out);
    if (q)
        c->decider->decide(q, c->decider->data);
    read_next(c);
}

static void
read_next(Connection *c)
{
    g_data_input_stream_read_line_async(c->in, G_PRIORITY_DEFAULT, NULL, on_line, c);
}

static gboolean
on_incoming(GSocketService *service, GSocketConnection *conn, GObject *source, gpointer data)
{
    Connection *c = g_new0(Connection, 1);

    c->decider = data;
    c->conn = g_object_ref(conn);
    c->in = g_data_input_stream_new(g_io_stream_get_input_stream(G_IO_STREAM(conn)));
    read_next(c);
    return TRUE;
}

CarrelEgressDecider *
carrel_egress_decider_new(const char *socket_path, CarrelEgressDecideFunc decide, gpointer data,
                          GError **error)
{
    g_autoptr(CarrelEgressDecider) d = g_new0(CarrelEgressDecider, 1);
    g_autoptr(GSocketAddress) address = NULL;

    d->path = g_strdup(socket_path);
    d->decide = decide;
    d->data = data;
    (void)g_unlink(socket_path);
    address = g_unix_socket_address_new(socket_path);
    d->service = g_socket_service_new();
    if (!g_socket_listener_add_address(G_SOCKET_LISTENER(d->service), address, G_SOCKET_TYPE_STREAM,
                                       G_SOCKET_PROTOCOL_DEFAULT, NULL, NULL, error)) {
        g_prefix_error(error, "egress decision socket %s: ", socket_path);
        return NULL;
    }
    g_signal_connect(d->service, "incoming", G_CALLBACK(on_incoming), d);
    g_socket_service_start(d->service);
    return g_steal_pointer(&d);
}

void
carrel_egress_decider_free(CarrelEgressDecider *d)
{
    if (!d)
        return;
    if (d->service) {
        g_socket_service_stop(d->service);
        g_socket_listener_close(G_SOCKET_LISTENER(d->service));
        g_clear_object(&d->service);
    }
    if (d->path)
        (void)g_unlink(d->path);
    g_free(d->path);
    g_free(d);
}
