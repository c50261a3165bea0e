/*
 * HID plans (keyboard and pointer events): a normalised action as the ordered input-send-event
 * commands (and pauses) that the backend sends to the virtio tablet and keyboard. A pure function
 * of the action, the screen size and the pointer position, tested with golden files
 * (tests/data/hid-plan).
 *
 * Every step is its own QMP command, and QEMU ends each command with a sync (EV_SYN): the guest
 * sees one input frame per step. Presses and releases go in separate steps, since a guest stack
 * that compares key state per frame (libinput does) would see no change in a frame holding both.
 */
#include <math.h>
#include <string.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

void
carrel_hid_step_free(CarrelHidStep *step)
{
    if (!step)
        return;
    g_free(step->arguments);
    g_free(step);
}

typedef struct {
    GPtrArray *steps;
    guint width;
    guint height;
    CarrelPoint pointer;
} Plan;

/* QEMU's names of the buttons (InputButton). */
static const char *const qemu_buttons[CARREL_BUTTON_LAST] = {
    [CARREL_BUTTON_LEFT] = "left",     [CARREL_BUTTON_MIDDLE] = "middle",
    [CARREL_BUTTON_RIGHT] = "right",   [CARREL_BUTTON_BACK] = "side",
    [CARREL_BUTTON_FORWARD] = "extra",
};

/* Pixel to the tablet's axis: 0..width-1 spread over 0..CARREL_HID_ABS_MAX, rounded. */
static guint
to_abs(guint pixel, guint side)
{
    guint64 span = side > 1 ? side - 1 : 1;

    return (guint)(((guint64)pixel * CARREL_HID_ABS_MAX * 2 + span) / (span * 2));
}

static GString *
events_new(void)
{
    return g_string_new("{\"events\":[");
}

static void
event_begin(GString *events)
{
    if (events->str[events->len - 1] != '[')
        g_string_append_c(events, ',');
}

/* Names embedded here come from fixed tables or are checked QKeyCodes: nothing to escape. */
static void
add_key(GString *events, const char *qcode, gboolean down)
{
    event_begin(events);
    g_string_append_printf(events,
                           "{\"type\":\"key\",\"data\":{\"down\":%s,\"key\":{\"type\":\"qcode\","
                           "\"data\":\"%s\"}}}",
                           down ? "true" : "false", qcode);
}

static void
add_button(GString *events, const char *button, gboolean down)
{
    event_begin(events);
    g_string_append_printf(events, "{\"type\":\"btn\",\"data\":{\"down\":%s,\"button\":\"%s\"}}",
                           down ? "true" : "false", button);
}

static void
send_events(Plan *plan, GString *events)
{
    CarrelHidStep *step = g_new0(CarrelHidStep, 1);

    g_string_append(events, "]}");
    step->arguments = g_string_free(events, FALSE);
    g_ptr_array_add(plan->steps, step);
}

static void
pause_for(Plan *plan, guint ms)
{
    CarrelHidStep *step;

    if (ms == 0)
        return;
    step = g_new0(CarrelHidStep, 1);
    step->delay_ms = ms;
    g_ptr_array_add(plan->steps, step);
}

/* Both axes in one frame, so the pointer jumps straight there. */
static void
move_to(Plan *plan, CarrelPoint point)
{
    GString *events = events_new();

    g_string_append_printf(events,
                           "{\"type\":\"abs\",\"data\":{\"axis\":\"x\",\"value\":%u}},"
                           "{\"type\":\"abs\",\"data\":{\"axis\":\"y\",\"value\":%u}}",
                           to_abs(point.x, plan->width), to_abs(point.y, plan->height));
    send_events(plan, events);
    plan->pointer = point;
}

