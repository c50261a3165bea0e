/*
 * conf: what the parsers of computer actions share (conf-action*.c), one file per format with a
 * table of its action names; not for other modules.
 */
#pragma once

#include "conf/conf-priv.h"

/* The action formats; Anthropic's names and carrel's share the "action" member. */
typedef enum {
    CARREL_ACTION_FORMAT_CARREL,
    CARREL_ACTION_FORMAT_OPENAI,
    CARREL_ACTION_FORMAT_OSWORLD,
} CarrelActionFormat;

typedef struct _CarrelActionAlias CarrelActionAlias;

/* What a member parser works on: the action's members (OSWorld: its parameters). */
typedef struct {
    JsonObject *obj;
    CarrelActionFormat format;
    const CarrelActionAlias *alias;
    CarrelAction *action;
} CarrelActionCtx;

typedef gboolean (*CarrelActionParseFunc)(CarrelActionCtx *ctx, GError **error);

/* One action name of a format: the kind it means, its parser and its allowed members. */
struct _CarrelActionAlias {
    const char *name;
    CarrelActionKind kind;
    CarrelActionParseFunc parse; /* NULL: no members */
    const char *const *members;  /* allowed besides the one naming the action */
    CarrelButton button;         /* defaults of the click and press aliases */
    guint count;
};

/* Default button and count of an alias that has none of its own. */
#define CARREL_ACTION_NO_BUTTON CARREL_BUTTON_LEFT, 0

/* The tables of the formats, each ending with a NULL name. */
extern const CarrelActionAlias carrel_action_carrel_aliases[];
extern const CarrelActionAlias carrel_action_openai_aliases[];
extern const CarrelActionAlias carrel_action_osworld_aliases[];

/* Member lists more than one format uses: none, "text" alone, and a type action's. */
extern const char *const carrel_action_no_members[];
extern const char *const carrel_action_text_members[];
extern const char *const carrel_action_type_members[];

/* Sets an INVALID_ARG error; returns FALSE for the caller to return. */
gboolean carrel_action_set_invalid(GError **error, const char *format, ...) G_GNUC_PRINTF(2, 3);

/* A coordinate, an integer 0..CARREL_ACTION_MAX_COORDINATE; FALSE otherwise. */
gboolean carrel_action_node_to_coordinate(JsonNode *node, gint64 *ret_value);
/* [x, y] (Anthropic's coordinate, carrel's path points); the error names name. */
gboolean carrel_action_pair_to_point(JsonNode *node, const char *name, CarrelPoint *ret_point,
                                     GError **error);
/* The action's position, "coordinate" or "x" and "y": into action->point and has_point. */
gboolean carrel_action_get_point(CarrelActionCtx *ctx, gboolean required, GError **error);
/* An array of at most max strings, each valid UTF-8 within CARREL_ACTION_MAX_TEXT bytes. */
gboolean carrel_action_get_strings(JsonNode *node, const char *name, guint max, GStrv *ret_strings,
                                   GError **error);
/* Keys from one name or combination string, or from an array of names pressed together. */
GStrv carrel_action_node_to_keys(JsonNode *node, const char *name, gboolean caseless,
                                 GError **error);
/* The keys a pointer action holds: "modifiers", "text" (Anthropic) or "keys" (OpenAI). */
gboolean carrel_action_get_modifiers(CarrelActionCtx *ctx, GError **error);
/* "button", by the names of the context's format. */
gboolean carrel_action_get_button(CarrelActionCtx *ctx, GError **error);

/* Parsers more than one format's table uses. */
gboolean carrel_action_parse_move(CarrelActionCtx *ctx, GError **error);
gboolean carrel_action_parse_click(CarrelActionCtx *ctx, GError **error);
gboolean carrel_action_parse_press(CarrelActionCtx *ctx, GError **error);
gboolean carrel_action_parse_path(CarrelActionCtx *ctx, GError **error);
gboolean carrel_action_parse_type(CarrelActionCtx *ctx, GError **error);
