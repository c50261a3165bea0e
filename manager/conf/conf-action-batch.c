/*
 * The body of a computer request: one action or a batch, and the mapping of its positions from
 * the model's screen space to the real screen's, with the bounds check.
 */
#include <math.h>
#include <string.h>

#include "conf/conf.h"
#include "conf/conf-priv.h"

/* Largest side of the screen a model may say it sees, and the bounds of a plain factor. */
#define MODEL_MAX_SIDE 16384
#define SCALE_MIN 0.01
#define SCALE_MAX 100.0

void
carrel_action_batch_free(CarrelActionBatch *batch)
{
    if (!batch)
        return;
    g_clear_pointer(&batch->actions, g_ptr_array_unref);
    g_free(batch);
}

static CarrelActionBatch *
batch_new(void)
{
    CarrelActionBatch *batch = g_new0(CarrelActionBatch, 1);

    batch->actions = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_action_free);
    batch->observe = CARREL_OBSERVE_FINAL;
    batch->settle = (CarrelSettle){.window_ms = CARREL_SETTLE_WINDOW_MS,
                                   .keys_window_ms = CARREL_SETTLE_KEYS_WINDOW_MS,
                                   .quiet_ms = CARREL_SETTLE_QUIET_MS,
                                   .max_ms = CARREL_SETTLE_MAX_MS};
    return batch;
}

static gboolean
parse_actions(JsonObject *obj, CarrelActionBatch *batch, GError **error)
{
    JsonNode *node = carrel_conf_get_node(obj, "actions");
    JsonArray *arr = node && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;

    if (!arr || json_array_get_length(arr) < 1 ||
        json_array_get_length(arr) > CARREL_ACTION_MAX_BATCH) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'actions' must be an array of 1 to %d actions", CARREL_ACTION_MAX_BATCH);
        return FALSE;
    }
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        CarrelAction *action = carrel_action_from_json(json_array_get_element(arr, i), error);
        if (!action) {
            g_prefix_error(error, "actions[%u]: ", i);
            return FALSE;
        }
        g_ptr_array_add(batch->actions, action);
    }
    return TRUE;
}

static gboolean
parse_observe(JsonObject *obj, CarrelActionBatch *batch, GError **error)
{
    g_autofree char *name = NULL;

    if (!carrel_conf_get_string(obj, "observe", FALSE, &name, error))
        return FALSE;
    if (!name)
        return TRUE;
    batch->observe = carrel_observe_from_string(name);
    if (batch->observe == CARREL_OBSERVE_LAST) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'observe' must be final, each or none");
        return FALSE;
    }
    return TRUE;
}

/* "settle": {"window_ms", "quiet_ms", "max_ms", "fixed_ms"}, each optional. */
static gboolean
parse_settle(JsonObject *obj, CarrelActionBatch *batch, GError **error)
{
    static const char *const allowed[] = {"window_ms", "quiet_ms", "max_ms", "fixed_ms", NULL};
    JsonNode *node = carrel_conf_get_node(obj, "settle");
    JsonObject *settle = node && JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
    CarrelSettle *s = &batch->settle;

    if (!node)
        return TRUE;
    if (!settle) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "'settle' must be an object");
        return FALSE;
    }
    if (!carrel_conf_check_members(settle, allowed, error) ||
        !carrel_conf_get_uint(settle, "window_ms", 0, CARREL_SETTLE_LIMIT_MS, &s->window_ms,
                              error) ||
        !carrel_conf_get_uint(settle, "quiet_ms", 0, CARREL_SETTLE_LIMIT_MS, &s->quiet_ms, error) ||
        !carrel_conf_get_uint(settle, "max_ms", 0, CARREL_SETTLE_LIMIT_MS, &s->max_ms, error) ||
        !carrel_conf_get_uint(settle, "fixed_ms", 0, CARREL_SETTLE_LIMIT_MS, &s->fixed_ms, error)) {
        g_prefix_error(error, "settle: ");
        return FALSE;
    }
    if (s->window_ms > s->max_ms) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "settle: 'window_ms' (%u) must not exceed 'max_ms' (%u)", s->window_ms,
                    s->max_ms);
        return FALSE;
    }
    s->keys_window_ms = carrel_conf_get_node(settle, "window_ms")
                            ? s->window_ms
                            : MIN(CARREL_SETTLE_KEYS_WINDOW_MS, s->max_ms);
    return TRUE;
}

