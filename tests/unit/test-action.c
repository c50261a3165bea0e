/*
 * The computer action parser: every format into one CarrelAction, every refusal, batches and
 * their bounds. The keymap's tests are in test-keymap.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "conf/conf.h"

static JsonNode *
parse(const char *text)
{
    g_autoptr(GError) error = NULL;
    JsonNode *node = carrel_conf_parse_json(text, strlen(text), &error);

    if (!node)
        fail_msg("'%s': %s", text, error->message);
    return node;
}

static void
append_keys(GString *out, const char *label, char **keys)
{
    g_autofree char *joined = g_strjoinv("+", keys);

    g_string_append_printf(out, " %s=%s", label, joined);
}

/* Every meaningful member of an action as one line, so formats compare as text. */
static char *
describe(const CarrelAction *a)
{
    GString *out = g_string_new(carrel_action_kind_to_string(a->kind));

    if (a->has_point)
        g_string_append_printf(out, " at=%u,%u", a->point.x, a->point.y);
    if (a->kind == CARREL_ACTION_CLICK || a->kind == CARREL_ACTION_MOUSE_DOWN ||
        a->kind == CARREL_ACTION_MOUSE_UP)
        g_string_append_printf(out, " button=%s", carrel_button_to_string(a->button));
    if (a->count)
        g_string_append_printf(out, " count=%u", a->count);
    if (a->modifiers)
        append_keys(out, "mods", a->modifiers);
    if (a->path) {
        g_string_append(out, a->path_from_pointer ? " path=pointer" : " path=");
        for (guint i = 0; i < a->path->len; i++) {
            CarrelPoint *p = &g_array_index(a->path, CarrelPoint, i);
            g_string_append_printf(out, "%s%u,%u", i || a->path_from_pointer ? ";" : "", p->x,
                                   p->y);
        }
    }
    if (a->dx || a->dy)
        g_string_append_printf(out, " dx=%d dy=%d", a->dx, a->dy);
    for (guint i = 0; a->combos && i < a->combos->len; i++)
        append_keys(out, "keys", g_ptr_array_index(a->combos, i));
    if (a->text)
        g_string_append_printf(out, " text=%s", a->text);
    if (a->duration_ms)
        g_string_append_printf(out, " ms=%u", a->duration_ms);
    if (a->kind == CARREL_ACTION_ZOOM)
        g_string_append_printf(out, " region=%u,%u-%u,%u", a->region[0].x, a->region[0].y,
                               a->region[1].x, a->region[1].y);
    if (a->app)
        g_string_append_printf(out, " app=%s", a->app);
    for (guint i = 0; a->args && a->args[i]; i++)
        g_string_append_printf(out, " arg=%s", a->args[i]);
    if (a->target)
        g_string_append_printf(out, " target=%s", a->target);
    return g_string_free(out, FALSE);
}

static void
assert_action(const char *text, const char *expected)
{
    g_autoptr(JsonNode) node = parse(text);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelAction) action = carrel_action_from_json(node, &error);
    g_autofree char *got = NULL;

    if (!action)
        fail_msg("'%s': %s", text, error->message);
    got = describe(action);
    if (!g_str_equal(got, expected))
        fail_msg("'%s'\n  got:      %s\n  expected: %s", text, got, expected);
}

static void
assert_refused(const char *text, const char *fragment)
{
    g_autoptr(JsonNode) node = parse(text);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelActionBatch) batch = carrel_action_batch_from_json(node, &error);

    if (batch)
        fail_msg("'%s' was accepted", text);
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    if (!strstr(error->message, fragment))
        fail_msg("'%s': message '%s' lacks '%s'", text, error->message, fragment);
}

static void
test_enum_tables(void **state)
{
    for (int i = 0; i < CARREL_ACTION_LAST; i++)
        assert_int_equal(carrel_action_kind_from_string(carrel_action_kind_to_string(i)), i);
    for (int i = 0; i < CARREL_BUTTON_LAST; i++)
        assert_int_equal(carrel_button_from_string(carrel_button_to_string(i)), i);
    for (int i = 0; i < CARREL_OBSERVE_LAST; i++)
        assert_int_equal(carrel_observe_from_string(carrel_observe_to_string(i)), i);
    assert_int_equal(carrel_action_kind_from_string("left_click"), CARREL_ACTION_LAST);
    assert_int_equal(carrel_button_from_string("wheel"), CARREL_BUTTON_LAST);
    assert_true(carrel_action_kind_sends_hid(CARREL_ACTION_CLICK));
    assert_true(carrel_action_kind_sends_hid(CARREL_ACTION_WAIT));
    assert_false(carrel_action_kind_sends_hid(CARREL_ACTION_SCREENSHOT));
    assert_false(carrel_action_kind_sends_hid(CARREL_ACTION_LAUNCH));
}

