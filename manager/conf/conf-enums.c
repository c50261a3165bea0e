#include "conf/conf.h"

static const char *const boot_names[CARREL_BOOT_LAST] = {
    [CARREL_BOOT_DIRECT] = "direct",
    [CARREL_BOOT_BIOS] = "bios",
    [CARREL_BOOT_UEFI] = "uefi",
};

static const char *const state_names[CARREL_SESSION_LAST] = {
    [CARREL_SESSION_CREATING] = "creating",   [CARREL_SESSION_RUNNING] = "running",
    [CARREL_SESSION_PAUSED] = "paused",       [CARREL_SESSION_HIBERNATED] = "hibernated",
    [CARREL_SESSION_STOPPED] = "stopped",     [CARREL_SESSION_CRASHED] = "crashed",
    [CARREL_SESSION_DESTROYED] = "destroyed",
};

static const char *const op_names[CARREL_SESSION_OP_LAST] = {
    [CARREL_SESSION_OP_START] = "start",         [CARREL_SESSION_OP_STOP] = "stop",
    [CARREL_SESSION_OP_PAUSE] = "pause",         [CARREL_SESSION_OP_RESUME] = "resume",
    [CARREL_SESSION_OP_HIBERNATE] = "hibernate", [CARREL_SESSION_OP_DESTROY] = "destroy",
};

const char *
carrel_boot_to_string(CarrelBoot boot)
{
    return carrel_util_enum_to_string(boot_names, CARREL_BOOT_LAST, (int)boot);
}

CarrelBoot
carrel_boot_from_string(const char *name)
{
    return (CarrelBoot)carrel_util_enum_from_string(boot_names, CARREL_BOOT_LAST, name);
}

const char *
carrel_session_state_to_string(CarrelSessionState state)
{
    return carrel_util_enum_to_string(state_names, CARREL_SESSION_LAST, (int)state);
}

CarrelSessionState
carrel_session_state_from_string(const char *name)
{
    return (CarrelSessionState)carrel_util_enum_from_string(state_names, CARREL_SESSION_LAST, name);
}

const char *
carrel_session_op_to_string(CarrelSessionOp op)
{
    return carrel_util_enum_to_string(op_names, CARREL_SESSION_OP_LAST, (int)op);
}

/*
 * The one table of legal moves (DESIGN.md "Session life"); -1 = refused.
 * Rows: current state. Columns: start, stop, pause, resume, hibernate, destroy.
 */
static const int transitions[CARREL_SESSION_LAST][CARREL_SESSION_OP_LAST] = {
    [CARREL_SESSION_CREATING] = {-1, -1, -1, -1, -1, CARREL_SESSION_DESTROYED},
    [CARREL_SESSION_RUNNING] = {-1, CARREL_SESSION_STOPPED, CARREL_SESSION_PAUSED, -1,
                                CARREL_SESSION_HIBERNATED, CARREL_SESSION_DESTROYED},
    [CARREL_SESSION_PAUSED] = {-1, CARREL_SESSION_STOPPED, -1, CARREL_SESSION_RUNNING, -1,
                               CARREL_SESSION_DESTROYED},
    [CARREL_SESSION_HIBERNATED] = {-1, -1, -1, CARREL_SESSION_RUNNING, -1,
                                   CARREL_SESSION_DESTROYED},
    [CARREL_SESSION_STOPPED] = {CARREL_SESSION_RUNNING, -1, -1, -1, -1, CARREL_SESSION_DESTROYED},
    [CARREL_SESSION_CRASHED] = {CARREL_SESSION_RUNNING, -1, -1, -1, -1, CARREL_SESSION_DESTROYED},
    [CARREL_SESSION_DESTROYED] = {-1, -1, -1, -1, -1, -1},
};

gboolean
carrel_session_transition(CarrelSessionState state, CarrelSessionOp op,
                          CarrelSessionState *ret_next, GError **error)
{
    int next;

    g_return_val_if_fail((int)state >= 0 && state < CARREL_SESSION_LAST, FALSE);
    g_return_val_if_fail((int)op >= 0 && op < CARREL_SESSION_OP_LAST, FALSE);
    next = transitions[state][op];
    if (next < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_WRONG_STATE, "cannot %s a session that is %s",
                    op_names[op], state_names[state]);
        return FALSE;
    }
    if (ret_next)
        *ret_next = (CarrelSessionState)next;
    return TRUE;
}
