/* egress: internals shared by the module's files. */
#pragma once

#include "egress/egress.h"

/* The decision socket (egress-decide.c): squid's helper connects and sends its lines. */
typedef struct _CarrelEgressDecider CarrelEgressDecider;

CarrelEgressDecider *carrel_egress_decider_new(const char *socket_path,
                                               CarrelEgressDecideFunc decide, gpointer data,
                                               GError **error);
void carrel_egress_decider_free(CarrelEgressDecider *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelEgressDecider, carrel_egress_decider_free)

/* A helper line "ID SOURCE HOST SNI URL_HOST PORT METHOD ..." as a query (answering goes to
 * out; NULL for tests). NULL when the line is malformed. Pure but for out. */
CarrelEgressQuery *carrel_egress_query_parse(const char *line, GOutputStream *out);
void carrel_egress_query_free(CarrelEgressQuery *q);
/* "ID OK log=WORD\n" or "ID ERR log=WORD\n", for the query's channel, with notes as
 * key="value" pairs. */
char *carrel_egress_query_reply_line(const CarrelEgressQuery *q, gboolean allow, const char *word,
                                     const char *const *notes);

/* A supervised child (egress-proc.c): its stderr lines go to on_line in the main context; data
 * lives as long as the child (data_free when it is gone, even on failure). */
typedef struct _CarrelEgressChild CarrelEgressChild;
typedef void (*CarrelEgressLineFunc)(const char *line, gpointer data);

CarrelEgressChild *carrel_egress_child_spawn(const char *const *argv, const char *pid_file,
                                             CarrelEgressLineFunc on_line, gpointer data,
                                             GDestroyNotify data_free, GError **error);
/* SIGTERM, then SIGKILL after a second; removes the pid file. */
void carrel_egress_child_stop(CarrelEgressChild *child);
/* Kills what an earlier carreld left running under pid_file (if that pid is still program),
 * and removes the file. */
void carrel_egress_kill_stale(const char *pid_file, const char *program);
/* Runs argv with stdin text (nft -f -); FAILED with its stderr. */
gboolean carrel_egress_run(const char *const *argv, const char *stdin_text, GError **error);

/* A child still running. */
gboolean carrel_egress_child_running(CarrelEgressChild *child);

/* A session on the path (egress-session.c makes them, egress.c keeps them). */
typedef struct {
    char *session_id;
    char *address;
    char *tap;
    guint dns_port;
    CarrelEgressChild *dnsmasq;
} CarrelEgressMember;

/* Stops its dnsmasq and removes its nftables entries. */
void carrel_egress_member_free(CarrelEgressMember *m);
void carrel_egress_member_insert(CarrelEgress *eg, CarrelEgressMember *m);
const char *carrel_egress_run_dir(CarrelEgress *eg);
const char *carrel_egress_upstream(CarrelEgress *eg);
/* Hands a record to core's callback (main context). */
void carrel_egress_report(CarrelEgress *eg, const char *source, const CarrelEgressRecord *rec);
