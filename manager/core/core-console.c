/*
 * Console access: the SPICE port of a session and a short-lived SPICE password. One password
 * per QEMU run: reused while it has enough life left, its life extended when it has not, so two
 * viewers opening the console at once never lock each other out by replacing it.
 */
#include <string.h>

#include "core/core-priv.h"

/* Per session: the password QEMU run run_id was given last. */
typedef struct {
    gint64 run_id;
    char *password;
    gint64 expires_at; /* Unix seconds */
} ConsolePassword;

void
carrel_console_password_free(gpointer data)
{
    ConsolePassword *cp = data;

    g_free(cp->password);
    g_free(cp);
}

void
carrel_console_access_free(CarrelConsoleAccess *access)
{
    if (!access)
        return;
    g_free(access->session_id);
    g_free(access->domain);
    if (access->password)
        memset(access->password, 0, strlen(access->password));
    g_free(access->password);
    g_free(access);
}

/* 16 random bytes as 32 hex characters. */
static char *
new_password(void)
{
    guint8 raw[16];
    GString *text = g_string_sized_new(2 * sizeof(raw));

    carrel_util_random_bytes(raw, sizeof(raw));
    for (gsize i = 0; i < sizeof(raw); i++)
        g_string_append_printf(text, "%02x", raw[i]);
    return g_string_free(text, FALSE);
}

static CarrelSession *
viewable_session(CarrelManager *mgr, const char *id_or_name, GError **error)
{
    g_autoptr(CarrelSession) session = carrel_store_session_get(mgr->store, id_or_name, error);

    if (!session)
        return NULL;
    /* Paused is fine: SPICE still serves the last frame. */
    if (session->state != CARREL_SESSION_RUNNING && session->state != CARREL_SESSION_PAUSED) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "cannot open the console of a session that is %s",
                    carrel_session_state_to_string(session->state));
        return NULL;
    }
    return g_steal_pointer(&session);
}

/* Called with console_lock held: the password to hand out, set on the domain when new. */
static ConsolePassword *
current_password(CarrelManager *mgr, const char *session_id, const char *domain, gint64 run_id,
                 GError **error)
{
    ConsolePassword *cp = g_hash_table_lookup(mgr->consoles, session_id);
    gint64 now = g_get_real_time() / G_USEC_PER_SEC;
    g_autofree char *password = NULL;
    gint64 expires_at = now + CARREL_CONSOLE_PASSWORD_TTL_S;

    /* A new QEMU (restart, restore) forgot the old password. */
    if (cp && cp->run_id == run_id && cp->expires_at - now >= CARREL_CONSOLE_PASSWORD_REUSE_S)
        return cp;
    /*
     * The same QEMU, a password near its end: it gets more life, not a successor. A viewer that
     * got it a moment ago may still be linking its display and input channels with it; a new
     * password would refuse those (spice-html5: "Permission denied.").
     */
    if (cp && cp->run_id == run_id) {
        if (!carrel_hypervisor_spice_password(mgr->hv, domain, cp->password, expires_at, error))
            return NULL;
        cp->expires_at = expires_at;
        return cp;
    }
    password = new_password();
    if (!carrel_hypervisor_spice_password(mgr->hv, domain, password, expires_at, error)) {
        /* QEMU refuses a password when SPICE started without one: a domain from a carrel that
         * did not lock the display at boot (its definition or warm state is older). */
        g_prefix_error(error, "(a session whose domain was defined before consoles existed "
                              "cannot get one: create a new session) ");
        return NULL;
    }
    cp = g_new0(ConsolePassword, 1);
    cp->run_id = run_id;
    cp->password = g_steal_pointer(&password);
    cp->expires_at = expires_at;
    g_hash_table_replace(mgr->consoles, g_strdup(session_id), cp);
    return cp;
}

static CarrelConsoleAccess *
console_open(CarrelManager *mgr, const char *id_or_name, GError **error)
{
    g_autoptr(CarrelSession) session = viewable_session(mgr, id_or_name, error);
    g_autoptr(CarrelConsoleAccess) access = NULL;
    g_autofree char *domain = NULL;
    CarrelSpiceInfo info = {0};
    ConsolePassword *cp;

    if (!session)
        return NULL;
    domain = carrel_session_domain_name(session->id);
    g_mutex_lock(&mgr->console_lock);
    cp = carrel_hypervisor_spice_info(mgr->hv, domain, &info, error)
             ? current_password(mgr, session->id, domain, info.run_id, error)
             : NULL;
    if (cp) {
        access = g_new0(CarrelConsoleAccess, 1);
        access->session_id = g_strdup(session->id);
        access->domain = g_steal_pointer(&domain);
        access->port = info.port;
        access->password = g_strdup(cp->password);
        access->expires_at = cp->expires_at;
    }
    g_mutex_unlock(&mgr->console_lock);
    if (!access)
        g_prefix_error(error, "opening the console of session '%s': ", session->id);
    return g_steal_pointer(&access);
}

CarrelConsoleAccess *
carrel_manager_console_open(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                            GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_CONSOLE_VIEW, id_or_name, NULL, error))
        return NULL;
    return carrel_door_finish(&door, console_open(mgr, door.session_id, &local), &local, error);
}

gboolean
carrel_manager_console_may_act(CarrelManager *mgr, const CarrelPrincipal *who,
                               const char *session_id)
{
    g_autoptr(CarrelPrincipal) still = carrel_manager_principal(mgr, who->token_id, NULL);
    g_autofree char *holder_id = NULL;
    g_autofree char *holder = NULL;

    /* A revoked token's console turns view-only at its next message. */
    if (!still)
        return FALSE;
    carrel_manager_lease_holder(mgr, session_id, &holder_id, &holder);
    return holder_id && g_str_equal(holder_id, who->token_id);
}