static void
test_clicks_all_formats(void **state)
{
    const char *left = "click at=100,200 button=left count=1";
    const char *right = "click at=1,2 button=right count=1";
    const char *middle = "click at=1,2 button=middle count=1";
    const char *twice = "click at=5,6 button=left count=2";
    const char *thrice = "click at=5,6 button=left count=3";

    assert_action("{\"action\":\"left_click\",\"coordinate\":[100,200]}", left);
    assert_action("{\"action\":\"click\",\"x\":100,\"y\":200}", left);
    assert_action("{\"action\":\"click\",\"coordinate\":[100,200],\"button\":\"left\","
                  "\"count\":1,\"text\":null}",
                  left);
    assert_action("{\"type\":\"click\",\"x\":100,\"y\":200,\"button\":\"left\"}", left);
    assert_action("{\"action_type\":\"CLICK\",\"parameters\":{\"x\":100,\"y\":200}}", left);

    assert_action("{\"action\":\"right_click\",\"coordinate\":[1,2]}", right);
    assert_action("{\"action\":\"click\",\"x\":1,\"y\":2,\"button\":\"right\"}", right);
    assert_action("{\"type\":\"click\",\"x\":1,\"y\":2,\"button\":\"right\"}", right);
    assert_action("{\"action_type\":\"RIGHT_CLICK\",\"parameters\":{\"x\":1,\"y\":2}}", right);
    assert_action("{\"action_type\":\"CLICK\",\"parameters\":{\"x\":1,\"y\":2,"
                  "\"button\":\"right\"}}",
                  right);

    assert_action("{\"action\":\"middle_click\",\"coordinate\":[1,2]}", middle);
    assert_action("{\"action\":\"click\",\"x\":1,\"y\":2,\"button\":\"middle\"}", middle);
    assert_action("{\"type\":\"click\",\"x\":1,\"y\":2,\"button\":\"wheel\"}", middle);
    assert_action("{\"action_type\":\"CLICK\",\"parameters\":{\"x\":1,\"y\":2,"
                  "\"button\":\"middle\"}}",
                  middle);

    assert_action("{\"action\":\"double_click\",\"coordinate\":[5,6]}", twice);
    assert_action("{\"action\":\"click\",\"x\":5,\"y\":6,\"count\":2}", twice);
    assert_action("{\"type\":\"double_click\",\"x\":5,\"y\":6}", twice);
    assert_action("{\"action_type\":\"DOUBLE_CLICK\",\"parameters\":{\"x\":5,\"y\":6}}", twice);
    assert_action("{\"action_type\":\"CLICK\",\"parameters\":{\"x\":5,\"y\":6,\"num_clicks\":2}}",
                  twice);

    assert_action("{\"action\":\"triple_click\",\"coordinate\":[5,6]}", thrice);
    assert_action("{\"action\":\"click\",\"x\":5,\"y\":6,\"count\":3}", thrice);
    assert_action("{\"action_type\":\"CLICK\",\"parameters\":{\"x\":5,\"y\":6,\"num_clicks\":3}}",
                  thrice);

    /* Without a position: where the pointer is. */
    assert_action("{\"action\":\"left_click\"}", "click button=left count=1");
    assert_action("{\"action_type\":\"CLICK\"}", "click button=left count=1");
    assert_action("{\"action_type\":\"CLICK\",\"parameters\":{}}", "click button=left count=1");
    assert_action("{\"action\":\"click\",\"button\":\"back\"}", "click button=back count=1");
    assert_action("{\"type\":\"click\",\"x\":0,\"y\":0,\"button\":\"forward\"}",
                  "click at=0,0 button=forward count=1");
}

static void
test_modifiers(void **state)
{
    assert_action("{\"action\":\"left_click\",\"coordinate\":[1,2],\"text\":\"shift\"}",
                  "click at=1,2 button=left count=1 mods=shift");
    assert_action("{\"action\":\"left_click\",\"coordinate\":[1,2],\"text\":\"ctrl+shift\"}",
                  "click at=1,2 button=left count=1 mods=ctrl+shift");
    assert_action("{\"action\":\"click\",\"x\":1,\"y\":2,\"modifiers\":[\"ctrl\",\"alt\"]}",
                  "click at=1,2 button=left count=1 mods=ctrl+alt");
    assert_action("{\"action\":\"click\",\"x\":1,\"y\":2,\"modifiers\":\"super\"}",
                  "click at=1,2 button=left count=1 mods=meta_l");
    assert_action("{\"type\":\"click\",\"x\":1,\"y\":2,\"button\":\"left\",\"keys\":[\"CTRL\"]}",
                  "click at=1,2 button=left count=1 mods=ctrl");
    assert_action("{\"type\":\"move\",\"x\":1,\"y\":2,\"keys\":[\"SHIFT\"]}",
                  "mouse_move at=1,2 mods=shift");
    assert_action("{\"action\":\"scroll\",\"coordinate\":[3,4],\"scroll_direction\":\"down\","
                  "\"scroll_amount\":2,\"text\":\"ctrl\"}",
                  "scroll at=3,4 mods=ctrl dx=0 dy=2");
}

