/*
 * Computer use: a batch of actions in any supported format, sent as HID events through the
 * hypervisor, with screenshots as observations and every action on the session's timeline. Only
 * the desktop helpers and text the US keymap cannot type go through carrel-guest in the guest.
 */

#include "core/core-priv.h"
#include "image/image.h"

typedef struct {
    CarrelManager *mgr;
    CarrelSession *session;
    char *domain;
    const CarrelPrincipal *actor;
    guint width, height;    /* the screen */
    guint model_w, model_h; /* what the model sees (the screen when not scaled) */
    gboolean hid_sent;      /* since the last observation */
    gboolean keys_sent;     /* ...and among them typed text or a key press */
    gint64 hid_at;          /* when the last HID event was sent (monotonic µs) */
    guint64 ref_hash;       /* the newest frame from before the HID events since (0: none) */
    const CarrelSettle *settle;
    GPtrArray *secrets; /* per action: the secret a type_secret typed, or NULL */
    const char *typed;  /* the last secret typed in this batch: screenshots after it are
                           marked, the screen may show it */
} Run;

static void run_clear(Run *run);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Run, run_clear)

static void
run_clear(Run *run)
{
    g_clear_pointer(&run->session, carrel_session_free);
    g_clear_pointer(&run->domain, g_free);
}

/* HID events (or a helper acting for them) reached the guest: the next look waits for them,
 * longer for an effect to begin after keys (see CarrelSettle). */
static void
mark_hid(Run *run, const CarrelAction *action)
{
    run->hid_sent = TRUE;
    run->keys_sent =
        run->keys_sent || action->kind == CARREL_ACTION_TYPE || action->kind == CARREL_ACTION_KEY;
    run->hid_at = g_get_monotonic_time();
}

/* A frame from before the next HID events: what settling compares with. */
static gboolean
take_reference(Run *run, GError **error)
{
    g_autoptr(GBytes) ppm = NULL;

    if (!carrel_hypervisor_screenshot(run->mgr->hv, run->domain, &ppm, &run->width, &run->height,
                                      error))
        return FALSE;
    /* hid_sent stays: the events before still make the next look wait, even when what follows
     * sends none of its own (a launch). */
    run->ref_hash = carrel_image_ppm_hash(ppm);
    return TRUE;
}

/* The screen now, or once it has settled after HID events (then *ret_settle says how). */
static GBytes *
look(Run *run, gboolean *ret_waited, CarrelSettleResult *ret_settle, GError **error)
{
    g_autoptr(GBytes) ppm = NULL;
    CarrelSettle settle = *run->settle;

    if (run->keys_sent)
        settle.window_ms = settle.keys_window_ms;
    *ret_waited = run->hid_sent;
    if (run->hid_sent)
        ppm = carrel_manager_settle_screen(run->mgr, run->domain, &settle, run->ref_hash,
                                           run->hid_at, ret_settle, error);
    else if (!carrel_hypervisor_screenshot(run->mgr->hv, run->domain, &ppm, NULL, NULL, error))
        return NULL;
    if (!ppm)
        return NULL;
    run->hid_sent = FALSE;
    run->keys_sent = FALSE;
    run->ref_hash = carrel_image_ppm_hash(ppm);
    return g_steal_pointer(&ppm);
}

static void
add_settle_members(JsonBuilder *b, const CarrelSettleResult *settle)
{
    json_builder_set_member_name(b, "settled");
    json_builder_add_boolean_value(b, settle->settled);
    json_builder_set_member_name(b, "settled_ms");
    json_builder_add_int_value(b, settle->settled_ms);
    json_builder_set_member_name(b, "changed");
    json_builder_add_boolean_value(b, settle->changed);
    json_builder_set_member_name(b, "samples");
    json_builder_add_int_value(b, settle->samples);
}

/* The screen scaled to what the model sees, as PNG, kept for the timeline; after HID events,
 * once settled (settled, settled_ms, changed, samples), with the time of each phase. */
