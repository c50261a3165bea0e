/*
 * api: bounded worker pools, one per request class. Handlers block (a boot takes seconds, an
 * exec up to an hour), so each class has its own threads and its own bounded queue: execs and
 * long VM operations never take the threads of quick reads, and health needs none at all (it
 * is answered on the main loop). A class whose queue is full answers 503 with Retry-After.
 */
#include "api/api-priv.h"

/* What a client is told to wait before retrying a request refused for a full queue. */
#define POOL_RETRY_AFTER_S 2
/* MCP bodies larger than this are not read on the main loop to find their class. */
#define MCP_CLASS_PEEK_BYTES (64 * 1024)

static const char *const class_names[CARREL_API_CLASS_LAST] = {
    [CARREL_API_CLASS_BY_OP] = "by-operation", [CARREL_API_CLASS_INLINE] = "inline",
    [CARREL_API_CLASS_QUICK] = "quick",        [CARREL_API_CLASS_LONG] = "long",
    [CARREL_API_CLASS_EXEC] = "exec",
};

const char *
carrel_api_class_to_string(CarrelApiClass klass)
{
    return (int)klass >= 0 && klass < CARREL_API_CLASS_LAST ? class_names[klass] : "unknown";
}

CarrelApiClass
carrel_api_class_of_op(CarrelOp op)
{
    switch (op) {
    /* Boots, saves, copies and restores: seconds to minutes. */
    case CARREL_OP_SESSION_CREATE:
    case CARREL_OP_SESSION_START:
    case CARREL_OP_SESSION_STOP:
    case CARREL_OP_SESSION_PAUSE:
    case CARREL_OP_SESSION_RESUME:
    case CARREL_OP_SESSION_HIBERNATE:
    case CARREL_OP_SESSION_DESTROY:
    case CARREL_OP_SESSION_EXTRACT:
    case CARREL_OP_SESSION_DIFF:
    case CARREL_OP_SESSION_EXPORT:
    case CARREL_OP_SESSION_FORK:
    case CARREL_OP_SNAPSHOT_CREATE:
    case CARREL_OP_SNAPSHOT_DELETE:
    case CARREL_OP_SNAPSHOT_REVERT:
    case CARREL_OP_TEMPLATE_IMPORT:
    case CARREL_OP_TEMPLATE_BUILD:
    case CARREL_OP_TEMPLATE_WARM:
    case CARREL_OP_TEMPLATE_REMOVE:
    case CARREL_OP_POOL_SET:
    case CARREL_OP_UPLOAD_CREATE:
    case CARREL_OP_INPUT_HOST_PATH:
        return CARREL_API_CLASS_LONG;
    /* What waits on the guest: commands (up to an hour), files, the desktop. */
    case CARREL_OP_SESSION_EXEC:
    case CARREL_OP_SESSION_FILE_READ:
    case CARREL_OP_SESSION_FILE_WRITE:
    case CARREL_OP_SESSION_SCREENSHOT:
    case CARREL_OP_SESSION_INPUT:
    case CARREL_OP_SESSION_SHELL:
        return CARREL_API_CLASS_EXEC;
    case CARREL_OP_SERVER_READ:
    case CARREL_OP_SESSION_LIST:
    case CARREL_OP_SESSION_READ:
    case CARREL_OP_ARTIFACT_READ:
    case CARREL_OP_CONSOLE_VIEW:
    case CARREL_OP_CONTROL_TAKE:
    case CARREL_OP_CONTROL_RELEASE:
    case CARREL_OP_APPROVAL_LIST:
    case CARREL_OP_APPROVAL_DECIDE:
    case CARREL_OP_APPROVAL_REQUEST:
    case CARREL_OP_TEMPLATE_READ:
    case CARREL_OP_POOL_READ:
    case CARREL_OP_POLICY_READ:
    case CARREL_OP_JOB_READ:
    case CARREL_OP_TOKEN_LIST:
    case CARREL_OP_TOKEN_CREATE:
    case CARREL_OP_TOKEN_REVOKE:
    case CARREL_OP_TOKEN_ROTATE:
    case CARREL_OP_AUDIT_READ:
    case CARREL_OP_METRICS_READ:
    case CARREL_OP_SESSION_OBSERVE:
    case CARREL_OP_AUTH_LOGIN:
    case CARREL_OP_LAST:
        return CARREL_API_CLASS_QUICK;
    }
    return CARREL_API_CLASS_QUICK;
}

