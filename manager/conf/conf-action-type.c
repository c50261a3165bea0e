/*
 * The type action: any Unicode text without control characters (newline and tab aside), and the
 * method that carries it to the guest (see CarrelTypeMethod), chosen here so the action that
 * leaves the parser says exactly what will happen.
 */
#include "conf/conf-action-priv.h"

static const char *const method_names[CARREL_TYPE_METHOD_LAST] = {
    [CARREL_TYPE_METHOD_AUTO] = "auto",
    [CARREL_TYPE_METHOD_KEYS] = "keys",
    [CARREL_TYPE_METHOD_GUEST_KEYSYMS] = "guest_keysyms",
    [CARREL_TYPE_METHOD_CLIPBOARD] = "clipboard",
};

/* What a clipboard paste presses when the caller names no keys: with CLIPBOARD and PRIMARY both
 * holding the text, shift+Insert pastes in xterm and VTE terminals (PRIMARY) as in GTK, Qt and
 * browser text fields (CLIPBOARD), where ctrl+v fails in terminals and ctrl+shift+v elsewhere. */
#define DEFAULT_PASTE_KEYS "shift+Insert"

const char *
carrel_type_method_to_string(CarrelTypeMethod method)
{
    return carrel_util_enum_to_string(method_names, CARREL_TYPE_METHOD_LAST, (int)method);
}

CarrelTypeMethod
carrel_type_method_from_string(const char *name)
{
    return (CarrelTypeMethod)carrel_util_enum_from_string(method_names, CARREL_TYPE_METHOD_LAST,
                                                          name);
}

gboolean
carrel_action_check_typed_text(const char *text, GError **error)
{
    guint position = 1;

    if (!g_utf8_validate(text, -1, NULL))
        return carrel_action_set_invalid(error, "text is not valid UTF-8");
    for (const char *p = text; *p; p = g_utf8_next_char(p), position++) {
        gunichar c = g_utf8_get_char(p);

        /* Control characters would act, not be typed: a guest tool or a terminal could read
         * ESC, BEL or C1 codes as commands. */
        if (c != '\n' && c != '\t' && g_unichar_type(c) == G_UNICODE_CONTROL)
            return carrel_action_set_invalid(
                error,
                "character %u of the text (U+%04X) is a control character: only newline and tab "
                "may be typed",
                position, c);
    }
    return TRUE;
}

gboolean
carrel_action_choose_type_method(const char *text, CarrelTypeMethod asked,
                                 CarrelTypeMethod *ret_method, gboolean *ret_keys_fallback,
                                 GError **error)
{
    gboolean keys_can = carrel_keymap_check_text(text, NULL);
    gboolean fallback = FALSE;

    if (asked == CARREL_TYPE_METHOD_KEYS && !keys_can)
        return carrel_keymap_check_text(text, error);
    if (asked == CARREL_TYPE_METHOD_AUTO && keys_can &&
        g_utf8_strlen(text, -1) <= CARREL_TYPE_KEYS_AUTO_MAX)
        asked = CARREL_TYPE_METHOD_KEYS;
    else if (asked == CARREL_TYPE_METHOD_AUTO) {
        asked = CARREL_TYPE_METHOD_GUEST_KEYSYMS;
        fallback = keys_can;
    }
    *ret_method = asked;
    if (ret_keys_fallback)
        *ret_keys_fallback = fallback;
    return TRUE;
}

static gboolean
get_method(CarrelActionCtx *ctx, CarrelTypeMethod *ret_method, GError **error)
{
    g_autofree char *name = NULL;

    *ret_method = CARREL_TYPE_METHOD_AUTO;
    if (!carrel_conf_get_string(ctx->obj, "method", FALSE, &name, error))
        return FALSE;
    if (!name)
        return TRUE;
    *ret_method = carrel_type_method_from_string(name);
    if (*ret_method == CARREL_TYPE_METHOD_LAST)
        return carrel_action_set_invalid(
            error, "'method' must be one of auto, keys, guest_keysyms, clipboard");
    return TRUE;
}

/* The one combination a clipboard paste presses. */
static gboolean
get_paste_keys(CarrelActionCtx *ctx, GError **error)
{
    g_autofree char *combo = NULL;
    GStrv keys;

    if (!carrel_conf_get_text(ctx->obj, "paste_keys", FALSE, CARREL_KEYMAP_MAX_NAME * 4, &combo,
                              error))
        return FALSE;
    if (combo && ctx->action->method != CARREL_TYPE_METHOD_CLIPBOARD)
        return carrel_action_set_invalid(error, "'paste_keys' needs method 'clipboard'");
    if (ctx->action->method != CARREL_TYPE_METHOD_CLIPBOARD)
        return TRUE;
    if (!(keys = carrel_keymap_parse_combo(combo ? combo : DEFAULT_PASTE_KEYS, error))) {
        g_prefix_error(error, "'paste_keys': ");
        return FALSE;
    }
    ctx->action->combos = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
    g_ptr_array_add(ctx->action->combos, keys);
    return TRUE;
}

gboolean
carrel_action_parse_type(CarrelActionCtx *ctx, GError **error)
{
    CarrelTypeMethod asked;

    if (!carrel_conf_get_text(ctx->obj, "text", TRUE, CARREL_ACTION_MAX_TEXT, &ctx->action->text,
                              error))
        return FALSE;
    if (!get_method(ctx, &asked, error))
        return FALSE;
    if (!carrel_action_check_typed_text(ctx->action->text, error) ||
        !carrel_action_choose_type_method(ctx->action->text, asked, &ctx->action->method,
                                          &ctx->action->keys_fallback, error)) {
        g_prefix_error(error, "'text': ");
        return FALSE;
    }
    return get_paste_keys(ctx, error);
}

const char *const carrel_action_type_members[] = {"text", "method", "paste_keys", NULL};