/* Keys down in their order, or up in the reverse order; nothing for no keys. */
static void
send_keys(Plan *plan, char **keys, gboolean down)
{
    guint n = keys ? g_strv_length(keys) : 0;
    GString *events;

    if (n == 0)
        return;
    events = events_new();
    for (guint i = 0; i < n; i++)
        add_key(events, keys[down ? i : n - 1 - i], down);
    send_events(plan, events);
}

static void
send_button(Plan *plan, const char *button, gboolean down)
{
    GString *events = events_new();

    add_button(events, button, down);
    send_events(plan, events);
}

static void
plan_click(Plan *plan, const CarrelAction *action)
{
    const char *button = qemu_buttons[action->button];

    if (action->has_point)
        move_to(plan, action->point);
    send_keys(plan, action->modifiers, TRUE);
    for (guint i = 0; i < action->count; i++) {
        if (i > 0)
            pause_for(plan, CARREL_HID_CLICK_GAP_MS);
        send_button(plan, button, TRUE);
        send_button(plan, button, FALSE);
    }
    send_keys(plan, action->modifiers, FALSE);
}

static void
plan_press(Plan *plan, const CarrelAction *action, gboolean down)
{
    if (action->has_point)
        move_to(plan, action->point);
    send_button(plan, qemu_buttons[action->button], down);
}

/* Moves from the pointer to target in steps of about CARREL_HID_DRAG_STEP_PX. */
static void
drag_segment(Plan *plan, CarrelPoint target)
{
    double dx = (double)target.x - plan->pointer.x;
    double dy = (double)target.y - plan->pointer.y;
    guint n = (guint)ceil(sqrt(dx * dx + dy * dy) / CARREL_HID_DRAG_STEP_PX);
    CarrelPoint from = plan->pointer;

    n = MIN(n, CARREL_HID_DRAG_MAX_STEPS);
    for (guint k = 1; k <= n; k++) {
        CarrelPoint p = {(guint)floor(from.x + dx * k / n + 0.5),
                         (guint)floor(from.y + dy * k / n + 0.5)};
        move_to(plan, p);
        pause_for(plan, CARREL_HID_DRAG_DELAY_MS);
    }
}

/*
 * Press, move through every point with interpolated points in between (toolkits start a drag
 * only after motion past a threshold, and the guest must see the way, not a jump), release.
 */
static void
plan_drag(Plan *plan, const CarrelAction *action)
{
    guint first = 0;

    if (!action->path_from_pointer) {
        move_to(plan, g_array_index(action->path, CarrelPoint, 0));
        first = 1;
    }
    send_keys(plan, action->modifiers, TRUE);
    send_button(plan, "left", TRUE);
    pause_for(plan, CARREL_HID_DRAG_DELAY_MS);
    for (guint i = first; i < action->path->len; i++)
        drag_segment(plan, g_array_index(action->path, CarrelPoint, i));
    send_button(plan, "left", FALSE);
    send_keys(plan, action->modifiers, FALSE);
}

/* One wheel notch per frame, spaced so the guest's event queue keeps up. */
static void
send_wheel(Plan *plan, const char *button, guint notches)
{
    for (guint i = 0; i < notches; i++) {
        GString *events = events_new();

        if (i > 0)
            pause_for(plan, CARREL_HID_SCROLL_DELAY_MS);
        add_button(events, button, TRUE);
        add_button(events, button, FALSE);
        send_events(plan, events);
    }
}

static gboolean
holds_shift(char **keys)
{
    return keys && (g_strv_contains((const char *const *)keys, "shift") ||
                    g_strv_contains((const char *const *)keys, "shift_r"));
}

/*
 * Horizontal scrolling is shift + the vertical wheel: QEMU's virtio tablet maps only wheel-up
 * and wheel-down (to REL_WHEEL) and drops wheel-left/wheel-right as unmapped buttons, and GTK,
 * Firefox and Chromium scroll sideways on shift + wheel (down = right).
 */
