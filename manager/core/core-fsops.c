/*
 * File operations in a session's guest through carrel-guest fs (guest-tools/guest-fs.c), run
 * as root through guest-exec like the file routes' qemu-ga calls. The guest's reply is untrusted:
 * bounded by the exec output cap and checked by conf's carrel_fs_* parsers.
 */
#include <string.h>

#include "core/core-priv.h"

/* A recursive remove of a large tree may take a while; the guest's own watchdog is 60 s. */
#define FS_TIMEOUT_S 90

typedef enum {
    FS_LIST,
    FS_STAT,
    FS_MKDIR,
    FS_REMOVE,
    FS_MOVE,
} FsVerb;

typedef struct {
    FsVerb verb;
    const char *path;
    const char *to; /* FS_MOVE */
    gboolean flag;  /* --parents, --recursive */
} FsCall;

static const struct {
    const char *word;   /* carrel-guest fs WORD */
    const char *action; /* the audit record's */
    const char *flag;
    CarrelOp op;
} fs_verbs[] = {
    [FS_LIST] = {"list", "fs_list", NULL, CARREL_OP_SESSION_FILE_READ},
    [FS_STAT] = {"stat", "fs_stat", NULL, CARREL_OP_SESSION_FILE_READ},
    [FS_MKDIR] = {"mkdir", "fs_mkdir", "--parents", CARREL_OP_SESSION_FILE_WRITE},
    [FS_REMOVE] = {"remove", "fs_remove", "--recursive", CARREL_OP_SESSION_FILE_WRITE},
    [FS_MOVE] = {"move", "fs_move", NULL, CARREL_OP_SESSION_FILE_WRITE},
};

static JsonNode *
fs_params(const FsCall *call)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "path");
    json_builder_add_string_value(b, call->path ? call->path : "");
    if (call->verb == FS_MOVE) {
        json_builder_set_member_name(b, "to");
        json_builder_add_string_value(b, call->to ? call->to : "");
    }
    if (fs_verbs[call->verb].flag) {
        json_builder_set_member_name(b, call->verb == FS_MKDIR ? "parents" : "recursive");
        json_builder_add_boolean_value(b, call->flag);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static GStrv
fs_argv(const FsCall *call)
{
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();

    g_strv_builder_addv(
        b, (const char *[]){CARREL_GUEST_TOOL_PATH, "fs", fs_verbs[call->verb].word, NULL});
    if (call->flag && fs_verbs[call->verb].flag)
        g_strv_builder_add(b, fs_verbs[call->verb].flag);
    /* Paths are absolute (checked), but "--" keeps them from ever reading as options. */
    g_strv_builder_add(b, "--");
    g_strv_builder_add(b, call->path);
    if (call->verb == FS_MOVE)
        g_strv_builder_add(b, call->to);
    return g_strv_builder_end(b);
}

/* The reply of a verb other than list/stat: {"path": P, FLAG: bool}, re-made from ours. */
static JsonNode *
fs_done(const FsCall *call, JsonNode *reply)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    JsonObject *o = json_node_get_object(reply);

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "path");
    json_builder_add_string_value(b, call->verb == FS_MOVE ? call->to : call->path);
    if (call->verb == FS_MOVE) {
        json_builder_set_member_name(b, "from");
        json_builder_add_string_value(b, call->path);
    }
    if (call->verb == FS_MKDIR) {
        json_builder_set_member_name(b, "created");
        json_builder_add_boolean_value(
            b, json_object_get_boolean_member_with_default(o, "created", FALSE));
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* Turns the guest's output into the verb's clean result. */
static JsonNode *
fs_result(const FsCall *call, JsonNode *reply, GError **error)
{
    JsonNode *entry;
    g_autoptr(JsonNode) clean = NULL;
    g_autoptr(JsonBuilder) b = NULL;

    if (call->verb == FS_LIST)
        return carrel_fs_listing_from_guest(reply, call->path, error);
    if (call->verb != FS_STAT)
        return fs_done(call, reply);
    entry = json_object_get_member(json_node_get_object(reply), "entry");
    if (!(clean = carrel_fs_entry_from_guest(entry, -1, error)))
        return NULL;
    b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "path");
    json_builder_add_string_value(b, call->path);
    json_builder_set_member_name(b, "entry");
    json_builder_add_value(b, g_steal_pointer(&clean));
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static JsonNode *
fs_exec(CarrelManager *mgr, const char *domain, const FsCall *call, GError **error)
{
    g_auto(GStrv) argv = fs_argv(call);
    CarrelGuestExec run = {.argv = (const char *const *)argv,
                           .timeout_s = FS_TIMEOUT_S,
                           .max_output = CARREL_FS_MAX_OUTPUT_BYTES};
    g_auto(CarrelExecResult) result = {0};
    g_autoptr(JsonNode) reply = NULL;
    const char *word = fs_verbs[call->verb].word;
    gsize len = 0;
    const char *data;

    if (!carrel_hypervisor_agent_exec(mgr->hv, domain, &run, &result, error))
        return NULL;
    if (result.exit_code == 127) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "this guest has no carrel-guest for file operations");
        return NULL;
    }
    data = g_bytes_get_data(result.stdout_bytes, &len);
    if (result.truncated) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "carrel-guest fs %s printed more than %d bytes", word,
                    CARREL_FS_MAX_OUTPUT_BYTES);
        return NULL;
    }
    reply = len ? carrel_conf_parse_json(data, len, NULL) : NULL;
    if (!reply || !JSON_NODE_HOLDS_OBJECT(reply)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_HYPERVISOR,
                    "carrel-guest fs %s gave no JSON object (exit %d%s)", word, result.exit_code,
                    result.timed_out ? ", timed out" : "");
        return NULL;
    }
    if (result.exit_code != 0) {
        g_autofree char *what = g_strconcat("fs ", word, NULL);

        carrel_manager_guest_error(reply, what, error);
        return NULL;
    }
    return fs_result(call, reply, error);
}