static void
test_moves_and_presses(void **state)
{
    const char *move = "mouse_move at=640,400";

    assert_action("{\"action\":\"mouse_move\",\"coordinate\":[640,400]}", move);
    assert_action("{\"action\":\"mouse_move\",\"x\":640,\"y\":400}", move);
    assert_action("{\"type\":\"move\",\"x\":640,\"y\":400}", move);
    assert_action("{\"action_type\":\"MOVE_TO\",\"parameters\":{\"x\":640,\"y\":400}}", move);

    assert_action("{\"action\":\"left_mouse_down\"}", "mouse_down button=left");
    assert_action("{\"action\":\"left_mouse_up\",\"coordinate\":[3,4]}",
                  "mouse_up at=3,4 button=left");
    assert_action("{\"action\":\"mouse_down\",\"button\":\"right\"}", "mouse_down button=right");
    assert_action("{\"action\":\"mouse_up\",\"x\":3,\"y\":4}", "mouse_up at=3,4 button=left");
    assert_action("{\"action_type\":\"MOUSE_DOWN\",\"parameters\":{\"button\":\"right\"}}",
                  "mouse_down button=right");
    assert_action("{\"action_type\":\"MOUSE_UP\"}", "mouse_up button=left");
}

static void
test_drags(void **state)
{
    const char *drag = "drag path=10,20;30,40";

    assert_action("{\"action\":\"left_click_drag\",\"start_coordinate\":[10,20],"
                  "\"coordinate\":[30,40]}",
                  drag);
    assert_action("{\"action\":\"drag\",\"path\":[[10,20],[30,40]]}", drag);
    assert_action("{\"action\":\"drag\",\"path\":[{\"x\":10,\"y\":20},{\"x\":30,\"y\":40}]}", drag);
    assert_action("{\"type\":\"drag\",\"path\":[{\"x\":10,\"y\":20},{\"x\":30,\"y\":40}]}", drag);
    assert_action("{\"action_type\":\"DRAG_TO\",\"parameters\":{\"x\":30,\"y\":40}}",
                  "drag path=pointer;30,40");
    assert_action("{\"action\":\"drag\",\"path\":[[1,1],[2,2],[3,3]],\"modifiers\":[\"shift\"]}",
                  "drag mods=shift path=1,1;2,2;3,3");
}

static void
test_scrolls(void **state)
{
    const char *down = "scroll at=10,20 dx=0 dy=3";
    const char *left = "scroll at=10,20 dx=-2 dy=0";

    assert_action("{\"action\":\"scroll\",\"coordinate\":[10,20],\"scroll_direction\":\"down\","
                  "\"scroll_amount\":3}",
                  down);
    assert_action("{\"action\":\"scroll\",\"x\":10,\"y\":20,\"dy\":3}", down);
    assert_action("{\"action\":\"scroll\",\"x\":10,\"y\":20,\"direction\":\"down\",\"amount\":3}",
                  down);
    assert_action("{\"type\":\"scroll\",\"x\":10,\"y\":20,\"scroll_x\":0,\"scroll_y\":300}", down);
    assert_action("{\"type\":\"scroll\",\"x\":10,\"y\":20,\"scroll_y\":260}", down);
    assert_action("{\"action\":\"scroll\",\"coordinate\":[10,20],\"scroll_direction\":\"left\","
                  "\"scroll_amount\":2}",
                  left);
    assert_action("{\"action\":\"scroll\",\"x\":10,\"y\":20,\"dx\":-2}", left);
    assert_action("{\"type\":\"scroll\",\"x\":10,\"y\":20,\"scroll_x\":-200,\"scroll_y\":0}", left);
    /* pyautogui: dy > 0 scrolls up. */
    assert_action("{\"action_type\":\"SCROLL\",\"parameters\":{\"dy\":-3}}", "scroll dx=0 dy=3");
    assert_action("{\"action_type\":\"SCROLL\",\"parameters\":{\"dx\":-2,\"dy\":5}}",
                  "scroll dx=-2 dy=-5");
    assert_action("{\"action\":\"scroll\",\"scroll_direction\":\"up\",\"scroll_amount\":1}",
                  "scroll dx=0 dy=-1");
    assert_action("{\"action\":\"scroll\",\"direction\":\"right\",\"amount\":50}",
                  "scroll dx=50 dy=0");
    /* Any movement is at least one notch. */
    assert_action("{\"type\":\"scroll\",\"x\":1,\"y\":1,\"scroll_x\":-1,\"scroll_y\":0}",
                  "scroll at=1,1 dx=-1 dy=0");
}