static void
plan_scroll(Plan *plan, const CarrelAction *action)
{
    char *shift[] = {(char *)"shift", NULL};
    gboolean add_shift = action->dx != 0 && !holds_shift(action->modifiers);

    if (action->has_point)
        move_to(plan, action->point);
    send_keys(plan, action->modifiers, TRUE);
    send_wheel(plan, action->dy > 0 ? "wheel-down" : "wheel-up", (guint)ABS(action->dy));
    if (action->dx != 0) {
        if (action->dy != 0)
            pause_for(plan, CARREL_HID_SCROLL_DELAY_MS);
        if (add_shift)
            send_keys(plan, shift, TRUE);
        send_wheel(plan, action->dx > 0 ? "wheel-down" : "wheel-up", (guint)ABS(action->dx));
        if (add_shift)
            send_keys(plan, shift, FALSE);
    }
    send_keys(plan, action->modifiers, FALSE);
}

/*
 * One press per character. The pause between characters is not for show: a guest reads its
 * virtio input queue on its own schedule (slowly under TCG), QEMU drops events when that queue is
 * full, and X's key repeat and input methods misbehave on a burst of presses.
 */
static void
plan_type(Plan *plan, const CarrelAction *action)
{
    for (const char *p = action->text; *p; p++) {
        const char *qcode = NULL;
        gboolean shift = FALSE;
        GString *down = events_new();
        GString *up = events_new();

        carrel_keymap_from_char(*p, &qcode, &shift);
        if (p != action->text)
            pause_for(plan, CARREL_HID_TYPE_DELAY_MS);
        if (shift)
            add_key(down, "shift", TRUE);
        add_key(down, qcode, TRUE);
        add_key(up, qcode, FALSE);
        if (shift)
            add_key(up, "shift", FALSE);
        send_events(plan, down);
        send_events(plan, up);
    }
}

static void
plan_keys(Plan *plan, const CarrelAction *action)
{
    for (guint i = 0; i < action->combos->len; i++) {
        if (i > 0)
            pause_for(plan, CARREL_HID_TYPE_DELAY_MS);
        send_keys(plan, g_ptr_array_index(action->combos, i), TRUE);
        send_keys(plan, g_ptr_array_index(action->combos, i), FALSE);
    }
}

static void
plan_hold_key(Plan *plan, const CarrelAction *action)
{
    send_keys(plan, g_ptr_array_index(action->combos, 0), TRUE);
    pause_for(plan, action->duration_ms);
    send_keys(plan, g_ptr_array_index(action->combos, 0), FALSE);
}

static void
plan_action(Plan *plan, const CarrelAction *action)
{
    switch (action->kind) {
    case CARREL_ACTION_MOUSE_MOVE:
        send_keys(plan, action->modifiers, TRUE);
        move_to(plan, action->point);
        send_keys(plan, action->modifiers, FALSE);
        break;
    case CARREL_ACTION_CLICK:
        plan_click(plan, action);
        break;
    case CARREL_ACTION_MOUSE_DOWN:
    case CARREL_ACTION_MOUSE_UP:
        plan_press(plan, action, action->kind == CARREL_ACTION_MOUSE_DOWN);
        break;
    case CARREL_ACTION_DRAG:
        plan_drag(plan, action);
        break;
    case CARREL_ACTION_SCROLL:
        plan_scroll(plan, action);
        break;
    case CARREL_ACTION_TYPE:
        plan_type(plan, action);
        break;
    case CARREL_ACTION_KEY:
        plan_keys(plan, action);
        break;
    case CARREL_ACTION_KEY_DOWN:
    case CARREL_ACTION_KEY_UP:
        send_keys(plan, g_ptr_array_index(action->combos, 0),
                  action->kind == CARREL_ACTION_KEY_DOWN);
        break;
    case CARREL_ACTION_HOLD_KEY:
        plan_hold_key(plan, action);
        break;
    case CARREL_ACTION_WAIT:
        pause_for(plan, action->duration_ms);
        break;
    case CARREL_ACTION_SCREENSHOT:
    case CARREL_ACTION_ZOOM:
    case CARREL_ACTION_CURSOR_POSITION:
    case CARREL_ACTION_SCREEN_SIZE:
    case CARREL_ACTION_CLIPBOARD_GET:
    case CARREL_ACTION_CLIPBOARD_SET:
    case CARREL_ACTION_WINDOWS:
    case CARREL_ACTION_LAUNCH:
    case CARREL_ACTION_OPEN:
    case CARREL_ACTION_CLICK_ELEMENT:
    case CARREL_ACTION_FAIL:
    case CARREL_ACTION_DONE:
    case CARREL_ACTION_LAST:
        break;
    }
}

