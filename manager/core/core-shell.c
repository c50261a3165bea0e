/* An interactive terminal in the guest: a login shell on a pseudo-terminal (carrel-guest proc
 * start --pty), for the person who holds the control lease, or an admin. The door (session.shell)
 * is passed once, at open; the start is the session's "command"/"shell" event, and its end
 * (exit code, bytes, duration) is recorded when it closes. Reads, writes and resizes belong to
 * that one shell and are neither audited nor events of their own. One thread at a time. */
#include <signal.h>

#include "core/core-priv.h"

struct _CarrelShell {
    CarrelManager *mgr;
    CarrelPrincipal *who;
    char *session_id;
    char *domain;
    char *handle;
    gint64 started_us;
    gint64 offset;
    int exit_code;
    gboolean ended;
    gboolean closed;
};

void
carrel_shell_free(CarrelShell *sh)
{
    if (!sh)
        return;
    carrel_principal_free(sh->who);
    g_free(sh->session_id);
    g_free(sh->domain);
    g_free(sh->handle);
    g_free(sh);
}

/* Only a person at the console (the lease's holder), or an admin, types into the guest. */
static gboolean
may_type(CarrelManager *mgr, const CarrelPrincipal *who, const char *session_id, GError **error)
{
    g_autofree char *holder_id = NULL;
    g_autofree char *holder = NULL;

    if (who->role == CARREL_ROLE_ADMIN || who->role == CARREL_ROLE_SYSTEM)
        return TRUE;
    carrel_manager_lease_holder(mgr, session_id, &holder_id, &holder);
    if (holder_id && g_strcmp0(holder_id, who->token_id) == 0)
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN,
                "a shell in session '%s' needs its control lease (take it first) or an admin",
                session_id);
    return FALSE;
}

static CarrelShell *
shell_open(CarrelDoor *door, GError **error)
{
    g_autoptr(CarrelShell) sh = g_new0(CarrelShell, 1);
    g_autoptr(CarrelSession) session = NULL;

    if (!may_type(door->mgr, door->who, door->session->id, error))
        return NULL;
    session = carrel_manager_running_session(door->mgr, door->session_id, "open a shell in",
                                             &sh->domain, error);
    if (!session)
        return NULL;
    sh->mgr = door->mgr;
    sh->who = carrel_principal_copy(door->who);
    sh->session_id = g_strdup(session->id);
    return g_steal_pointer(&sh);
}

CarrelShell *
carrel_manager_shell_open(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name,
                          GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_SHELL, id_or_name, NULL, error))
        return NULL;
    return carrel_door_finish(&door, shell_open(&door, &local), &local, error);
}

static JsonNode *
size_params(guint rows, guint cols)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "rows");
    json_builder_add_int_value(b, rows);
    json_builder_set_member_name(b, "cols");
    json_builder_add_int_value(b, cols);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static gboolean
check_size(guint rows, guint cols, GError **error)
{
    if (rows >= 1 && rows <= CARREL_SHELL_SIZE_MAX && cols >= 1 && cols <= CARREL_SHELL_SIZE_MAX)
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                "a terminal has 1 to %d rows and columns, not %u x %u", CARREL_SHELL_SIZE_MAX, rows,
                cols);
    return FALSE;
}

static JsonNode *
spawn(CarrelShell *sh, guint rows, guint cols, GError **error)
{
    g_autofree char *r = g_strdup_printf("%u", rows);
    g_autofree char *c = g_strdup_printf("%u", cols);
    g_autoptr(JsonNode) reply = NULL;
    JsonNode *handle;

    reply = carrel_manager_guest_proc(
        sh->mgr, sh->domain,
        (const char *const[]){"start", "--pty", "--rows", r, "--cols", c, NULL}, NULL, error);
    if (!reply)
        return NULL;
    handle = json_object_get_member(json_node_get_object(reply), "handle");
    if (handle && JSON_NODE_HOLDS_VALUE(handle) &&
        json_node_get_value_type(handle) == G_TYPE_STRING &&
        carrel_proc_handle_valid(json_node_get_string(handle))) {
        sh->handle = g_strdup(json_node_get_string(handle));
        return g_steal_pointer(&reply);
    }
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                "carrel-guest proc start gave a malformed reply");
    return NULL;
}

gboolean
carrel_shell_start(CarrelShell *sh, guint rows, guint cols, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(JsonNode) summary = NULL;
    g_autoptr(JsonNode) params = size_params(rows, cols);

    if (!check_size(rows, cols, error))
        return FALSE;
    sh->started_us = g_get_monotonic_time();
    reply = spawn(sh, rows, cols, &local);
    if (reply)
        summary = json_node_copy(reply);
    if (!carrel_manager_record_outcome(sh->mgr, sh->session_id, sh->who, "command", "shell", params,
                                       summary, &local, sh->started_us, NULL, reply != NULL)) {
        /* Not recorded, so not run: a shell that started anyway is killed. */
        carrel_shell_close(sh);
        g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                   "opening a shell in session '%s': ", sh->session_id);
        return FALSE;
    }
    return TRUE;
}