static void
test_keyboard_actions(void **state)
{
    const char *combo = "key keys=ctrl+shift+t";
    const char *typed = "type text=Hello, world!";

    assert_action("{\"action\":\"key\",\"text\":\"ctrl+shift+t\"}", combo);
    assert_action("{\"action\":\"key\",\"combo\":\"ctrl+shift+t\"}", combo);
    assert_action("{\"action\":\"key\",\"keys\":[\"ctrl\",\"shift\",\"t\"]}", combo);
    assert_action("{\"type\":\"keypress\",\"keys\":[\"CTRL\",\"SHIFT\",\"T\"]}", combo);
    assert_action("{\"action_type\":\"HOTKEY\",\"parameters\":{\"keys\":[\"ctrl\",\"shift\","
                  "\"t\"]}}",
                  combo);
    assert_action("{\"action\":\"key\",\"text\":\"ctrl+a BackSpace\"}",
                  "key keys=ctrl+a keys=backspace");
    assert_action("{\"action_type\":\"PRESS\",\"parameters\":{\"key\":\"enter\"}}", "key keys=ret");
    assert_action("{\"type\":\"keypress\",\"keys\":[\"ENTER\"]}", "key keys=ret");
    assert_action("{\"action\":\"key\",\"text\":\"Return\"}", "key keys=ret");

    assert_action("{\"action\":\"key_down\",\"combo\":\"shift\"}", "key_down keys=shift");
    assert_action("{\"action_type\":\"KEY_DOWN\",\"parameters\":{\"key\":\"shiftleft\"}}",
                  "key_down keys=shift");
    assert_action("{\"action\":\"key_up\",\"keys\":[\"ctrl\"]}", "key_up keys=ctrl");
    assert_action("{\"action_type\":\"KEY_UP\",\"parameters\":{\"key\":\"ctrlleft\"}}",
                  "key_up keys=ctrl");

    assert_action("{\"action\":\"hold_key\",\"text\":\"shift\",\"duration\":1.5}",
                  "hold_key keys=shift ms=1500");
    assert_action("{\"action\":\"hold_key\",\"combo\":\"shift\",\"duration_ms\":1500}",
                  "hold_key keys=shift ms=1500");
    assert_action("{\"action\":\"hold_key\",\"text\":\"a\",\"duration\":2}",
                  "hold_key keys=a ms=2000");

    assert_action("{\"action\":\"type\",\"text\":\"Hello, world!\"}", typed);
    assert_action("{\"type\":\"type\",\"text\":\"Hello, world!\"}", typed);
    assert_action("{\"action_type\":\"TYPING\",\"parameters\":{\"text\":\"Hello, world!\"}}",
                  typed);
    assert_action("{\"action\":\"type\",\"text\":\"a\\tb\\n\"}", "type text=a\tb\n");
}

static void
test_other_actions(void **state)
{
    assert_action("{\"action\":\"wait\",\"duration\":2}", "wait ms=2000");
    assert_action("{\"action\":\"wait\",\"duration_ms\":2000}", "wait ms=2000");
    assert_action("{\"action\":\"wait\"}", "wait ms=1000");
    assert_action("{\"type\":\"wait\"}", "wait ms=1000");
    assert_action("{\"type\":\"wait\",\"ms\":2000}", "wait ms=2000");
    assert_action("{\"action_type\":\"WAIT\"}", "wait ms=2000");
    assert_action("\"WAIT\"", "wait ms=2000");
    assert_action("\"DONE\"", "done");
    assert_action("{\"action_type\":\"FAIL\",\"parameters\":{}}", "fail");
    assert_action("{\"action\":\"done\"}", "done");

    assert_action("{\"action\":\"screenshot\"}", "screenshot");
    assert_action("{\"type\":\"screenshot\"}", "screenshot");
    assert_action("{\"action\":\"zoom\",\"region\":[0,0,640,400]}", "zoom region=0,0-640,400");
    assert_action("{\"action\":\"cursor_position\"}", "cursor_position");
    assert_action("{\"action\":\"screen_size\"}", "screen_size");
    assert_action("{\"action\":\"clipboard_get\"}", "clipboard_get");
    assert_action("{\"action\":\"clipboard_set\",\"text\":\"caf\xc3\xa9 \xe2\x82\xac\"}",
                  "clipboard_set text=caf\xc3\xa9 \xe2\x82\xac");
    assert_action("{\"action\":\"windows\"}", "windows");
    assert_action("{\"action\":\"launch\",\"app\":\"firefox-esr\",\"args\":[\"--new-window\","
                  "\"https://example.com\"]}",
                  "launch app=firefox-esr arg=--new-window arg=https://example.com");
    assert_action("{\"action\":\"launch\",\"app\":\"xterm\"}", "launch app=xterm");
    assert_action("{\"action\":\"open\",\"target\":\"/home/agent/report.pdf\"}",
                  "open target=/home/agent/report.pdf");
}

static void
test_refusals(void **state)
{
    assert_refused("{\"action\":\"fly\"}", "unknown action 'fly'; known: screenshot, zoom");
    assert_refused("{\"type\":\"hover\"}", "unknown OpenAI action 'hover'");
    assert_refused("{\"action_type\":\"JUMP\"}", "unknown OSWorld action 'JUMP'");
    assert_refused("{\"action_type\":\"click\"}", "unknown OSWorld action 'click'");
    assert_refused("{\"action\":\"left_click\",\"coordinate\":[1,2],\"colour\":1}",
                   "unknown member 'colour' for action 'left_click'");
    assert_refused("{\"action\":\"left_click\",\"button\":\"right\"}",
                   "unknown member 'button' for action 'left_click'");
    assert_refused("{\"type\":\"click\",\"x\":1,\"y\":2,\"coordinate\":[1,2]}",
                   "unknown member 'coordinate'");
    assert_refused("{\"action_type\":\"CLICK\",\"parameters\":{\"count\":2}}",
                   "unknown member 'count' for action 'CLICK'");
    assert_refused("{\"action_type\":\"CLICK\",\"extra\":1}", "unknown member 'extra'");
    assert_refused("{\"action_type\":\"CLICK\",\"parameters\":[1]}",
                   "'parameters' must be an object");
    assert_refused("{\"action\":3}", "'action' must be a string");
    assert_refused("{\"foo\":1}", "needs an 'action', 'type' or 'action_type'");
    assert_refused("[1]", "an action must be a JSON object");
    assert_refused("\"CLICK\"", "must be WAIT, FAIL or DONE");
    assert_refused("{\"action\":\"key\",\"text\":\"ctrl+xyz\"}", "unknown key 'xyz'");
}