static gboolean
get_side(JsonObject *obj, const char *name, guint *ret_side)
{
    JsonNode *node = carrel_conf_get_node(obj, name);

    if (!carrel_conf_node_holds(node, G_TYPE_INT64) || json_node_get_int(node) < 1 ||
        json_node_get_int(node) > MODEL_MAX_SIDE)
        return FALSE;
    *ret_side = (guint)json_node_get_int(node);
    return TRUE;
}

/* "scale": a factor, or "model_screen": {"width", "height"} the model sees. */
static gboolean
parse_scale(JsonObject *obj, CarrelActionBatch *batch, GError **error)
{
    JsonNode *scale = carrel_conf_get_node(obj, "scale");
    JsonNode *model = carrel_conf_get_node(obj, "model_screen");
    JsonObject *model_obj =
        model && JSON_NODE_HOLDS_OBJECT(model) ? json_node_get_object(model) : NULL;

    if (scale && model) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "give either 'scale' or 'model_screen', not both");
        return FALSE;
    }
    if (scale) {
        double value = (carrel_conf_node_holds(scale, G_TYPE_INT64) ||
                        carrel_conf_node_holds(scale, G_TYPE_DOUBLE))
                           ? json_node_get_double(scale)
                           : -1;
        if (!(value >= SCALE_MIN && value <= SCALE_MAX)) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "'scale' must be a number between %g and %g", SCALE_MIN, SCALE_MAX);
            return FALSE;
        }
        batch->scale = value;
    }
    if (model && (!model_obj || json_object_get_size(model_obj) != 2 ||
                  !get_side(model_obj, "width", &batch->model_width) ||
                  !get_side(model_obj, "height", &batch->model_height))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'model_screen' must be {\"width\": W, \"height\": H} with integers between 1 "
                    "and %d",
                    MODEL_MAX_SIDE);
        return FALSE;
    }
    return TRUE;
}

static CarrelActionBatch *
parse_batch(JsonObject *obj, GError **error)
{
    static const char *const allowed[] = {"action",       "actions", "observe", "scale",
                                          "model_screen", "settle",  NULL};
    g_autoptr(CarrelActionBatch) batch = batch_new();

    if (!carrel_conf_check_members(obj, allowed, error) || !parse_observe(obj, batch, error) ||
        !parse_settle(obj, batch, error) || !parse_scale(obj, batch, error) ||
        !parse_actions(obj, batch, error))
        return NULL;
    return g_steal_pointer(&batch);
}

CarrelActionBatch *
carrel_action_batch_from_json(JsonNode *node, GError **error)
{
    g_autoptr(CarrelActionBatch) batch = NULL;
    CarrelAction *action;

    if (node && JSON_NODE_HOLDS_OBJECT(node)) {
        JsonObject *obj = json_node_get_object(node);
        const char *name = carrel_conf_peek_string(obj, "action");
        gboolean named_batch = name && g_str_equal(name, "batch");

        /* {"action": null, "actions": [...]} is an action, refused for its null name. */
        if (named_batch ||
            (!json_object_has_member(obj, "action") && json_object_has_member(obj, "actions")))
            return parse_batch(obj, error);
    }
    if (!(action = carrel_action_from_json(node, error)))
        return NULL;
    batch = batch_new();
    g_ptr_array_add(batch->actions, action);
    return g_steal_pointer(&batch);
}

/* From model space to screen space, per axis; factor 1 and no rounding when not scaled. */
typedef struct {
    gboolean scaled;
    double fx, fy;
    guint width, height;
    guint index; /* of the action, for messages */
    gboolean several;
} Mapping;