static JsonNode *
observe(Run *run, char **ret_ref, GError **error)
{
    g_autoptr(GBytes) ppm = NULL;
    g_autoptr(GBytes) scaled = NULL;
    g_autoptr(GBytes) png = NULL;
    g_autoptr(JsonNode) timings = NULL;
    g_autofree char *b64 = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    CarrelSettleResult settle = {0};
    gboolean waited = FALSE;
    guint w = 0, h = 0;

    carrel_timings_begin();
    ppm = look(run, &waited, &settle, error);
    carrel_timings_mark(waited ? "settle" : "screenshot");
    if (ppm && carrel_image_ppm_parse(ppm, &w, &h, NULL, error))
        scaled = (w == run->model_w && h == run->model_h)
                     ? g_bytes_ref(ppm)
                     : carrel_image_scale(ppm, run->model_w, run->model_h, error);
    if (scaled)
        png = carrel_image_encode_png(scaled, error);
    carrel_timings_mark("encode");
    if (png)
        *ret_ref = carrel_manager_keep_screenshot(run->mgr, run->session, png, FALSE);
    carrel_timings_mark("keep");
    timings = carrel_timings_end();
    if (!png)
        return NULL;
    b64 = g_base64_encode(g_bytes_get_data(png, NULL), g_bytes_get_size(png));
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "media_type");
    json_builder_add_string_value(b, "image/png");
    json_builder_set_member_name(b, "width");
    json_builder_add_int_value(b, run->model_w);
    json_builder_set_member_name(b, "height");
    json_builder_add_int_value(b, run->model_h);
    json_builder_set_member_name(b, "ref");
    json_builder_add_string_value(b, *ret_ref ? *ret_ref : "");
    if (waited)
        add_settle_members(b, &settle);
    if (timings) {
        json_builder_set_member_name(b, "timings");
        json_builder_add_value(b, g_steal_pointer(&timings));
    }
    json_builder_set_member_name(b, "data");
    json_builder_add_string_value(b, b64);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static JsonNode *
xy_node(const char *a, guint x, const char *b_name, guint y)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, a);
    json_builder_add_int_value(b, x);
    json_builder_set_member_name(b, b_name);
    json_builder_add_int_value(b, y);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* A region of the screen at its own resolution (zoom), as an observation. */
static JsonNode *
zoom(Run *run, const CarrelAction *action, char **ret_ref, GError **error)
{
    g_autoptr(GBytes) ppm = NULL;
    g_autoptr(GBytes) png = NULL;
    CarrelScreenshotRequest req = {.quality = 80, .scale = 1.0, .has_region = TRUE};
    g_autofree char *b64 = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();

    req.region[0] = action->region[0].x;
    req.region[1] = action->region[0].y;
    req.region[2] = action->region[1].x - action->region[0].x;
    req.region[3] = action->region[1].y - action->region[0].y;
    if (!carrel_hypervisor_screenshot(run->mgr->hv, run->domain, &ppm, NULL, NULL, error) ||
        !(png = carrel_manager_screen_encode(ppm, &req, error)))
        return NULL;
    *ret_ref = carrel_manager_keep_screenshot(run->mgr, run->session, png, FALSE);
    b64 = g_base64_encode(g_bytes_get_data(png, NULL), g_bytes_get_size(png));
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "media_type");
    json_builder_add_string_value(b, "image/png");
    json_builder_set_member_name(b, "width");
    json_builder_add_int_value(b, req.region[2]);
    json_builder_set_member_name(b, "height");
    json_builder_add_int_value(b, req.region[3]);
    json_builder_set_member_name(b, "data");
    json_builder_add_string_value(b, b64);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static gboolean
send_hid(Run *run, CarrelHidState *state, const CarrelAction *action, GError **error)
{
    g_autoptr(GPtrArray) plan = NULL;
    CarrelPoint after = state->pointer;

    plan =
        carrel_hypervisor_hid_plan(action, run->width, run->height, state->pointer, &after, error);
    if (!plan || !carrel_hypervisor_hid_run(run->mgr->hv, run->domain, plan, error))
        return FALSE;
    state->pointer = after;
    if (action->kind != CARREL_ACTION_WAIT)
        mark_hid(run, action);
    return TRUE;
}

static JsonNode *
method_node(CarrelTypeMethod method)
{
    JsonNode *node = carrel_conf_new_object_node();

    json_object_set_string_member(json_node_get_object(node), "method",
                                  carrel_type_method_to_string(method));
    return node;
}

/*
 * A type action by its method: keys through the hypervisor like any key press; guest_keysyms
 * by carrel-guest's XTest typing; clipboard by carrel-guest owning the selections, then the
 * paste keys through the hypervisor. The output says which, so a caller can tell what happened.
 */
