/*
 * egress: the processes and tables of the egress path, run for core: one squid for every
 * session (transparent HTTP, TLS spliced by SNI), one dnsmasq per session, the nftables tables
 * that leave sessions nothing else, and the socket on which squid's helper asks carreld about
 * every request. What is allowed is core's decision; this module asks and reports. The
 * callbacks run in the global default main context (carreld's main loop).
 */
#pragma once

#include "conf/conf.h"
#include "net/net.h"

G_BEGIN_DECLS

/* A question from the proxy: may source (a session's address) reach name:port? */
typedef struct _CarrelEgressQuery CarrelEgressQuery;

const char *carrel_egress_query_source(const CarrelEgressQuery *q);
/* The name the guest used (TLS SNI, else the HTTP Host without port, else the URL's host),
 * lower case; it may be an address (raw IPs are refused by core). */
const char *carrel_egress_query_name(const CarrelEgressQuery *q);
guint carrel_egress_query_port(const CarrelEgressQuery *q);
/* "http" or "tls" */
const char *carrel_egress_query_protocol(const CarrelEgressQuery *q);
/* TRUE for the first look at a TLS connection (squid's CONNECT): decrypt or splice is decided
 * there; FALSE for an HTTP request (plain, or inside a decrypted connection). */
gboolean carrel_egress_query_is_connect(const CarrelEgressQuery *q);
/* A request inside a decrypted TLS connection whose Host names another server than its SNI:
 * a server sharing the address (a CDN) must not get what was meant for the SNI's. */
gboolean carrel_egress_query_host_mismatch(const CarrelEgressQuery *q);
/* Answers (now or later, from the main context) and frees q. word is what the egress log says
 * of it: "allow", "deny", "ask-allow", "ask-deny", "ask-timeout". */
void carrel_egress_query_answer(CarrelEgressQuery *q, gboolean allow, const char *word);
/* The same with notes for squid (NULL-terminated key, value pairs): carrel_bump=yes decrypts
 * the connection, carrel_hdr_I=VALUE sets secret header I. Values never reach a log. */
void carrel_egress_query_answer_notes(CarrelEgressQuery *q, gboolean allow, const char *word,
                                      const char *const *notes);

typedef void (*CarrelEgressDecideFunc)(CarrelEgressQuery *q, gpointer data);
/* A record of the egress log; source is the session's address (rec->session_id is NULL: the
 * callback knows which session has it). Takes nothing: copy what you keep. */
typedef void (*CarrelEgressRecordFunc)(const char *source, const CarrelEgressRecord *rec,
                                       gpointer data);

typedef struct {
    const char *run_dir;      /* configs, logs, sockets, the CA (created, mode 0750) */
    const char *upstream_dns; /* the resolver of squid and of the sessions' dnsmasq */
    const char *helper_path;  /* carrel-egress-helper */
    const guint *tls_ports;   /* guest ports to the TLS intercept (443 and the policies' own) */
    guint n_tls_ports;
    char **secret_headers;   /* header I is set from the note carrel_hdr_I of an answer */
    const char *upstream_ca; /* extra CAs for servers of decrypted connections, or NULL */
    CarrelEgressDecideFunc decide;
    CarrelEgressRecordFunc record;
    gpointer data;
} CarrelEgressConfig;

typedef struct _CarrelEgress CarrelEgress;

/* Loads the nftables tables, writes squid.conf (and a CA for its TLS port, once), starts squid
 * and the decision socket. Kills what an earlier carreld left (pid files). FAILED naming the
 * step and the missing Debian package when something is not there. */
CarrelEgress *carrel_egress_start(const CarrelEgressConfig *config, GError **error);
/* The CA certificate squid signs decrypted connections with (PEM): guests whose policy sends
 * secrets trust it. */
const char *carrel_egress_ca_cert(CarrelEgress *eg);

/* Stops squid and every dnsmasq, removes the tables. */
void carrel_egress_free(CarrelEgress *eg);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelEgress, carrel_egress_free)

/* One session on the path: its dnsmasq (dns->gateway, dns->upstream and dns->port are filled
 * here) and its nftables entries. Again for the same session: replaced. */
gboolean carrel_egress_session_add(CarrelEgress *eg, const char *session_id, const char *address,
                                   const char *tap, CarrelNetDnsSpec *dns, GError **error);
void carrel_egress_session_remove(CarrelEgress *eg, const char *session_id);
/* The session ids on the path now. */
GStrv carrel_egress_sessions(CarrelEgress *eg);

/* Pure parsers (egress-log.c), for tests. A line of squid's "carrel" log format: a record and
 * its source address, or NULL for lines that say nothing new (the first half of a spliced TLS
 * connection). */
CarrelEgressRecord *carrel_egress_parse_squid_line(const char *line, char **ret_source);
/* A dnsmasq log line: the name of a refused lookup ("config NAME is NXDOMAIN"), else NULL. */
char *carrel_egress_parse_dnsmasq_line(const char *line);

G_END_DECLS
