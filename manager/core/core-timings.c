/*
 * core: where a verb's time goes. A verb opens a frame on its thread (the door does it for the
 * lifecycle verbs); the steps it shares with other verbs (restore, agent, clock, network...)
 * mark their phase as they end, without every signature carrying a timer. The frame then reads
 * {"restore_ms": N, "agent_ms": M, ..., "total_ms": T}: for the reply and the timeline event.
 */
#include "core/core-priv.h"

/* Phases one frame tells apart; a phase marked again adds to its time. */
#define TIMINGS_PHASES_MAX 16
/* Frames open at once on one thread (a fork's per-session frames inside its own). */
#define TIMINGS_DEPTH_MAX 4

typedef struct {
    gint64 start_us;
    gint64 last_us;
    guint n;
    const char *phase[TIMINGS_PHASES_MAX]; /* string literals */
    gint64 us[TIMINGS_PHASES_MAX];
} Frame;

typedef struct {
    guint depth;
    Frame frames[TIMINGS_DEPTH_MAX];
} Stack;

static GPrivate stack_key = G_PRIVATE_INIT(g_free);

static Stack *
stack(void)
{
    Stack *s = g_private_get(&stack_key);

    if (!s) {
        s = g_new0(Stack, 1);
        g_private_set(&stack_key, s);
    }
    return s;
}

void
carrel_timings_begin(void)
{
    Stack *s = stack();
    Frame *f;

    /* Deeper than the bound: the outer frame goes on counting, and end() stays balanced. */
    if (s->depth++ >= TIMINGS_DEPTH_MAX)
        return;
    f = &s->frames[s->depth - 1];
    memset(f, 0, sizeof(*f));
    f->start_us = f->last_us = g_get_monotonic_time();
}

void
carrel_timings_mark(const char *phase)
{
    Stack *s = g_private_get(&stack_key);
    Frame *f;
    gint64 now = g_get_monotonic_time();
    guint i;

    if (!s || s->depth == 0)
        return;
    f = &s->frames[MIN(s->depth, TIMINGS_DEPTH_MAX) - 1];
    for (i = 0; i < f->n && !g_str_equal(f->phase[i], phase); i++)
        ;
    if (i == f->n) {
        if (f->n == TIMINGS_PHASES_MAX)
            return;
        f->phase[f->n++] = phase;
    }
    f->us[i] += now - f->last_us;
    f->last_us = now;
}

static JsonNode *
frame_json(const Frame *f)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    for (guint i = 0; i < f->n; i++) {
        g_autofree char *member = g_strconcat(f->phase[i], "_ms", NULL);

        json_builder_set_member_name(b, member);
        json_builder_add_int_value(b, f->us[i] / 1000);
    }
    json_builder_set_member_name(b, "total_ms");
    json_builder_add_int_value(b, (g_get_monotonic_time() - f->start_us) / 1000);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

JsonNode *
carrel_timings_end(void)
{
    Stack *s = g_private_get(&stack_key);
    JsonNode *node = NULL;

    if (!s || s->depth == 0)
        return NULL;
    if (s->depth <= TIMINGS_DEPTH_MAX && s->frames[s->depth - 1].n > 0)
        node = frame_json(&s->frames[s->depth - 1]);
    s->depth--;
    return node;
}
