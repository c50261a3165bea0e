/*
 * Console tickets: one-time, short-lived and bound to who asked. A ticket opens one SPICE main
 * connection; the other channels of that connection (display, inputs, cursor...) use the same
 * ticket while the main connection is open. Kept in memory only: a daemon restart voids them.
 */
#include <string.h>

#include "api/api-console-priv.h"

typedef enum {
    TICKET_FRESH,     /* issued, no main channel yet */
    TICKET_MAIN_OPEN, /* its main connection is open */
    TICKET_GONE,      /* expired or used up: remembered only to answer 410 */
} TicketState;

typedef struct {
    char *session_id;
    char *principal;
    char *password; /* the SPICE password the proxy authenticates with; never leaves carreld */
    guint port;
    TicketState state;
    gint64 issued_at;
    gint64 gone_at;
} Ticket;

struct _CarrelConsoleTickets {
    GMutex lock;
    CarrelClockFunc clock;
    GHashTable *tickets; /* ticket -> Ticket */
};

static void
ticket_free(gpointer data)
{
    Ticket *t = data;

    g_free(t->session_id);
    g_free(t->principal);
    if (t->password)
        memset(t->password, 0, strlen(t->password));
    g_free(t->password);
    g_free(t);
}

CarrelConsoleTickets *
carrel_console_tickets_new(CarrelClockFunc clock)
{
    CarrelConsoleTickets *tickets = g_new0(CarrelConsoleTickets, 1);

    g_mutex_init(&tickets->lock);
    tickets->clock = clock ? clock : g_get_monotonic_time;
    tickets->tickets = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, ticket_free);
    return tickets;
}

void
carrel_console_tickets_free(CarrelConsoleTickets *tickets)
{
    if (!tickets)
        return;
    g_hash_table_unref(tickets->tickets);
    g_mutex_clear(&tickets->lock);
    g_free(tickets);
}

/* Called with the lock held: fresh tickets past their time become gone, old gone ones go. */
static void
age(CarrelConsoleTickets *tickets, gint64 now)
{
    GHashTableIter iter;
    gpointer value;

    g_hash_table_iter_init(&iter, tickets->tickets);
    while (g_hash_table_iter_next(&iter, NULL, &value)) {
        Ticket *t = value;
        if (t->state == TICKET_FRESH && now - t->issued_at >= CARREL_CONSOLE_TICKET_TTL_US) {
            t->state = TICKET_GONE;
            t->gone_at = t->issued_at + CARREL_CONSOLE_TICKET_TTL_US;
        }
        if (t->state == TICKET_GONE && now - t->gone_at >= CARREL_CONSOLE_TICKET_GONE_US)
            g_hash_table_iter_remove(&iter);
    }
}

char *
carrel_console_tickets_issue(CarrelConsoleTickets *tickets, const char *session_id, guint port,
                             const char *password, const char *principal, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&tickets->lock);
    gint64 now = tickets->clock();
    /* 256 random bits from the kernel. */
    g_autofree char *value = carrel_util_new_token();
    Ticket *t;

    age(tickets, now);
    if (g_hash_table_size(tickets->tickets) >= CARREL_CONSOLE_TICKETS_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "too many console tickets outstanding (%d)", CARREL_CONSOLE_TICKETS_MAX);
        return NULL;
    }
    t = g_new0(Ticket, 1);
    t->session_id = g_strdup(session_id);
    t->principal = g_strdup(principal);
    t->password = g_strdup(password);
    t->port = port;
    t->state = TICKET_FRESH;
    t->issued_at = now;
    g_hash_table_insert(tickets->tickets, g_strdup(value), t);
    return g_steal_pointer(&value);
}

/* Called with the lock held. */
static Ticket *
find(CarrelConsoleTickets *tickets, const char *ticket, const char *principal, GError **error)
{
    Ticket *t;

    age(tickets, tickets->clock());
    t = ticket ? g_hash_table_lookup(tickets->tickets, ticket) : NULL;
    if (!t) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "unknown console ticket");
        return NULL;
    }
    if (g_strcmp0(t->principal, principal) != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN,
                    "the console ticket was issued to someone else");
        return NULL;
    }
    if (t->state == TICKET_GONE) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_GONE,
                    "the console ticket expired or was used");
        return NULL;
    }
    return t;
}

gboolean
carrel_console_tickets_check(CarrelConsoleTickets *tickets, const char *ticket,
                             const char *principal, char **ret_session_id, guint *ret_port,
                             GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&tickets->lock);
    Ticket *t = find(tickets, ticket, principal, error);

    if (!t)
        return FALSE;
    if (ret_session_id)
        *ret_session_id = g_strdup(t->session_id);
    if (ret_port)
        *ret_port = t->port;
    return TRUE;
}

gboolean
carrel_console_tickets_link(CarrelConsoleTickets *tickets, const char *ticket,
                            const char *principal, guint8 channel_type, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&tickets->lock);
    Ticket *t = find(tickets, ticket, principal, error);

    if (!t)
        return FALSE;
    if (channel_type == CARREL_SPICE_CHANNEL_MAIN) {
        if (t->state != TICKET_FRESH) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                        "the console ticket was already used");
            return FALSE;
        }
        t->state = TICKET_MAIN_OPEN;
        return TRUE;
    }
    if (t->state != TICKET_MAIN_OPEN) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "the console ticket has no open main channel");
        return FALSE;
    }
    return TRUE;
}

char *
carrel_console_tickets_password(CarrelConsoleTickets *tickets, const char *ticket,
                                const char *principal, GError **error)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&tickets->lock);
    Ticket *t = find(tickets, ticket, principal, error);

    if (t && !t->password)
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND,
                    "the console ticket has no SPICE password");
    return t && t->password ? g_strdup(t->password) : NULL;
}

void
carrel_console_tickets_main_closed(CarrelConsoleTickets *tickets, const char *ticket)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&tickets->lock);
    Ticket *t = g_hash_table_lookup(tickets->tickets, ticket);

    if (t && t->state == TICKET_MAIN_OPEN) {
        t->state = TICKET_GONE;
        t->gone_at = tickets->clock();
    }
}