static gboolean
type_text(Run *run, CarrelHidState *state, const CarrelAction *action, JsonNode **ret_output,
          GError **error)
{
    g_autoptr(JsonNode) helper = NULL;
    CarrelAction paste = {.kind = CARREL_ACTION_KEY, .combos = action->combos};

    if (action->method == CARREL_TYPE_METHOD_KEYS) {
        if (!send_hid(run, state, action, error))
            return FALSE;
    } else {
        g_autoptr(GError) local = NULL;

        helper = carrel_manager_run_helper(run->mgr, run->domain, action, &local);
        /* A guest without carrel-guest still gets text the keys can type, as key presses. */
        if (!helper && action->keys_fallback &&
            g_error_matches(local, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED)) {
            if (!send_hid(run, state, action, error))
                return FALSE;
            *ret_output = method_node(CARREL_TYPE_METHOD_KEYS);
            return TRUE;
        }
        if (!helper) {
            g_propagate_error(error, g_steal_pointer(&local));
            return FALSE;
        }
        mark_hid(run, action);
        if (action->method == CARREL_TYPE_METHOD_CLIPBOARD && !send_hid(run, state, &paste, error))
            return FALSE;
    }
    *ret_output = method_node(action->method);
    return TRUE;
}

/*
 * click_element: the element as the accessibility tree has it now (its id looked up again, so a
 * window that moved is clicked where it is), clicked at its centre through the HID path like any
 * click; or, with mode "action", its default AT-SPI action run by carrel-guest (no pointer
 * moves: for elements off the screen or under another window).
 */
static gboolean
click_element(Run *run, CarrelHidState *state, const CarrelAction *action, JsonNode **ret_output,
              GError **error)
{
    g_autoptr(JsonNode) node = NULL;
    CarrelAction click = {.kind = CARREL_ACTION_CLICK, .has_point = TRUE, .count = 1};
    JsonObject *out;

    if (action->element_action) {
        if (!(*ret_output = carrel_manager_a11y_act(run->mgr, run->domain, action->element, error)))
            return FALSE;
        json_object_set_string_member(json_node_get_object(*ret_output), "mode", "action");
        mark_hid(run, action);
        return TRUE;
    }
    if (!(node = carrel_manager_a11y_element(run->mgr, run->domain, action->element, error)) ||
        !carrel_a11y_node_centre(node, run->width, run->height, &click.point.x, &click.point.y,
                                 error) ||
        !send_hid(run, state, &click, error))
        return FALSE;
    out = json_node_get_object(node);
    *ret_output = carrel_conf_new_object_node();
    json_object_set_string_member(json_node_get_object(*ret_output), "element", action->element);
    json_object_set_string_member(json_node_get_object(*ret_output), "mode", "click");
    json_object_set_string_member(json_node_get_object(*ret_output), "role",
                                  json_object_get_string_member(out, "role"));
    json_object_set_string_member(json_node_get_object(*ret_output), "name",
                                  json_object_get_string_member(out, "name"));
    json_object_set_member(json_node_get_object(*ret_output), "clicked",
                           xy_node("x", click.point.x * run->model_w / run->width, "y",
                                   click.point.y * run->model_h / run->height));
    return TRUE;
}

static gboolean
is_helper(CarrelActionKind kind)
{
    return kind == CARREL_ACTION_CLIPBOARD_GET || kind == CARREL_ACTION_CLIPBOARD_SET ||
           kind == CARREL_ACTION_WINDOWS || kind == CARREL_ACTION_LAUNCH ||
           kind == CARREL_ACTION_OPEN;
}

/* Performs one action; its output (or NULL when it has none) in *ret_output. */
static gboolean
perform(Run *run, CarrelHidState *state, const CarrelAction *action, JsonNode **ret_output,
        char **ret_ref, GError **error)
{
    CarrelActionKind kind = action->kind;

    *ret_output = NULL;
    if (kind == CARREL_ACTION_SCREENSHOT)
        return (*ret_output = observe(run, ret_ref, error)) != NULL;
    if (kind == CARREL_ACTION_ZOOM)
        return (*ret_output = zoom(run, action, ret_ref, error)) != NULL;
    if (kind == CARREL_ACTION_CURSOR_POSITION) {
        *ret_output = xy_node("x", state->pointer.x * run->model_w / run->width, "y",
                              state->pointer.y * run->model_h / run->height);
        return TRUE;
    }
    if (kind == CARREL_ACTION_SCREEN_SIZE) {
        *ret_output = xy_node("width", run->model_w, "height", run->model_h);
        return TRUE;
    }
    if (is_helper(kind))
        return (*ret_output = carrel_manager_run_helper(run->mgr, run->domain, action, error)) !=
               NULL;
    /* OSWorld's verdicts: nothing to do but record them. */
    if (kind == CARREL_ACTION_FAIL || kind == CARREL_ACTION_DONE)
        return TRUE;
    if (kind == CARREL_ACTION_TYPE)
        return type_text(run, state, action, ret_output, error);
    if (kind == CARREL_ACTION_CLICK_ELEMENT)
        return click_element(run, state, action, ret_output, error);
    return send_hid(run, state, action, error);
}

