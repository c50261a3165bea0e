/*
 * api: the console's HTTP routes. POST /v1/sessions/{id}/console issues a ticket for the
 * websocket proxy (api-console-proxy.c), which authenticates to SPICE itself: the SPICE password
 * stays in carreld. GET /v1/sessions/{id}/console.vv hands the lease holder a remote-viewer file,
 * the one place a password goes out. Neither tickets nor passwords are ever logged.
 */
#include <string.h>

#include "api/api-console-priv.h"

CarrelApiReply *
carrel_api_post_console(CarrelApiRequest *req, GError **error)
{
    g_autoptr(CarrelConsoleAccess) access =
        carrel_manager_console_open(req->mgr, req->who, carrel_api_param(req, 0), error);
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *ticket = NULL;
    g_autofree char *url = NULL;
    g_autofree char *expires = NULL;

    if (!access)
        return NULL;
    ticket =
        carrel_console_tickets_issue(req->api->console_tickets, access->session_id, access->port,
                                     access->password, req->who->token_id, error);
    if (!ticket)
        return NULL;
    url = g_strconcat(CARREL_CONSOLE_PREFIX "/", ticket, NULL);
    expires = carrel_util_format_time(g_get_real_time() / G_USEC_PER_SEC +
                                      CARREL_CONSOLE_TICKET_TTL_US / G_USEC_PER_SEC);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "ticket");
    json_builder_add_string_value(b, ticket);
    json_builder_set_member_name(b, "url");
    json_builder_add_string_value(b, url);
    json_builder_set_member_name(b, "expires_at");
    json_builder_add_string_value(b, expires);
    json_builder_set_member_name(b, "view_only");
    json_builder_add_boolean_value(
        b, !carrel_manager_console_may_act(req->mgr, req->who, access->session_id));
    json_builder_end_object(b);
    return carrel_api_reply_ok(json_builder_get_root(b));
}

CarrelApiReply *
carrel_api_get_console_vv(CarrelApiRequest *req, GError **error)
{
    g_autoptr(CarrelSession) session =
        carrel_manager_session_get(req->mgr, req->who, carrel_api_param(req, 0), error);
    g_autoptr(CarrelConsoleAccess) access = NULL;
    g_autofree char *title = NULL;
    g_autofree char *filename = NULL;
    CarrelVvSpec spec = {0};
    CarrelApiReply *reply;
    char *text;

    if (!session)
        return NULL;
    /* remote-viewer talks to SPICE directly, past the proxy's view-only filter. */
    if (!carrel_manager_console_may_act(req->mgr, req->who, session->id)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE,
                    "a console file needs the control lease of session '%s': take it first",
                    session->id);
        return NULL;
    }
    access = carrel_manager_console_open(req->mgr, req->who, session->id, error);
    if (!access)
        return NULL;
    title = g_strdup_printf("carrel: %s (%s)", session->name, session->id);
    spec.title = title;
    spec.port = access->port;
    spec.password = access->password;
    text = carrel_spice_vv_file(&spec, error);
    if (!text)
        return NULL;
    /* The file opens the display past the proxy: on the timeline, naming who took it. */
    if (!carrel_manager_note(req->mgr, session->id, req->who, "control", "console_file", NULL, NULL,
                             NULL, 0, error)) {
        g_free(text);
        return NULL;
    }
    reply = carrel_api_reply_new_bytes(SOUP_STATUS_OK, g_bytes_new_take(text, strlen(text)),
                                       "application/x-virt-viewer");
    filename = g_strdup_printf("carrel-%s.vv", session->id);
    carrel_api_reply_set_attachment(reply, filename);
    return reply;
}