static JsonNode *
fs_act(CarrelManager *mgr, const char *id_or_name, const FsCall *call, const CarrelPrincipal *actor,
       GError **error)
{
    g_autoptr(CarrelSession) session = NULL;
    g_autofree char *domain = NULL;
    g_autoptr(JsonNode) params = NULL;
    g_autoptr(JsonNode) result = NULL;
    g_autoptr(GError) local = NULL;
    gint64 started = g_get_monotonic_time();
    gboolean ok;

    if (!carrel_fs_check_path(call->path, error) ||
        (call->verb == FS_MOVE && !carrel_fs_check_path(call->to, error)))
        return NULL;
    if (call->verb >= FS_REMOVE && g_str_equal(call->path, "/")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "the guest's root folder cannot be removed or moved");
        return NULL;
    }
    if (!(session = carrel_manager_running_session(mgr, id_or_name, "work on the files of", &domain,
                                                   error)))
        return NULL;
    result = fs_exec(mgr, domain, call, &local);
    params = fs_params(call);
    /* A listing may be large: the audit record keeps the request, not the entries. */
    ok = carrel_manager_record_outcome(mgr, session->id, actor, "file", fs_verbs[call->verb].action,
                                       params, call->verb == FS_LIST ? params : result, &local,
                                       started, NULL, result != NULL);
    if (!ok) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "session '%s': ", session->id);
        return NULL;
    }
    return g_steal_pointer(&result);
}

static JsonNode *
fs_door(CarrelManager *mgr, const CarrelPrincipal *who, const char *id_or_name, const FsCall *call,
        GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, fs_verbs[call->verb].op, id_or_name, fs_params(call),
                           error))
        return NULL;
    return carrel_door_finish(&door, fs_act(mgr, door.session_id, call, who, &local), &local,
                              error);
}

JsonNode *
carrel_manager_session_fs_list(CarrelManager *mgr, const CarrelPrincipal *who,
                               const char *id_or_name, const char *path, GError **error)
{
    FsCall call = {.verb = FS_LIST, .path = path};

    return fs_door(mgr, who, id_or_name, &call, error);
}

JsonNode *
carrel_manager_session_fs_stat(CarrelManager *mgr, const CarrelPrincipal *who,
                               const char *id_or_name, const char *path, GError **error)
{
    FsCall call = {.verb = FS_STAT, .path = path};

    return fs_door(mgr, who, id_or_name, &call, error);
}

JsonNode *
carrel_manager_session_fs_mkdir(CarrelManager *mgr, const CarrelPrincipal *who,
                                const char *id_or_name, const char *path, gboolean parents,
                                GError **error)
{
    FsCall call = {.verb = FS_MKDIR, .path = path, .flag = parents};

    return fs_door(mgr, who, id_or_name, &call, error);
}

JsonNode *
carrel_manager_session_fs_remove(CarrelManager *mgr, const CarrelPrincipal *who,
                                 const char *id_or_name, const char *path, gboolean recursive,
                                 GError **error)
{
    FsCall call = {.verb = FS_REMOVE, .path = path, .flag = recursive};

    return fs_door(mgr, who, id_or_name, &call, error);
}

JsonNode *
carrel_manager_session_fs_move(CarrelManager *mgr, const CarrelPrincipal *who,
                               const char *id_or_name, const char *from, const char *to,
                               GError **error)
{
    FsCall call = {.verb = FS_MOVE, .path = from, .to = to};

    return fs_door(mgr, who, id_or_name, &call, error);
}
