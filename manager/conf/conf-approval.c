#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

CarrelApproval *
carrel_approval_new(void)
{
    return g_new0(CarrelApproval, 1);
}

void
carrel_approval_free(CarrelApproval *a)
{
    if (!a)
        return;
    g_free(a->id);
    g_free(a->session_id);
    g_free(a->action);
    g_clear_pointer(&a->detail, json_node_unref);
    g_free(a->requested_by);
    g_free(a->state);
    g_free(a->decided_by);
    g_free(a->reason);
    g_free(a);
}

JsonNode *
carrel_approval_to_json(const CarrelApproval *a)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    carrel_conf_add_optional_string(b, "id", a->id);
    carrel_conf_add_optional_string(b, "session_id", a->session_id);
    carrel_conf_add_optional_string(b, "action", a->action);
    json_builder_set_member_name(b, "detail");
    if (a->detail)
        json_builder_add_value(b, json_node_copy(a->detail));
    else
        json_builder_add_null_value(b);
    carrel_conf_add_optional_string(b, "state", a->state);
    carrel_conf_add_optional_string(b, "requested_by", a->requested_by);
    carrel_conf_add_optional_time(b, "requested_at", a->requested_at);
    carrel_conf_add_optional_string(b, "decided_by", a->decided_by);
    carrel_conf_add_optional_time(b, "decided_at", a->decided_at);
    carrel_conf_add_optional_string(b, "reason", a->reason);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

gboolean
carrel_approval_check_action(const char *action, GError **error)
{
    gsize len = action ? strlen(action) : 0;

    if (len == 0 || len > 64) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "an approval's action must be 1-64 characters");
        return FALSE;
    }
    for (gsize i = 0; i < len; i++) {
        if (!g_ascii_isalnum(action[i]) && !strchr("._-:", action[i])) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "an approval's action may hold only letters, digits and . _ - :");
            return FALSE;
        }
    }
    return TRUE;
}

gboolean
carrel_approval_check_reason(const char *reason, GError **error)
{
    if (reason &&
        (strlen(reason) > CARREL_APPROVAL_REASON_MAX || !carrel_util_is_clean_text(reason))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a reason must be text of at most %d bytes without control characters",
                    CARREL_APPROVAL_REASON_MAX);
        return FALSE;
    }
    return TRUE;
}
