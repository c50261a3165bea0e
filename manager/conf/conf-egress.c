/* conf: one attempt of a session to reach the outside, as the egress log keeps it. */
#include "conf/conf.h"
#include "conf/conf-priv.h"

CarrelEgressRecord *
carrel_egress_record_new(void)
{
    return g_new0(CarrelEgressRecord, 1);
}

void
carrel_egress_record_free(CarrelEgressRecord *rec)
{
    if (!rec)
        return;
    g_free(rec->session_id);
    g_free(rec->name);
    g_free(rec->address);
    g_free(rec->protocol);
    g_free(rec->decision);
    g_free(rec);
}

JsonNode *
carrel_egress_record_to_json(const CarrelEgressRecord *rec)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GDateTime) when = g_date_time_new_from_unix_utc(rec->ts_us / G_USEC_PER_SEC);
    g_autofree char *base = when ? g_date_time_format(when, "%Y-%m-%dT%H:%M:%S") : NULL;
    g_autofree char *time =
        base ? g_strdup_printf("%s.%03dZ", base, (int)(rec->ts_us % G_USEC_PER_SEC / 1000)) : NULL;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "seq");
    json_builder_add_int_value(b, rec->seq);
    carrel_conf_add_optional_string(b, "time", time);
    carrel_conf_add_optional_string(b, "session", rec->session_id);
    carrel_conf_add_optional_string(b, "name", rec->name);
    carrel_conf_add_optional_string(b, "address", rec->address);
    json_builder_set_member_name(b, "port");
    json_builder_add_int_value(b, rec->port);
    carrel_conf_add_optional_string(b, "protocol", rec->protocol);
    carrel_conf_add_optional_string(b, "decision", rec->decision);
    json_builder_set_member_name(b, "bytes_out");
    json_builder_add_int_value(b, rec->bytes_out);
    json_builder_set_member_name(b, "bytes_in");
    json_builder_add_int_value(b, rec->bytes_in);
    json_builder_set_member_name(b, "duration_ms");
    json_builder_add_int_value(b, rec->duration_ms);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}