static void
test_refused_coordinates(void **state)
{
    assert_refused("{\"action\":\"mouse_move\",\"coordinate\":[-1,2]}",
                   "'coordinate' must be [x, y] with integers between 0 and 65535");
    assert_refused("{\"action\":\"mouse_move\",\"coordinate\":[1.5,2]}", "'coordinate' must be");
    assert_refused("{\"action\":\"mouse_move\",\"coordinate\":[\"1\",2]}", "'coordinate' must be");
    assert_refused("{\"action\":\"mouse_move\",\"coordinate\":[1,2,3]}", "'coordinate' must be");
    assert_refused("{\"action\":\"mouse_move\",\"coordinate\":[65536,2]}", "'coordinate' must be");
    assert_refused("{\"action\":\"mouse_move\",\"x\":1}", "'x' and 'y' must be given together");
    assert_refused("{\"action\":\"mouse_move\",\"x\":-1,\"y\":1}", "'x' and 'y' must be integers");
    assert_refused("{\"action\":\"mouse_move\",\"x\":1,\"y\":1,\"coordinate\":[1,1]}",
                   "either 'coordinate' or 'x' and 'y'");
    assert_refused("{\"action\":\"mouse_move\"}", "'coordinate' (or 'x' and 'y') is required");
    assert_refused("{\"type\":\"click\",\"button\":\"left\"}", "'x' and 'y' are required");
    assert_refused("{\"action_type\":\"MOVE_TO\",\"parameters\":{\"x\":1.0,\"y\":2}}",
                   "'x' and 'y' must be integers");
    assert_refused("{\"action\":\"left_click_drag\",\"coordinate\":[1,1]}",
                   "'start_coordinate' and 'coordinate' are required");
    assert_refused("{\"action\":\"drag\",\"path\":[[1,1]]}", "'path' must be an array of 2 to 64");
    assert_refused("{\"action\":\"drag\",\"path\":[[1,1],[2]]}", "'path[1]' must be [x, y]");
    assert_refused("{\"type\":\"drag\",\"path\":[[1,1],[2,2]]}", "'path[0]' must be {\"x\": X");
    assert_refused("{\"type\":\"drag\",\"path\":[{\"x\":1,\"y\":1},{\"x\":1,\"y\":1,\"z\":1}]}",
                   "'path[1]' must be");
    assert_refused("{\"action\":\"zoom\",\"region\":[0,0,10]}",
                   "'region' must be [x0, y0, x1, y1]");
    assert_refused("{\"action\":\"zoom\",\"region\":[10,0,10,5]}", "x0 < x1 and y0 < y1");
    assert_refused("{\"action\":\"zoom\"}", "'region' must be");
}

static char *
repeat(const char *piece, guint count)
{
    GString *out = g_string_new(NULL);

    for (guint i = 0; i < count; i++)
        g_string_append(out, piece);
    return g_string_free(out, FALSE);
}