static gboolean
check_point(CarrelPoint point, guint width, guint height, GError **error)
{
    if (point.x < width && point.y < height)
        return TRUE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                "point (%u, %u) is off the screen (%ux%u)", point.x, point.y, width, height);
    return FALSE;
}

/* Keys are embedded in the JSON as they are: only QKeyCode names get through. */
static gboolean
check_keys(char **keys, gboolean required, GError **error)
{
    guint n = keys ? g_strv_length(keys) : 0;

    if ((required && n == 0) || n > CARREL_KEYMAP_MAX_COMBO_KEYS) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a key combination must have 1 to %d keys", CARREL_KEYMAP_MAX_COMBO_KEYS);
        return FALSE;
    }
    for (guint i = 0; i < n; i++) {
        if (!carrel_keymap_is_qcode(keys[i])) {
            g_autofree char *shown = g_strescape(keys[i], NULL);
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "key '%.40s' is not a QKeyCode", shown);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean
check_pointer_action(const CarrelAction *a, guint width, guint height, GError **error)
{
    guint min_path = a->path_from_pointer ? 1 : 2;

    if (a->has_point && !check_point(a->point, width, height, error))
        return FALSE;
    if (!check_keys(a->modifiers, FALSE, error))
        return FALSE;
    if ((a->kind == CARREL_ACTION_MOUSE_MOVE && !a->has_point) ||
        ((guint)a->button >= CARREL_BUTTON_LAST) ||
        (a->kind == CARREL_ACTION_CLICK && (a->count < 1 || a->count > CARREL_ACTION_MAX_CLICKS)) ||
        (a->kind == CARREL_ACTION_SCROLL &&
         ((a->dx == 0 && a->dy == 0) || ABS(a->dx) > CARREL_ACTION_MAX_SCROLL ||
          ABS(a->dy) > CARREL_ACTION_MAX_SCROLL)) ||
        (a->kind == CARREL_ACTION_DRAG &&
         (!a->path || a->path->len < min_path || a->path->len > CARREL_ACTION_MAX_PATH))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "%s action is not valid",
                    carrel_action_kind_to_string(a->kind));
        return FALSE;
    }
    for (guint i = 0; a->kind == CARREL_ACTION_DRAG && i < a->path->len; i++) {
        if (!check_point(g_array_index(a->path, CarrelPoint, i), width, height, error))
            return FALSE;
    }
    return TRUE;
}

static gboolean
check_key_action(const CarrelAction *a, GError **error)
{
    guint n = a->combos ? a->combos->len : 0;

    if (a->kind == CARREL_ACTION_TYPE)
        return a->text && strlen(a->text) <= CARREL_ACTION_MAX_TEXT &&
               carrel_keymap_check_text(a->text, error);
    if (a->kind == CARREL_ACTION_WAIT)
        return a->duration_ms <= CARREL_ACTION_MAX_DURATION_MS;
    if (n < 1 || n > CARREL_ACTION_MAX_COMBOS || (a->kind != CARREL_ACTION_KEY && n != 1) ||
        a->duration_ms > CARREL_ACTION_MAX_DURATION_MS)
        return FALSE;
    for (guint i = 0; i < n; i++) {
        if (!check_keys(g_ptr_array_index(a->combos, i), TRUE, error))
            return FALSE;
    }
    return TRUE;
}