/* The model's screen: as given, or the screen scaled by 1 / scale, or the screen itself. */
static gboolean
model_size(Run *run, const CarrelActionBatch *batch, GError **error)
{
    run->model_w = run->width;
    run->model_h = run->height;
    if (batch->model_width) {
        run->model_w = batch->model_width;
        run->model_h = batch->model_height;
    } else if (batch->scale > 0 && batch->scale != 1.0) {
        return carrel_image_fit_factor(run->width, run->height, 1.0 / batch->scale, &run->model_w,
                                       &run->model_h, error);
    }
    return TRUE;
}

static JsonNode *
action_params(JsonNode *body, guint index, gboolean single)
{
    JsonArray *list;

    if (single || !JSON_NODE_HOLDS_OBJECT(body))
        return json_node_copy(body);
    list = json_object_get_array_member(json_node_get_object(body), "actions");
    return list && index < json_array_get_length(list)
               ? json_node_copy(json_array_get_element(list, index))
               : json_node_new(JSON_NODE_NULL);
}

/* The result entry of one action; the image data stays out of the timeline. */
static JsonNode *
result_entry(const CarrelAction *action, guint index, gint64 started, JsonNode *output,
             JsonNode *shot)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "index");
    json_builder_add_int_value(b, index);
    json_builder_set_member_name(b, "action");
    json_builder_add_string_value(b, carrel_action_kind_to_string(action->kind));
    json_builder_set_member_name(b, "duration_ms");
    json_builder_add_int_value(b, (g_get_monotonic_time() - started) / 1000);
    if (output) {
        json_builder_set_member_name(b, "output");
        json_builder_add_value(b, json_node_copy(output));
    }
    if (shot) {
        json_builder_set_member_name(b, "screenshot");
        json_builder_add_value(b, json_node_copy(shot));
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* A node with a new object holding obj's members but skip (their values shared). */
static JsonNode *
object_without(JsonObject *obj, const char *skip)
{
    JsonNode *node = json_node_new(JSON_NODE_OBJECT);
    JsonObject *out = json_object_new();
    g_autoptr(GList) members = json_object_get_members(obj);

    for (GList *l = members; l; l = l->next) {
        if (!g_str_equal(l->data, skip))
            json_object_set_member(out, l->data, json_object_dup_member(obj, l->data));
    }
    json_node_take_object(node, out);
    return node;
}

/*
 * What the timeline keeps of a result: no image data. New objects, not json_node_copy (which
 * shares them): the reply keeps its images.
 */
static JsonNode *
timeline_result(JsonNode *entry)
{
    JsonNode *copy = object_without(json_node_get_object(entry), "screenshot");
    JsonObject *obj = json_node_get_object(copy);
    JsonNode *out = json_object_get_member(obj, "output");

    if (out && JSON_NODE_HOLDS_OBJECT(out))
        json_object_set_member(obj, "output", object_without(json_node_get_object(out), "data"));
    return copy;
}

static const char *
secret_of(Run *run, guint i)
{
    return run->secrets && i < run->secrets->len ? g_ptr_array_index(run->secrets, i) : NULL;
}

/* A type_secret's entry names the secret (never its value); what is looked at after one in the
 * same batch is marked: the screen may show what was typed. */
static void
mark_secret(Run *run, guint i, JsonNode *entry)
{
    JsonObject *obj = json_node_get_object(entry);

    if (secret_of(run, i)) {
        run->typed = secret_of(run, i);
        json_object_set_string_member(obj, "action", "type_secret");
        json_object_set_string_member(obj, "secret", run->typed);
    } else if (run->typed && (json_object_has_member(obj, "screenshot") ||
                              json_object_has_member(obj, "output"))) {
        json_object_set_string_member(obj, "after_type_secret", run->typed);
    }
}

/* Whether an action kind may send HID events (or have a helper act for them). */
static gboolean
kind_sends_input(CarrelActionKind kind)
{
    return kind != CARREL_ACTION_SCREENSHOT && kind != CARREL_ACTION_ZOOM &&
           kind != CARREL_ACTION_CURSOR_POSITION && kind != CARREL_ACTION_SCREEN_SIZE &&
           kind != CARREL_ACTION_WAIT && kind != CARREL_ACTION_FAIL && kind != CARREL_ACTION_DONE;
}

static CarrelActionKind
kind_at(const CarrelActionBatch *batch, guint i)
{
    return ((CarrelAction *)g_ptr_array_index(batch->actions, i))->kind;
}

/*
 * Whether action i is the last that may send input before the next observation (its own with
 * observe "each", a screenshot action, or the final one). Settling compares with a frame from
 * just before it: an earlier action's effect must not pass for this one's.
 */
static gboolean
last_input_before_look(const CarrelActionBatch *batch, guint i)
{
    if (!kind_sends_input(kind_at(batch, i)))
        return FALSE;
    if (batch->observe == CARREL_OBSERVE_EACH)
        return TRUE;
    for (guint k = i + 1; k < batch->actions->len; k++) {
        if (kind_at(batch, k) == CARREL_ACTION_SCREENSHOT)
            return TRUE;
        if (kind_sends_input(kind_at(batch, k)))
            return FALSE;
    }
    return batch->observe == CARREL_OBSERVE_FINAL;
}

static gboolean
run_one(Run *run, CarrelHidState *state, JsonNode *body, const CarrelActionBatch *batch, guint i,
        JsonArray *results, GError **error)
{
    const CarrelAction *action = g_ptr_array_index(batch->actions, i);
    g_autoptr(JsonNode) output = NULL;
    g_autoptr(JsonNode) shot = NULL;
    g_autoptr(JsonNode) entry = NULL;
    g_autoptr(JsonNode) params = action_params(body, i, batch->actions->len == 1);
    g_autoptr(JsonNode) kept = NULL;
    g_autoptr(GError) local = NULL;
    g_autofree char *ref = NULL;
    g_autofree char *shot_ref = NULL;
    gint64 started = g_get_monotonic_time();
    gboolean ok = TRUE;

    /* Events sent since the newest frame: the frame before this action is taken now. */
    if (run->hid_sent && last_input_before_look(batch, i))
        ok = take_reference(run, &local);
    ok = ok && perform(run, state, action, &output, &ref, &local);
    if (ok && batch->observe == CARREL_OBSERVE_EACH && action->kind != CARREL_ACTION_SCREENSHOT)
        ok = (shot = observe(run, &shot_ref, &local)) != NULL;
    entry = ok ? result_entry(action, i, started, output, shot) : NULL;
    if (entry)
        mark_secret(run, i, entry);
    kept = entry ? timeline_result(entry) : NULL;
    /* An action whose event cannot be recorded ends the batch as a failed action. */
    ok = carrel_manager_record_outcome(
        run->mgr, run->session->id, run->actor, "action",
        secret_of(run, i) ? "type_secret" : carrel_action_kind_to_string(action->kind), params,
        kept, &local, started, ref ? ref : shot_ref, ok);
    if (!ok) {
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "actions[%u] (%s): ", i,
                                   carrel_action_kind_to_string(action->kind));
        return FALSE;
    }
    json_array_add_element(results, g_steal_pointer(&entry));
    return TRUE;
}