static void
test_refused_limits(void **state)
{
    g_autofree char *long_text = repeat("a", CARREL_ACTION_MAX_TEXT + 1);
    g_autofree char *ok_text = repeat("a", CARREL_ACTION_MAX_TEXT);
    g_autofree char *type_long =
        g_strdup_printf("{\"action\":\"type\",\"text\":\"%s\"}", long_text);
    g_autofree char *type_ok = g_strdup_printf("{\"action\":\"type\",\"text\":\"%s\"}", ok_text);
    g_autofree char *clip_long =
        g_strdup_printf("{\"action\":\"clipboard_set\",\"text\":\"%s\"}", long_text);
    g_autofree char *points = repeat("[1,1],", CARREL_ACTION_MAX_PATH);
    g_autofree char *path_long =
        g_strdup_printf("{\"action\":\"drag\",\"path\":[%s[2,2]]}", points);

    assert_refused(type_long, "'text' is longer than 4096 bytes");
    assert_refused(clip_long, "'text' is longer than 4096 bytes");
    {
        g_autoptr(JsonNode) node = parse(type_ok);
        g_autoptr(CarrelAction) action = carrel_action_from_json(node, NULL);
        assert_non_null(action);
    }
    assert_refused(path_long, "'path' must be an array of 2 to 64 points");
    assert_refused("{\"action\":\"type\",\"text\":\"caf\xc3\xa9\",\"method\":\"keys\"}",
                   "'text': character 4 of the text (U+00E9) cannot be typed");
    assert_refused("{\"action\":\"type\",\"text\":\"a\\rb\"}", "character 2 of the text (U+000D)");
    assert_refused("{\"action\":\"type\"}", "'text' is required");
    assert_refused("{\"action\":\"type\",\"text\":5}", "'text' must be a string");
    assert_refused("{\"action\":\"scroll\",\"direction\":\"down\",\"amount\":0}",
                   "'amount' must be an integer between 1 and 50");
    assert_refused("{\"action\":\"scroll\",\"direction\":\"down\",\"amount\":51}",
                   "between 1 and 50");
    assert_refused("{\"action\":\"scroll\",\"direction\":\"down\"}",
                   "'amount' is required with 'direction'");
    assert_refused("{\"action\":\"scroll\",\"scroll_direction\":\"sideways\",\"scroll_amount\":1}",
                   "'scroll_direction' must be up, down, left or right");
    assert_refused("{\"action\":\"scroll\",\"dy\":51}",
                   "'dy' must be an integer between -50 and 50");
    assert_refused("{\"action\":\"scroll\",\"dy\":0}", "non-zero 'dx' or 'dy'");
    assert_refused("{\"action\":\"scroll\"}", "scroll takes one of");
    assert_refused("{\"action\":\"scroll\",\"dy\":1,\"direction\":\"up\",\"amount\":1}",
                   "scroll takes one of");
    assert_refused("{\"type\":\"scroll\",\"x\":1,\"y\":1,\"scroll_y\":5001}",
                   "'scroll_y' must be an integer between -5000 and 5000");
    assert_refused("{\"type\":\"scroll\",\"x\":1,\"y\":1,\"scroll_y\":0}", "non-zero 'scroll_x'");
    assert_refused("{\"action_type\":\"SCROLL\"}", "SCROLL needs a non-zero 'dx' or 'dy'");
    assert_refused("{\"action\":\"wait\",\"duration\":31}",
                   "'duration' must be a number of seconds between 0 and 30");
    assert_refused("{\"action\":\"wait\",\"duration\":-1}", "'duration' must be");
    assert_refused("{\"action\":\"wait\",\"duration_ms\":30001}",
                   "'duration_ms' must be an integer between 0 and 30000");
    assert_refused("{\"type\":\"wait\",\"ms\":30001}",
                   "'ms' must be an integer between 0 and 30000");
    assert_refused("{\"action\":\"wait\",\"duration\":1,\"duration_ms\":1}", "either 'duration'");
    assert_refused("{\"action\":\"hold_key\",\"text\":\"a\"}", "'duration' (or 'duration_ms')");
    assert_refused("{\"action\":\"click\",\"count\":0}",
                   "'count' must be an integer between 1 and 3");
    assert_refused("{\"action\":\"click\",\"count\":4}",
                   "'count' must be an integer between 1 and 3");
    assert_refused("{\"action_type\":\"CLICK\",\"parameters\":{\"num_clicks\":4}}",
                   "'num_clicks' must be an integer between 1 and 3");
}

static void
test_refused_keys_and_buttons(void **state)
{
    assert_refused("{\"action\":\"click\",\"button\":\"wheel\"}",
                   "'button' must be one of left, middle, right, back, forward");
    assert_refused("{\"type\":\"click\",\"x\":1,\"y\":1,\"button\":\"middle\"}",
                   "'button' must be one of left, right, wheel, back, forward");
    assert_refused("{\"action_type\":\"CLICK\",\"parameters\":{\"button\":\"back\"}}",
                   "'button' must be one of left, right, middle");
    assert_refused("{\"action\":\"key\"}", "'combo' (or 'keys' or 'text') is required");
    assert_refused("{\"action\":\"key\",\"text\":\"a\",\"combo\":\"b\"}",
                   "either 'text' or 'combo'");
    assert_refused("{\"action\":\"key\",\"combo\":[\"a\"]}", "'combo' must be a string");
    assert_refused("{\"action\":\"key\",\"text\":\"   \"}", "'text': no key given");
    assert_refused("{\"action\":\"key\",\"keys\":[]}", "'keys': no key given");
    assert_refused("{\"action\":\"key\",\"keys\":[1]}", "'keys' must be an array of at most 8");
    assert_refused("{\"action\":\"key\",\"keys\":[\"ctrl+c\"]}", "unknown key 'ctrl+c'");
    assert_refused("{\"action\":\"key\",\"text\":\"a+b+c+d+e+f+g+h+i\"}", "more than 8 keys");
    assert_refused("{\"action\":\"key_down\",\"combo\":\"a b\"}",
                   "key_down takes one key combination, not a sequence");
    assert_refused("{\"action\":\"left_click\",\"text\":\"hyperdrive\"}",
                   "'text': unknown key 'hyperdrive'");
    assert_refused("{\"type\":\"keypress\"}", "'keys' is required");
    assert_refused("{\"type\":\"keypress\",\"keys\":[\"NOPE\"]}", "'keys': unknown key 'NOPE'");
    assert_refused("{\"action_type\":\"PRESS\",\"parameters\":{\"key\":[\"a\"]}}",
                   "'key' must be a string");
    assert_refused("{\"action_type\":\"PRESS\",\"parameters\":{\"key\":\"ctrl+c\"}}",
                   "unknown key 'ctrl+c'");
    assert_refused("{\"action_type\":\"HOTKEY\",\"parameters\":{\"keys\":\"ctrl\"}}",
                   "'keys' must be an array of key names");
    assert_refused("{\"action\":\"launch\"}", "'app' is required");
    assert_refused("{\"action\":\"launch\",\"app\":\"\"}", "'app' must be non-empty text");
    assert_refused("{\"action\":\"launch\",\"app\":\"a\\nb\"}", "without control characters");
    assert_refused("{\"action\":\"launch\",\"app\":\"x\",\"args\":[1]}",
                   "'args' must be an array of at most 64 strings");
    assert_refused("{\"action\":\"open\"}", "'target' is required");
    assert_refused("{\"action\":\"clipboard_set\"}", "'text' is required");
}