/* The plan trusts nothing of the action: it may not come from carrel_action_from_json. */
static gboolean
check_action(const CarrelAction *action, guint width, guint height, GError **error)
{
    g_autoptr(GError) local = NULL;

    if (width < 1 || height < 1 || width > CARREL_HYPERVISOR_SCREEN_MAX_SIDE ||
        height > CARREL_HYPERVISOR_SCREEN_MAX_SIDE) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "screen size %ux%u is not valid",
                    width, height);
        return FALSE;
    }
    switch (action->kind) {
    case CARREL_ACTION_MOUSE_MOVE:
    case CARREL_ACTION_CLICK:
    case CARREL_ACTION_MOUSE_DOWN:
    case CARREL_ACTION_MOUSE_UP:
    case CARREL_ACTION_DRAG:
    case CARREL_ACTION_SCROLL:
        return check_pointer_action(action, width, height, error);
    case CARREL_ACTION_TYPE:
    case CARREL_ACTION_KEY:
    case CARREL_ACTION_KEY_DOWN:
    case CARREL_ACTION_KEY_UP:
    case CARREL_ACTION_HOLD_KEY:
    case CARREL_ACTION_WAIT:
        if (check_key_action(action, &local))
            return TRUE;
        if (local) {
            g_propagate_error(error, g_steal_pointer(&local));
            return FALSE;
        }
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "%s action is not valid",
                    carrel_action_kind_to_string(action->kind));
        return FALSE;
    case CARREL_ACTION_SCREENSHOT:
    case CARREL_ACTION_ZOOM:
    case CARREL_ACTION_CURSOR_POSITION:
    case CARREL_ACTION_SCREEN_SIZE:
    case CARREL_ACTION_CLIPBOARD_GET:
    case CARREL_ACTION_CLIPBOARD_SET:
    case CARREL_ACTION_WINDOWS:
    case CARREL_ACTION_LAUNCH:
    case CARREL_ACTION_OPEN:
    case CARREL_ACTION_CLICK_ELEMENT:
    case CARREL_ACTION_FAIL:
    case CARREL_ACTION_DONE:
        return TRUE;
    case CARREL_ACTION_LAST:
        break;
    }
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "unknown action kind %d",
                (int)action->kind);
    return FALSE;
}

GPtrArray *
carrel_hypervisor_hid_plan(const CarrelAction *action, guint width, guint height,
                           CarrelPoint pointer, CarrelPoint *ret_pointer, GError **error)
{
    Plan plan = {NULL, width, height, pointer};

    if (!check_action(action, width, height, error))
        return NULL;
    /* A pointer we lost track of (the screen shrank) starts from the nearest pixel. */
    plan.pointer.x = MIN(pointer.x, width - 1);
    plan.pointer.y = MIN(pointer.y, height - 1);
    plan.steps = g_ptr_array_new_with_free_func((GDestroyNotify)carrel_hid_step_free);
    plan_action(&plan, action);
    if (ret_pointer)
        *ret_pointer = plan.pointer;
    return plan.steps;
}

char *
carrel_hypervisor_hid_command(const CarrelHidStep *step)
{
    if (!step->arguments)
        return NULL;
    return g_strdup_printf("{\"execute\":\"input-send-event\",\"arguments\":%s}", step->arguments);
}

char *
carrel_hypervisor_hid_plan_to_text(GPtrArray *plan)
{
    GString *text = g_string_new(NULL);

    for (guint i = 0; i < plan->len; i++) {
        const CarrelHidStep *step = g_ptr_array_index(plan, i);

        if (step->arguments)
            g_string_append_printf(text, "%s\n", step->arguments);
        else
            g_string_append_printf(text, "delay %u\n", step->delay_ms);
    }
    return g_string_free(text, FALSE);
}