static JsonNode *
reply_node(Run *run, CarrelHidState *state, JsonArray *results, JsonNode *final, gint64 started)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "results");
    json_builder_add_value(b, json_node_init_array(json_node_alloc(), results));
    json_builder_set_member_name(b, "screenshot");
    json_builder_add_value(b, final ? json_node_copy(final) : json_node_new(JSON_NODE_NULL));
    json_builder_set_member_name(b, "screen");
    json_builder_add_value(b, xy_node("width", run->model_w, "height", run->model_h));
    json_builder_set_member_name(b, "pointer");
    json_builder_add_value(b, xy_node("x", state->pointer.x * run->model_w / run->width, "y",
                                      state->pointer.y * run->model_h / run->height));
    json_builder_set_member_name(b, "duration_ms");
    json_builder_add_int_value(b, (g_get_monotonic_time() - started) / 1000);
    /* The final observation's settling, also at the top for callers that read only that. */
    if (final && json_object_has_member(json_node_get_object(final), "settled_ms")) {
        JsonObject *shot = json_node_get_object(final);

        json_builder_set_member_name(b, "settled");
        json_builder_add_boolean_value(b, json_object_get_boolean_member(shot, "settled"));
        json_builder_set_member_name(b, "settled_ms");
        json_builder_add_int_value(b, json_object_get_int_member(shot, "settled_ms"));
    }
    if (run->typed) {
        json_builder_set_member_name(b, "after_type_secret");
        json_builder_add_string_value(b, run->typed);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static JsonNode *
run_batch(Run *run, CarrelHidState *state, JsonNode *body, CarrelActionBatch *batch, GError **error)
{
    g_autoptr(JsonArray) results = json_array_new();
    g_autoptr(JsonNode) final = NULL;
    g_autofree char *ref = NULL;
    gint64 started = g_get_monotonic_time();
    guint last = batch->actions->len - 1;

    /* The screen's size now: bounds are checked against it before anything is sent; its pixels
     * are the frame the first observation's settling compares with. */
    run->settle = &batch->settle;
    if (!take_reference(run, error) || !model_size(run, batch, error) ||
        !carrel_action_batch_check_bounds(batch, run->width, run->height, error))
        return NULL;
    for (guint i = 0; i < batch->actions->len; i++) {
        if (!run_one(run, state, body, batch, i, results, error))
            return NULL;
    }
    if (batch->observe == CARREL_OBSERVE_FINAL &&
        ((CarrelAction *)g_ptr_array_index(batch->actions, last))->kind !=
            CARREL_ACTION_SCREENSHOT &&
        !(final = observe(run, &ref, error)))
        return NULL;
    return reply_node(run, state, results, final, started);
}

/* Whether a batch sends HID events (anything beyond looking and waiting). */
static gboolean
batch_sends_hid(const CarrelActionBatch *batch)
{
    for (guint i = 0; i < batch->actions->len; i++) {
        CarrelActionKind kind = ((CarrelAction *)g_ptr_array_index(batch->actions, i))->kind;
        if (kind != CARREL_ACTION_SCREENSHOT && kind != CARREL_ACTION_ZOOM &&
            kind != CARREL_ACTION_CURSOR_POSITION && kind != CARREL_ACTION_SCREEN_SIZE &&
            kind != CARREL_ACTION_WAIT)
            return TRUE;
    }
    return FALSE;
}

static JsonNode *
computer(CarrelDoor *door, CarrelActionBatch *batch, JsonNode *body, GPtrArray *secrets,
         GError **error)
{
    CarrelManager *mgr = door->mgr;
    g_auto(Run) run = {.mgr = mgr, .actor = door->who, .secrets = secrets};
    CarrelHidState *state;
    JsonNode *reply;

    run.session =
        carrel_manager_running_session(mgr, door->session_id, "send input to", &run.domain, error);
    if (!run.session)
        return NULL;
    state = carrel_manager_hid_state(mgr, run.session->id);
    g_mutex_lock(&state->lock);
    reply = run_batch(&run, state, body, batch, error);
    g_mutex_unlock(&state->lock);
    if (!reply)
        g_prefix_error(error, "session '%s': ", run.session->id);
    return reply;
}

JsonNode *
carrel_manager_session_computer(CarrelManager *mgr, const CarrelPrincipal *who,
                                const char *id_or_name, JsonNode *body, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    g_autoptr(CarrelActionBatch) batch = NULL;
    g_autoptr(GPtrArray) secrets = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(JsonNode) expanded = NULL;
    JsonNode *reply;

    /* Looking is one operation, sending HID events another: the policy and the lease decide each.
     * The door keeps the body as sent: a type_secret's name, never its value. */
    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_SCREENSHOT, id_or_name,
                           body ? json_node_copy(body) : NULL, error) ||
        !(expanded = carrel_manager_expand_type_secret(mgr, door.session, body, secrets, error)))
        return NULL;
    batch = carrel_action_batch_from_json(expanded, error);
    carrel_manager_wipe_json(expanded);
    if (!batch)
        return NULL;
    if (batch_sends_hid(batch) && !carrel_door_check(&door, CARREL_OP_SESSION_INPUT, &local)) {
        /* Kept on the timeline: the reviewer sees what was tried while they held the session. */
        carrel_manager_record_logged(mgr, door.session_id, who, "action", "computer", body, NULL,
                                     local, g_get_monotonic_time());
        g_propagate_error(error, g_steal_pointer(&local));
        return NULL;
    }
    reply = computer(&door, batch, body, secrets, &local);
    return carrel_door_finish(&door, reply, &local, error);
}