static CarrelActionBatch *
parse_batch(const char *text)
{
    g_autoptr(JsonNode) node = parse(text);
    g_autoptr(GError) error = NULL;
    CarrelActionBatch *batch = carrel_action_batch_from_json(node, &error);

    if (!batch)
        fail_msg("'%s': %s", text, error->message);
    return batch;
}

static void
test_batches(void **state)
{
    g_autoptr(CarrelActionBatch) single = parse_batch("{\"action\":\"screenshot\"}");
    g_autoptr(CarrelActionBatch) mixed =
        parse_batch("{\"actions\":[{\"action\":\"left_click\",\"coordinate\":[1,2]},"
                    "{\"type\":\"type\",\"text\":\"hi\"},\"WAIT\",{\"action_type\":\"PRESS\","
                    "\"parameters\":{\"key\":\"enter\"}}],\"observe\":\"each\"}");
    g_autoptr(CarrelActionBatch) named = parse_batch(
        "{\"action\":\"batch\",\"actions\":[{\"action\":\"wait\"}],\"observe\":\"none\","
        "\"scale\":1.5}");
    g_autoptr(CarrelActionBatch) model = parse_batch(
        "{\"actions\":[{\"action\":\"wait\"}],\"model_screen\":{\"width\":1024,\"height\":640}}");
    g_autofree char *many = NULL;
    g_autofree char *too_many = NULL;

    assert_int_equal(single->actions->len, 1);
    assert_int_equal(single->observe, CARREL_OBSERVE_FINAL);
    assert_int_equal(mixed->actions->len, 4);
    assert_int_equal(mixed->observe, CARREL_OBSERVE_EACH);
    assert_int_equal(((CarrelAction *)g_ptr_array_index(mixed->actions, 2))->kind,
                     CARREL_ACTION_WAIT);
    assert_int_equal(named->observe, CARREL_OBSERVE_NONE);
    assert_true(named->scale == 1.5);
    assert_int_equal(model->model_width, 1024);
    assert_int_equal(model->model_height, 640);

    many = repeat("{\"action\":\"wait\"},", CARREL_ACTION_MAX_BATCH);
    many[strlen(many) - 1] = '\0';
    too_many = g_strdup_printf("{\"actions\":[%s,\"DONE\"]}", many);
    {
        g_autofree char *ok = g_strdup_printf("{\"actions\":[%s]}", many);
        g_autoptr(CarrelActionBatch) full = parse_batch(ok);
        assert_int_equal(full->actions->len, CARREL_ACTION_MAX_BATCH);
    }
    assert_refused(too_many, "'actions' must be an array of 1 to 100 actions");
    assert_refused("{\"actions\":[]}", "'actions' must be an array of 1 to 100 actions");
    assert_refused("{\"actions\":{}}", "'actions' must be an array");
    assert_refused("{\"actions\":[{\"action\":\"wait\"},{\"action\":\"fly\"}]}",
                   "actions[1]: unknown action 'fly'");
    assert_refused("{\"actions\":[{\"actions\":[]}]}", "actions[0]: a batch cannot be one of");
    assert_refused("{\"actions\":[{\"action\":\"batch\",\"actions\":[]}]}", "batches do not nest");
    assert_refused("{\"actions\":[\"WAIT\"],\"observe\":\"always\"}",
                   "'observe' must be final, each or none");
    assert_refused("{\"actions\":[\"WAIT\"],\"scale\":0}", "'scale' must be a number between");
    assert_refused("{\"actions\":[\"WAIT\"],\"scale\":\"2\"}", "'scale' must be a number");
    assert_refused("{\"actions\":[\"WAIT\"],\"scale\":2,\"model_screen\":{\"width\":1,"
                   "\"height\":1}}",
                   "either 'scale' or 'model_screen'");
    assert_refused("{\"actions\":[\"WAIT\"],\"model_screen\":{\"width\":0,\"height\":1}}",
                   "'model_screen' must be {\"width\": W, \"height\": H}");
    assert_refused("{\"actions\":[\"WAIT\"],\"model_screen\":[1,1]}", "'model_screen' must be");
    assert_refused("{\"actions\":[\"WAIT\"],\"speed\":1}", "unknown member 'speed'");
}

