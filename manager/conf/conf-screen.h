/* conf: screen sizes, template defaults and a new session's machine (conf-screen.c).
 * Included through conf.h only. */
#pragma once

#ifndef CARREL_CONF_H_INSIDE
#error "include conf/conf.h"
#endif

G_BEGIN_DECLS

/*
 * Screen sizes (conf-screen.c). The range is what the templates' QXL device holds with room to
 * spare (16 MiB of video memory: 32-bit frames up to 4 Mpixels); CVT modes have widths in
 * multiples of 8.
 */
#define CARREL_SCREEN_MIN_WIDTH 640
#define CARREL_SCREEN_MIN_HEIGHT 480
#define CARREL_SCREEN_MAX_WIDTH 1920
#define CARREL_SCREEN_MAX_HEIGHT 1200

/* INVALID_ARG unless width x height is in the range above (the width a multiple of 8). */
gboolean carrel_screen_size_check(guint width, guint height, GError **error);
/* Parses "WIDTHxHEIGHT" (decimal, no sign, no leading zero, no spaces) and checks its range. */
gboolean carrel_screen_size_parse(const char *text, guint *ret_width, guint *ret_height,
                                  GError **error);
/* "WxH", or NULL when either is 0. */
char *carrel_screen_size_format(guint width, guint height);
/* An optional "WxH" string member; absent or null leaves the outputs untouched. */
gboolean carrel_conf_get_screen(JsonObject *obj, const char *member, guint *ret_width,
                                guint *ret_height, GError **error);

/*
 * A template's defaults from its recipe.json (the object a build left, NULL = none): the member
 * "defaults": {vcpus?, memory_mib?, screen?: "WxH"}, bounded like a create request. Fields that
 * are absent stay 0. INVALID_ARG for anything else.
 */
gboolean carrel_template_defaults_from_recipe(JsonNode *recipe, CarrelTemplate *tmpl,
                                              GError **error);

/* A new session's machine: what the request says, else the template's default, else carreld's. */
typedef struct {
    guint vcpus;
    guint memory_mib;
    gboolean vcpus_explicit; /* given by the request (policy maximums refuse, never lower it) */
    gboolean memory_explicit;
    guint screen_width; /* 0 = the image's own */
    guint screen_height;
} CarrelSessionShape;

void carrel_session_resolve_shape(const CarrelSessionRequest *req, const CarrelTemplate *tmpl,
                                  CarrelSessionShape *ret_shape);

G_END_DECLS
