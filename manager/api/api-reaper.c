/*
 * api: closes connections their clients closed while idle. libsoup 3.2 (Debian 12) never notices
 * a keep-alive connection that the client closes between requests (fixed upstream by libsoup
 * commit d20c660, in 3.3): each such connection keeps its socket open for as long as carreld
 * runs, every CLI command leaves one, and at the descriptor limit carreld stops accepting.
 * The reaper tracks each connection's socket with the requests running on it; every few seconds
 * it looks at the idle ones, and closes a socket whose peer has gone (end of stream or reset).
 * A socket with a request in flight is never touched, nor one with data waiting.
 */
#include <errno.h>
#include <sys/socket.h>

#include "api/api-priv.h"

#define REAPER_INTERVAL_S 2

struct _CarrelApiReaper {
    GHashTable *sockets; /* GSocket (ref) -> guint: requests in flight on it */
    guint timer;
    guint reaped;
};

static void
on_started(SoupServer *server, SoupServerMessage *msg, gpointer data)
{
    CarrelApiReaper *reaper = data;
    GSocket *sock = soup_server_message_get_socket(msg);
    guint *running;

    if (!sock)
        return;
    running = g_hash_table_lookup(reaper->sockets, sock);
    if (!running) {
        running = g_new0(guint, 1);
        g_hash_table_insert(reaper->sockets, g_object_ref(sock), running);
    }
    (*running)++;
}

static void
on_ended(SoupServer *server, SoupServerMessage *msg, gpointer data)
{
    CarrelApiReaper *reaper = data;
    GSocket *sock = soup_server_message_get_socket(msg);
    guint *running = sock ? g_hash_table_lookup(reaper->sockets, sock) : NULL;

    /* Kept at 0 (not removed): idle, and watched from now on. */
    if (running && *running > 0)
        (*running)--;
}

/* TRUE when the peer of an idle socket is gone: it reads as end of stream or an error. */
static gboolean
peer_gone(GSocket *sock)
{
    char byte;
    ssize_t n = recv(g_socket_get_fd(sock), &byte, 1, MSG_PEEK | MSG_DONTWAIT);

    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static gboolean
reap(gpointer key, gpointer value, gpointer data)
{
    CarrelApiReaper *reaper = data;
    GSocket *sock = key;

    if (g_socket_is_closed(sock))
        return TRUE;
    if (*(guint *)value > 0 || !peer_gone(sock))
        return FALSE;
    (void)g_socket_close(sock, NULL);
    reaper->reaped++;
    return TRUE;
}

static gboolean
on_tick(gpointer data)
{
    CarrelApiReaper *reaper = data;

    g_hash_table_foreach_remove(reaper->sockets, reap, reaper);
    return G_SOURCE_CONTINUE;
}

CarrelApiReaper *
carrel_api_reaper_new(SoupServer *server)
{
    CarrelApiReaper *reaper = g_new0(CarrelApiReaper, 1);

    reaper->sockets = g_hash_table_new_full(g_direct_hash, g_direct_equal, g_object_unref, g_free);
    g_signal_connect(server, "request-started", G_CALLBACK(on_started), reaper);
    g_signal_connect(server, "request-finished", G_CALLBACK(on_ended), reaper);
    g_signal_connect(server, "request-aborted", G_CALLBACK(on_ended), reaper);
    reaper->timer = g_timeout_add_seconds(REAPER_INTERVAL_S, on_tick, reaper);
    return reaper;
}

guint
carrel_api_reaper_reaped(CarrelApiReaper *reaper)
{
    return reaper ? reaper->reaped : 0;
}

void
carrel_api_reaper_free(CarrelApiReaper *reaper, SoupServer *server)
{
    if (!reaper)
        return;
    g_signal_handlers_disconnect_by_data(server, reaper);
    g_source_remove(reaper->timer);
    g_hash_table_unref(reaper->sockets);
    g_free(reaper);
}