static void
assert_bounds_refused(CarrelActionBatch *batch, guint width, guint height, const char *message)
{
    g_autoptr(GError) error = NULL;

    assert_false(carrel_action_batch_check_bounds(batch, width, height, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
    if (!g_str_equal(error->message, message))
        fail_msg("message '%s', expected '%s'", error->message, message);
}

static CarrelPoint
point_of(CarrelActionBatch *batch, guint index)
{
    return ((CarrelAction *)g_ptr_array_index(batch->actions, index))->point;
}

static void
test_bounds_plain(void **state)
{
    g_autoptr(CarrelActionBatch) edge =
        parse_batch("{\"actions\":[{\"action\":\"mouse_move\",\"x\":1279,\"y\":799},"
                    "{\"action\":\"zoom\",\"region\":[0,0,1280,800]}]}");
    g_autoptr(CarrelActionBatch) off =
        parse_batch("{\"action\":\"mouse_move\",\"x\":1280,\"y\":0}");
    g_autoptr(CarrelActionBatch) drag =
        parse_batch("{\"actions\":[\"WAIT\",{\"action\":\"drag\",\"path\":[[0,0],[5,800]]}]}");
    g_autoptr(CarrelActionBatch) zoom =
        parse_batch("{\"action\":\"zoom\",\"region\":[0,0,1281,10]}");

    assert_true(carrel_action_batch_check_bounds(edge, 1280, 800, NULL));
    assert_int_equal(point_of(edge, 0).x, 1279);
    assert_int_equal(point_of(edge, 0).y, 799);
    assert_bounds_refused(off, 1280, 800, "point (1280, 0) is off the screen (1280x800)");
    assert_bounds_refused(drag, 1280, 800,
                          "actions[1]: point (5, 800) is off the screen (1280x800)");
    assert_bounds_refused(zoom, 1280, 800, "region corner (1281, 10) is off the screen (1280x800)");
    assert_bounds_refused(edge, 0, 800, "screen size 0x800 is not valid");
}

static void
test_bounds_scaled(void **state)
{
    g_autoptr(CarrelActionBatch) scaled =
        parse_batch("{\"actions\":[{\"action\":\"mouse_move\",\"x\":100,\"y\":50},"
                    "{\"action\":\"drag\",\"path\":[[0,0],[639,399]]},"
                    "{\"action\":\"zoom\",\"region\":[10,10,640,400]}],\"scale\":2}");
    g_autoptr(CarrelActionBatch) model =
        parse_batch("{\"actions\":[{\"action\":\"mouse_move\",\"x\":1023,\"y\":639}],"
                    "\"model_screen\":{\"width\":1024,\"height\":640}}");
    g_autoptr(CarrelActionBatch) off =
        parse_batch("{\"actions\":[{\"action\":\"mouse_move\",\"x\":1,\"y\":1},"
                    "{\"action\":\"left_click\",\"coordinate\":[640,0]}],"
                    "\"model_screen\":{\"width\":640,\"height\":400}}");
    CarrelAction *drag = g_ptr_array_index(scaled->actions, 1);
    CarrelAction *zoom = g_ptr_array_index(scaled->actions, 2);

    assert_true(carrel_action_batch_check_bounds(scaled, 1280, 800, NULL));
    assert_int_equal(point_of(scaled, 0).x, 201);
    assert_int_equal(point_of(scaled, 0).y, 101);
    assert_int_equal(g_array_index(drag->path, CarrelPoint, 0).x, 1);
    assert_int_equal(g_array_index(drag->path, CarrelPoint, 1).x, 1279);
    assert_int_equal(g_array_index(drag->path, CarrelPoint, 1).y, 799);
    assert_int_equal(zoom->region[0].x, 20);
    assert_int_equal(zoom->region[1].x, 1280);
    assert_int_equal(zoom->region[1].y, 800);
    assert_true(scaled->scale == 0);
    /* A second call only checks: nothing is scaled twice. */
    assert_true(carrel_action_batch_check_bounds(scaled, 1280, 800, NULL));
    assert_int_equal(point_of(scaled, 0).x, 201);

    assert_true(carrel_action_batch_check_bounds(model, 1280, 800, NULL));
    assert_int_equal(point_of(model, 0).x, 1279);
    assert_int_equal(point_of(model, 0).y, 799);

    assert_bounds_refused(
        off, 1280, 800, "actions[1]: point (640, 0) maps to (1281, 1), off the screen (1280x800)");
    /* Refused: left as it was, still in model space. */
    assert_int_equal(point_of(off, 0).x, 1);
    assert_int_equal(off->model_width, 640);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enum_tables),
        cmocka_unit_test(test_clicks_all_formats),
        cmocka_unit_test(test_modifiers),
        cmocka_unit_test(test_moves_and_presses),
        cmocka_unit_test(test_drags),
        cmocka_unit_test(test_scrolls),
        cmocka_unit_test(test_keyboard_actions),
        cmocka_unit_test(test_other_actions),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_refused_coordinates),
        cmocka_unit_test(test_refused_limits),
        cmocka_unit_test(test_refused_keys_and_buttons),
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_bounds_plain),
        cmocka_unit_test(test_bounds_scaled),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