/* An MCP message's class: its tool's, found without reading big bodies on the main loop. */
static CarrelApiClass
mcp_class(GBytes *body)
{
    g_autoptr(JsonNode) root = NULL;
    g_autoptr(CarrelMcpMessage) msg = NULL;
    CarrelMcpTool tool;
    gsize len = 0;
    const char *data = body ? g_bytes_get_data(body, &len) : NULL;

    if (len > MCP_CLASS_PEEK_BYTES)
        return CARREL_API_CLASS_EXEC;
    /* Whatever cannot be read is answered at once: a quick request. */
    if (!data || !(root = carrel_conf_parse_json(data, len, NULL)) ||
        !(msg = carrel_mcp_message_from_json(root, NULL)) ||
        msg->kind != CARREL_MCP_MESSAGE_REQUEST || !g_str_equal(msg->method, "tools/call") ||
        !carrel_mcp_call_tool(msg->params, &tool, NULL))
        return CARREL_API_CLASS_QUICK;
    return carrel_api_class_of_op(carrel_api_mcp_tool_op(tool));
}

CarrelApiClass
carrel_api_request_class(const CarrelApiRoute *route, const CarrelApiRequest *req)
{
    if (route->klass != CARREL_API_CLASS_BY_OP)
        return route->klass;
    if (route->handler == carrel_api_mcp_post)
        return mcp_class(req->raw_body);
    return carrel_api_class_of_op(route->op);
}

struct _CarrelApiPools {
    GThreadPool *pools[CARREL_API_CLASS_LAST];
    guint threads[CARREL_API_CLASS_LAST];
    guint queue_max;
};

CarrelApiPools *
carrel_api_pools_new(GFunc run, gpointer data, GError **error)
{
    g_autoptr(CarrelApiPools) pools = g_new0(CarrelApiPools, 1);
    const CarrelApiPoolSizes defaults = CARREL_API_POOL_SIZES_DEFAULT;

    for (guint c = CARREL_API_CLASS_QUICK; c < CARREL_API_CLASS_LAST; c++) {
        /* Shared threads: idle ones serve any class, and max_threads bounds each class. */
        pools->pools[c] = g_thread_pool_new(run, data, 1, FALSE, error);
        if (!pools->pools[c]) {
            g_prefix_error(error, "starting the %s request pool: ", class_names[c]);
            return NULL;
        }
    }
    if (!carrel_api_pools_set_sizes(pools, &defaults, error))
        return NULL;
    return g_steal_pointer(&pools);
}

gboolean
carrel_api_pools_set_sizes(CarrelApiPools *pools, const CarrelApiPoolSizes *sizes, GError **error)
{
    const guint threads[CARREL_API_CLASS_LAST] = {
        [CARREL_API_CLASS_QUICK] = sizes->quick,
        [CARREL_API_CLASS_LONG] = sizes->long_ops,
        [CARREL_API_CLASS_EXEC] = sizes->exec,
    };

    for (guint c = CARREL_API_CLASS_QUICK; c < CARREL_API_CLASS_LAST; c++) {
        if (threads[c] < 1 || threads[c] > CARREL_API_POOL_THREADS_MAX) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "the %s request pool needs 1 to %u threads", class_names[c],
                        CARREL_API_POOL_THREADS_MAX);
            return FALSE;
        }
    }
    if (sizes->queue < 1 || sizes->queue > CARREL_API_POOL_QUEUE_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "the request queue bound must be between 1 and %u", CARREL_API_POOL_QUEUE_MAX);
        return FALSE;
    }
    for (guint c = CARREL_API_CLASS_QUICK; c < CARREL_API_CLASS_LAST; c++) {
        if (!g_thread_pool_set_max_threads(pools->pools[c], (gint)threads[c], error))
            return FALSE;
        pools->threads[c] = threads[c];
    }
    pools->queue_max = sizes->queue;
    return TRUE;
}

void
carrel_api_pools_free(CarrelApiPools *pools)
{
    if (!pools)
        return;
    /* Queued requests are dropped; running ones finish on their own (carreld is exiting). */
    for (guint c = 0; c < CARREL_API_CLASS_LAST; c++)
        if (pools->pools[c])
            g_thread_pool_free(pools->pools[c], TRUE, FALSE);
    g_free(pools);
}

gboolean
carrel_api_pools_push(CarrelApiPools *pools, CarrelApiClass klass, gpointer item,
                      guint *ret_retry_s, GError **error)
{
    GThreadPool *pool = pools->pools[klass];

    /* Only the main loop pushes, and workers only take: the count cannot grow under us. */
    if (g_thread_pool_unprocessed(pool) >= pools->queue_max) {
        *ret_retry_s = POOL_RETRY_AFTER_S;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_OVERLOADED,
                    "too many %s requests waiting (%u running, %u queued): retry in %u s",
                    class_names[klass], pools->threads[klass], pools->queue_max,
                    POOL_RETRY_AFTER_S);
        return FALSE;
    }
    return g_thread_pool_push(pool, item, error);
}

guint
carrel_api_pools_queued(CarrelApiPools *pools, CarrelApiClass klass)
{
    return g_thread_pool_unprocessed(pools->pools[klass]);
}