static char *
message_prefix(const Mapping *m)
{
    return m->several ? g_strdup_printf("actions[%u]: ", m->index) : g_strdup("");
}

static gboolean
off_screen(const Mapping *m, CarrelPoint in, CarrelPoint out, const char *what, GError **error)
{
    g_autofree char *prefix = message_prefix(m);

    if (m->scaled)
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "%s%s (%u, %u) maps to (%u, %u), off the screen (%ux%u)", prefix, what, in.x,
                    in.y, out.x, out.y, m->width, m->height);
    else
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "%s%s (%u, %u) is off the screen (%ux%u)", prefix, what, in.x, in.y, m->width,
                    m->height);
    return FALSE;
}

/* A pixel: the screen pixel under the centre of the model's pixel. */
static gboolean
map_point(const Mapping *m, CarrelPoint *point, gboolean apply, GError **error)
{
    CarrelPoint out = *point;

    if (m->scaled) {
        out.x = (guint)floor((point->x + 0.5) * m->fx);
        out.y = (guint)floor((point->y + 0.5) * m->fy);
    }
    if (out.x >= m->width || out.y >= m->height)
        return off_screen(m, *point, out, "point", error);
    if (apply)
        *point = out;
    return TRUE;
}

/* A zoom region: its edges scale; it must stay on the screen and keep a size. */
static gboolean
map_region(const Mapping *m, CarrelPoint region[2], gboolean apply, GError **error)
{
    CarrelPoint out[2] = {region[0], region[1]};

    for (guint i = 0; m->scaled && i < 2; i++) {
        out[i].x = (guint)lround(region[i].x * m->fx);
        out[i].y = (guint)lround(region[i].y * m->fy);
    }
    if (out[1].x > m->width || out[1].y > m->height)
        return off_screen(m, region[1], out[1], "region corner", error);
    if (out[0].x >= out[1].x || out[0].y >= out[1].y) {
        g_autofree char *prefix = message_prefix(m);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "%sregion (%u, %u)-(%u, %u) is empty on the screen", prefix, region[0].x,
                    region[0].y, region[1].x, region[1].y);
        return FALSE;
    }
    if (apply) {
        region[0] = out[0];
        region[1] = out[1];
    }
    return TRUE;
}

static gboolean
map_action(const Mapping *m, CarrelAction *action, gboolean apply, GError **error)
{
    if (action->has_point && !map_point(m, &action->point, apply, error))
        return FALSE;
    for (guint i = 0; action->path && i < action->path->len; i++) {
        if (!map_point(m, &g_array_index(action->path, CarrelPoint, i), apply, error))
            return FALSE;
    }
    if (action->kind == CARREL_ACTION_ZOOM && !map_region(m, action->region, apply, error))
        return FALSE;
    return TRUE;
}

gboolean
carrel_action_batch_check_bounds(CarrelActionBatch *batch, guint width, guint height,
                                 GError **error)
{
    Mapping m = {FALSE, 1.0, 1.0, width, height, 0, batch->actions->len > 1};

    if (width == 0 || height == 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "screen size %ux%u is not valid",
                    width, height);
        return FALSE;
    }
    if (batch->scale > 0) {
        m.scaled = TRUE;
        m.fx = m.fy = batch->scale;
    } else if (batch->model_width > 0 && batch->model_height > 0) {
        m.scaled = TRUE;
        m.fx = (double)width / batch->model_width;
        m.fy = (double)height / batch->model_height;
    }
    /* Check everything first: a refused batch must be left as it was. */
    for (m.index = 0; m.index < batch->actions->len; m.index++) {
        if (!map_action(&m, g_ptr_array_index(batch->actions, m.index), FALSE, error))
            return FALSE;
    }
    for (m.index = 0; m.index < batch->actions->len; m.index++)
        map_action(&m, g_ptr_array_index(batch->actions, m.index), TRUE, NULL);
    batch->scale = 0;
    batch->model_width = batch->model_height = 0;
    return TRUE;
}
