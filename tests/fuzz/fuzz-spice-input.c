/*
 * libFuzzer harness for the console proxy's reading of a person's input (a viewer's bytes,
 * untrusted): the inputs channel's message parser, fed in chunks whose sizes come from the
 * input (its first byte picks the header), and the recorder turning what it read into events,
 * with time passing as the input says.
 */
#include <stddef.h>
#include <stdint.h>

#include "api/api-console-priv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every event is one of the three, with an object of params; typed text stays bounded. */
static void
check_events(GPtrArray *events)
{
    for (guint i = 0; i < events->len; i++) {
        const CarrelPersonEvent *ev = g_ptr_array_index(events, i);

        if (!g_str_equal(ev->action, "click") && !g_str_equal(ev->action, "keys") &&
            !g_str_equal(ev->action, "type"))
            __builtin_trap();
        if (!ev->params || !JSON_NODE_HOLDS_OBJECT(ev->params))
            __builtin_trap();
        if (g_str_equal(ev->action, "type") &&
            strlen(json_object_get_string_member(json_node_get_object(ev->params), "text")) >
                CARREL_PERSON_TYPE_MAX)
            __builtin_trap();
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(CarrelSpiceInputParser) parser = NULL;
    g_autoptr(CarrelSpiceRecorder) rec = carrel_spice_recorder_new();
    g_autoptr(GPtrArray) events =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_person_event_free);
    gint64 now = 0;
    gsize at = 1;

    if (size == 0)
        return 0;
    parser = carrel_spice_input_parser_new(data[0] & 1);
    while (at < size) {
        g_autoptr(GArray) inputs = g_array_new(FALSE, FALSE, sizeof(CarrelSpiceInput));
        gsize chunk = MIN((gsize)(1 + data[at] % 32), size - at);

        carrel_spice_input_parser_feed(parser, data + at, chunk, inputs);
        for (guint i = 0; i < inputs->len; i++)
            carrel_spice_recorder_feed(rec, &g_array_index(inputs, CarrelSpiceInput, i), now,
                                       events);
        now += (gint64)(data[at] % 16) * 100000;
        carrel_spice_recorder_tick(rec, now, events);
        at += chunk;
    }
    carrel_spice_recorder_flush(rec, events);
    check_events(events);
    return 0;
}