const char *
carrel_shell_handle(const CarrelShell *sh)
{
    return sh->handle;
}

GBytes *
carrel_shell_read(CarrelShell *sh, gboolean *ret_ended, int *ret_exit_code, GError **error)
{
    g_autofree char *out = g_strdup_printf("%" G_GINT64_FORMAT, sh->offset);
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(CarrelProcRead) read = NULL;

    reply = carrel_manager_guest_proc(sh->mgr, sh->domain,
                                      (const char *const[]){"read", sh->handle, out, "0", NULL},
                                      NULL, error);
    read = reply ? carrel_proc_read_from_guest(reply, sh->offset, 0, error) : NULL;
    if (!read)
        return NULL;
    sh->offset += (gint64)g_bytes_get_size(read->stdout_data);
    /* Ended once the guest says so and its output is read out (stderr stays empty: the
     * terminal is both streams). */
    sh->ended = read->exited && sh->offset >= read->stdout_size;
    if (sh->ended)
        sh->exit_code = read->exit_code;
    *ret_ended = sh->ended;
    *ret_exit_code = sh->exit_code;
    return g_bytes_ref(read->stdout_data);
}

gboolean
carrel_shell_write(CarrelShell *sh, GBytes *data, GError **error)
{
    g_autoptr(JsonNode) reply = NULL;

    if (g_bytes_get_size(data) > CARREL_PROC_INPUT_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT,
                    "shell input of %" G_GSIZE_FORMAT " bytes is over %d", g_bytes_get_size(data),
                    CARREL_PROC_INPUT_MAX);
        return FALSE;
    }
    /* The lease may have moved since the shell opened: the new holder's console is theirs. */
    if (!may_type(sh->mgr, sh->who, sh->session_id, error))
        return FALSE;
    if (g_bytes_get_size(data) == 0)
        return TRUE;
    reply = carrel_manager_guest_proc(sh->mgr, sh->domain,
                                      (const char *const[]){"write", sh->handle, "--stdin", NULL},
                                      data, error);
    return reply != NULL;
}

gboolean
carrel_shell_end_input(CarrelShell *sh, GError **error)
{
    g_autoptr(JsonNode) reply = carrel_manager_guest_proc(
        sh->mgr, sh->domain, (const char *const[]){"close", sh->handle, NULL}, NULL, error);

    return reply != NULL;
}

gboolean
carrel_shell_resize(CarrelShell *sh, guint rows, guint cols, GError **error)
{
    g_autofree char *r = g_strdup_printf("%u", rows);
    g_autofree char *c = g_strdup_printf("%u", cols);
    g_autoptr(JsonNode) reply = NULL;

    if (!check_size(rows, cols, error))
        return FALSE;
    reply = carrel_manager_guest_proc(
        sh->mgr, sh->domain, (const char *const[]){"resize", sh->handle, r, c, NULL}, NULL, error);
    return reply != NULL;
}

static JsonNode *
end_summary(const CarrelShell *sh)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "handle");
    json_builder_add_string_value(b, sh->handle);
    json_builder_set_member_name(b, "exit_code");
    if (sh->ended)
        json_builder_add_int_value(b, sh->exit_code);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "output_bytes");
    json_builder_add_int_value(b, sh->offset);
    json_builder_set_member_name(b, "duration_ms");
    json_builder_add_int_value(b, (g_get_monotonic_time() - sh->started_us) / 1000);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

void
carrel_shell_close(CarrelShell *sh)
{
    g_autofree char *sig = g_strdup_printf("%d", SIGKILL);
    g_autoptr(JsonNode) reply = NULL;
    g_autoptr(JsonNode) summary = NULL;

    if (sh->closed || !sh->handle)
        return;
    sh->closed = TRUE;
    /* The shell's group; the guest's keeper then kills the rest of its session. Already gone
     * (WRONG_STATE) is as good. */
    if (!sh->ended)
        reply = carrel_manager_guest_proc(
            sh->mgr, sh->domain, (const char *const[]){"kill", sh->handle, sig, NULL}, NULL, NULL);
    summary = end_summary(sh);
    if (!carrel_manager_note(sh->mgr, sh->session_id, sh->who, "command", "shell_end", summary,
                             NULL, NULL, 0, NULL))
        g_debug("the shell's end was not recorded");
}
