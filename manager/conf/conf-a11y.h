/* The accessibility tree (conf-a11y.c): its request, element ids, and carrel-guest a11y replies
 * checked as untrusted input. Included through conf.h only. */
#pragma once

#ifndef CARREL_CONF_H_INSIDE
#error "include conf/conf.h"
#endif

G_BEGIN_DECLS

/* Bounds on a request and on a reply, whatever the guest says. */
#define CARREL_A11Y_MAX_DEPTH 32
#define CARREL_A11Y_MAX_NODES 5000
#define CARREL_A11Y_DEFAULT_DEPTH 12
#define CARREL_A11Y_DEFAULT_NODES 500
#define CARREL_A11Y_MAX_NAME_CHARS 512
#define CARREL_A11Y_MAX_ROLE_CHARS 64
#define CARREL_A11Y_MAX_STATES 64
#define CARREL_A11Y_MAX_ID_LEN 256
#define CARREL_A11Y_MAX_APP_BYTES 256
#define CARREL_A11Y_MAX_COORDINATE (1 << 20)
/* What guest-exec returns at most; carrel-guest stops its tree at 768 KiB of JSON. */
#define CARREL_A11Y_MAX_OUTPUT_BYTES (1024 * 1024)

/* GET /v1/sessions/{id}/accessibility: the focused window or the whole desktop (or one
 * application of it), how deep and how many elements; model_width/height (both or neither)
 * scale the bounds as a batch's model_screen scales its points. */
typedef struct {
    gboolean desktop;
    const char *app; /* NULL, or the one application (borrowed: the query's, the call's) */
    guint depth;
    guint max_nodes;
    guint model_width;
    guint model_height;
} CarrelA11yRequest;

/*
 * Reads a request from URL query parameters: scope=focused|desktop (default focused),
 * depth=0..CARREL_A11Y_MAX_DEPTH (12), max_nodes=1..CARREL_A11Y_MAX_NODES (500),
 * model_width and model_height (1..65535, together), app=NAME (an application's AT-SPI name:
 * the desktop with that application only; not with scope=focused). query may be NULL. Unknown
 * parameters and values out of range are INVALID_ARG.
 */
gboolean carrel_a11y_request_parse(GHashTable *query, CarrelA11yRequest *ret_req, GError **error);

/* An application's name for app: one line of clean text, 1..CARREL_A11Y_MAX_APP_BYTES bytes;
 * INVALID_ARG otherwise. */
gboolean carrel_a11y_check_app(const char *app, GError **error);

/* The request as JSON (for the audit record). */
JsonNode *carrel_a11y_request_to_json(const CarrelA11yRequest *req);

/* An element id: child indexes from the desktop joined by '.' ("2.0.13"), plain decimals, at
 * most CARREL_A11Y_MAX_ID_LEN characters. INVALID_ARG naming it otherwise. */
gboolean carrel_a11y_check_id(const char *id, GError **error);

/* Parses carrel-guest a11y output (at most CARREL_A11Y_MAX_OUTPUT_BYTES, nested at most as deep
 * as the deepest tree allows): a JSON object, or HYPERVISOR naming what is wrong. */
JsonNode *carrel_a11y_reply_parse(const char *data, gsize len, GError **error);

/*
 * Checks a carrel-guest a11y tree reply ({"scope", "root", "count", "truncated"}) against req
 * and returns it clean: every element {"id", "role", "name", "states", "bounds", "action",
 * "children"} re-made from checked values (names and roles one line of clean text, cut to their
 * limits), no more than req's depth below the root nor max_nodes elements, ids in the tree's
 * shape (a child's id is its parent's plus one index). With a model size, bounds are mapped
 * from the screen (screen_w x screen_h) to it and "model_screen" says so. A reply no honest
 * guest gives is refused: HYPERVISOR, with the element's id and the reason.
 */
JsonNode *carrel_a11y_tree_from_guest(JsonNode *reply, const CarrelA11yRequest *req, guint screen_w,
                                      guint screen_h, GError **error);

/* One element of an "a11y node" reply ({"node": {...}}), checked the same way, without children
 * and in screen pixels. */
JsonNode *carrel_a11y_node_from_guest(JsonNode *reply, const char *id, GError **error);

/* The centre of a clean element's bounds, if it has bounds of at least one pixel whose centre
 * lies on the screen (width x height); WRONG_STATE otherwise (hidden, off screen). */
gboolean carrel_a11y_node_centre(JsonNode *node, guint width, guint height, guint *ret_x,
                                 guint *ret_y, GError **error);

G_END_DECLS
