/* [recording]: whether carreld records a session's screen, and how much of it it keeps. */
#include "policy/policy-priv.h"

void
carrel_policy_recording_init(CarrelPolicy *policy)
{
    policy->recording =
        (CarrelRecordingPolicy){.enabled = FALSE, .fps = 2, .max_mib = 256, .segment_s = 60};
}

/* [recording] key = an integer from min to max, into *ret_value when present. */
static gboolean
read_range(GKeyFile *kf, const char *key, guint min, guint max, guint *ret_value, GError **error)
{
    g_autoptr(GError) local = NULL;
    gint64 value;

    if (!g_key_file_has_key(kf, "recording", key, NULL))
        return TRUE;
    value = g_key_file_get_int64(kf, "recording", key, &local);
    if (local || value < min || value > max) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "[recording] %s must be an integer between %u and %u", key, min, max);
        return FALSE;
    }
    *ret_value = (guint)value;
    return TRUE;
}

gboolean
carrel_policy_recording_read(GKeyFile *kf, CarrelPolicy *policy, GError **error)
{
    CarrelRecordingPolicy *r = &policy->recording;
    g_autoptr(GError) local = NULL;

    if (g_key_file_has_key(kf, "recording", "enabled", NULL)) {
        r->enabled = g_key_file_get_boolean(kf, "recording", "enabled", &local);
        if (local) {
            g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                        "[recording] enabled must be true or false");
            return FALSE;
        }
    }
    return read_range(kf, "fps", 1, CARREL_RECORDING_MAX_FPS, &r->fps, error) &&
           read_range(kf, "max_mib", 1, CARREL_RECORDING_MAX_MIB, &r->max_mib, error) &&
           read_range(kf, "segment_s", CARREL_RECORDING_MIN_SEGMENT_S,
                      CARREL_RECORDING_MAX_SEGMENT_S, &r->segment_s, error);
}

const CarrelRecordingPolicy *
carrel_policy_recording(const CarrelPolicy *policy)
{
    return &policy->recording;
}

void
carrel_policy_recording_to_json(const CarrelPolicy *policy, JsonBuilder *b)
{
    const CarrelRecordingPolicy *r = &policy->recording;

    json_builder_set_member_name(b, "recording");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "enabled");
    json_builder_add_boolean_value(b, r->enabled);
    json_builder_set_member_name(b, "fps");
    json_builder_add_int_value(b, r->fps);
    json_builder_set_member_name(b, "max_mib");
    json_builder_add_int_value(b, r->max_mib);
    json_builder_set_member_name(b, "segment_s");
    json_builder_add_int_value(b, r->segment_s);
    json_builder_end_object(b);
}
