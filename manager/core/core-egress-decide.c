/*
 * What sessions may reach, asked by the egress proxy for every request: the session's policy
 * decides, and for a destination on "ask" a person does, through an approval (the connection
 * waits up to the policy's ask_timeout_s). What happened lands in the egress log and on the
 * timeline. Everything here runs in carreld's main loop.
 */
#include <string.h>

#include "core/core-priv.h"

#define ASK_ACTION "network.egress"
#define ASK_POLL_MS 250
#define EGRESS_LIST_MAX 10000

typedef struct {
    CarrelEgressQuery *query;
    char *approval_id;
    char *session_id; /* for its policy's secrets once approved */
    gint64 deadline_us;
} PendingAsk;

static void
pending_ask_free(PendingAsk *ask)
{
    if (ask->query)
        carrel_egress_query_answer(ask->query, FALSE, "ask-timeout");
    g_free(ask->approval_id);
    g_free(ask->session_id);
    g_free(ask);
}

/* The index of a secret header in the proxy's list (squid.conf's carrel_hdr_I), or -1. */
static int
header_index(CarrelManager *mgr, const char *header)
{
    for (guint i = 0; mgr->secret_headers && mgr->secret_headers[i]; i++)
        if (g_ascii_strcasecmp(mgr->secret_headers[i], header) == 0)
            return (int)i;
    return -1;
}

/*
 * An allowed request, with what a secret of the policy adds for its destination: the TLS
 * connection is decrypted (carrel_bump), and each request inside it gets the header. Never over
 * plain HTTP: a credential is not sent in the clear.
 */
static void
answer_allowed(CarrelManager *mgr, CarrelEgressQuery *q, const CarrelPolicy *policy,
               const char *word)
{
    const CarrelPolicySecret *secret =
        carrel_policy_secret_for(policy, carrel_egress_query_name(q), carrel_egress_query_port(q));
    const char *value = secret ? carrel_manager_secret_value(mgr, policy, secret) : NULL;
    int index = secret ? header_index(mgr, carrel_policy_secret_header(secret)) : -1;
    g_autofree char *key = NULL;
    g_autofree char *header = NULL;

    if (!value || index < 0 || !g_str_equal(carrel_egress_query_protocol(q), "tls")) {
        carrel_egress_query_answer(q, TRUE, word);
        return;
    }
    if (carrel_egress_query_is_connect(q)) {
        const char *notes[] = {"carrel_bump", "yes", NULL};
        carrel_egress_query_answer_notes(q, TRUE, word, notes);
        return;
    }
    key = g_strdup_printf("carrel_hdr_%d", index);
    header = carrel_policy_secret_header_value(secret, value);
    {
        const char *notes[] = {key, header, NULL};
        carrel_egress_query_answer_notes(q, TRUE, word, notes);
    }
    explicit_bzero(header, strlen(header));
}

/* The session on the egress network with this address, or NULL. */
static CarrelSession *
session_at(CarrelManager *mgr, const char *address)
{
    g_autofree char *id = NULL;

    g_mutex_lock(&mgr->egress_lock);
    id = g_strdup(g_hash_table_lookup(mgr->egress_sources, address));
    g_mutex_unlock(&mgr->egress_lock);
    return id ? carrel_store_session_get(mgr->store, id, NULL) : NULL;
}

static gboolean
poll_asks(gpointer data)
{
    CarrelManager *mgr = data;
    gint64 now = g_get_real_time();

    for (guint i = mgr->egress_asks->len; i > 0; i--) {
        PendingAsk *ask = g_ptr_array_index(mgr->egress_asks, i - 1);
        g_autoptr(CarrelApproval) a = carrel_store_approval_get(mgr->store, ask->approval_id, NULL);
        gboolean decided = a && !g_str_equal(a->state, "pending");

        if (!decided && now < ask->deadline_us)
            continue;
        if (decided && g_str_equal(a->state, "approved")) {
            g_autoptr(CarrelSession) s =
                carrel_store_session_get(mgr->store, ask->session_id, NULL);
            const CarrelPolicy *policy = s ? carrel_manager_session_policy(mgr, s, NULL) : NULL;
            if (policy)
                answer_allowed(mgr, g_steal_pointer(&ask->query), policy, "ask-allow");
        }
        /* Denied (or the session and its policy gone): refused. */
        if (decided && ask->query)
            carrel_egress_query_answer(g_steal_pointer(&ask->query), FALSE, "ask-deny");
        /* Unanswered past the deadline: refused now (the approval stays for a later try). */
        g_ptr_array_remove_index(mgr->egress_asks, i - 1);
    }
    if (mgr->egress_asks->len > 0)
        return G_SOURCE_CONTINUE;
    mgr->egress_ask_timer = 0;
    return G_SOURCE_REMOVE;
}

static JsonNode *
ask_detail(const CarrelSession *s, const char *destination, CarrelEgressQuery *q)
{
    JsonNode *node = carrel_conf_new_object_node();
    JsonObject *obj = json_node_get_object(node);

    json_object_set_string_member(obj, "destination", destination);
    json_object_set_string_member(obj, "name", carrel_egress_query_name(q));
    json_object_set_int_member(obj, "port", carrel_egress_query_port(q));
    json_object_set_string_member(obj, "protocol", carrel_egress_query_protocol(q));
    json_object_set_string_member(obj, "owner", s->owner_label ? s->owner_label : "");
    return node;
}

/* A destination on "ask": the person's decision if there is one, else wait for it. */
static void
ask(CarrelManager *mgr, CarrelEgressQuery *q, const CarrelSession *s, const CarrelPolicy *policy)
{
    g_autofree char *destination =
        g_strdup_printf("%s:%u", carrel_egress_query_name(q), carrel_egress_query_port(q));
    g_autoptr(CarrelApproval) a =
        carrel_store_approval_find(mgr->store, s->id, ASK_ACTION, destination, NULL);
    PendingAsk *pending;

    if (a && g_str_equal(a->state, "approved")) {
        answer_allowed(mgr, q, policy, "ask-allow");
        return;
    }
    if (a && g_str_equal(a->state, "denied")) {
        carrel_egress_query_answer(q, FALSE, "ask-deny");
        return;
    }
    if (!a) {
        g_autoptr(JsonNode) detail = ask_detail(s, destination, q);
        g_autoptr(GError) error = NULL;

        a = carrel_manager_approval_request(mgr, carrel_principal_daemon(), s->id, ASK_ACTION,
                                            detail, &error);
        if (!a) {
            g_warning("egress: no approval for %s of %s: %s", destination, s->id, error->message);
            carrel_egress_query_answer(q, FALSE, "deny");
            return;
        }
    }
    pending = g_new0(PendingAsk, 1);
    pending->query = q;
    pending->approval_id = g_strdup(a->id);
    pending->session_id = g_strdup(s->id);
    pending->deadline_us =
        g_get_real_time() + (gint64)carrel_policy_ask_timeout_s(policy) * G_USEC_PER_SEC;
    g_ptr_array_add(mgr->egress_asks, pending);
    if (!mgr->egress_ask_timer)
        mgr->egress_ask_timer = g_timeout_add(ASK_POLL_MS, poll_asks, mgr);
}

void
carrel_manager_egress_decide(CarrelEgressQuery *q, gpointer data)
{
    CarrelManager *mgr = data;
    g_autoptr(CarrelSession) s = session_at(mgr, carrel_egress_query_source(q));
    const CarrelPolicy *policy = s ? carrel_manager_session_policy(mgr, s, NULL) : NULL;
    const char *name = carrel_egress_query_name(q);

    if (!policy) {
        carrel_egress_query_answer(q, FALSE, "deny");
        return;
    }
    /* An address instead of a name never passes, whatever the policy. */
    if (g_hostname_is_ip_address(name)) {
        carrel_egress_query_answer(q, FALSE, "deny-raw-ip");
        return;
    }
    /* Decided by its SNI, a decrypted connection carries requests for that server only. */
    if (carrel_egress_query_host_mismatch(q)) {
        carrel_egress_query_answer(q, FALSE, "deny-host");
        return;
    }
    switch (carrel_policy_egress(policy, name, carrel_egress_query_port(q))) {
    case CARREL_EGRESS_ALLOW:
        answer_allowed(mgr, q, policy, "allow");
        return;
    case CARREL_EGRESS_ASK:
        ask(mgr, q, s, policy);
        return;
    case CARREL_EGRESS_DENY:
    default:
        carrel_egress_query_answer(q, FALSE, "deny");
        return;
    }
}

void
carrel_manager_egress_record(const char *source, const CarrelEgressRecord *rec, gpointer data)
{
    CarrelManager *mgr = data;
    g_autoptr(CarrelSession) s = session_at(mgr, source);
    g_autoptr(CarrelEgressRecord) copy = NULL;
    g_autoptr(JsonNode) params = NULL;
    g_autoptr(GError) error = NULL;

    /* Counted whatever became of the session: the path refused it either way. */
    carrel_manager_count_egress(mgr, rec->decision);
    if (!s)
        return;
    copy = carrel_egress_record_new();
    *copy = *rec;
    copy->session_id = g_strdup(s->id);
    copy->name = g_strdup(rec->name);
    copy->address = g_strdup(rec->address);
    copy->protocol = g_strdup(rec->protocol);
    copy->decision = g_strdup(rec->decision);
    if (!carrel_store_egress_add(mgr->store, copy, &error)) {
        g_warning("egress log of %s: %s", s->id, error->message);
        return;
    }
    params = carrel_egress_record_to_json(copy);
    carrel_manager_record_logged(mgr, s->id, carrel_principal_daemon(), "egress", copy->decision,
                                 params, NULL, NULL, 0);
}

void
carrel_manager_egress_asks_init(CarrelManager *mgr)
{
    mgr->egress_asks = g_ptr_array_new_with_free_func((GDestroyNotify)pending_ask_free);
}

GPtrArray *
carrel_manager_session_egress(CarrelManager *mgr, const CarrelPrincipal *who,
                              const char *id_or_name, gint64 after_seq, guint limit, GError **error)
{
    g_auto(CarrelDoor) door = {0};

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_SESSION_READ, id_or_name, NULL, error))
        return NULL;
    if (limit == 0 || limit > EGRESS_LIST_MAX) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "limit must be between 1 and %d",
                    EGRESS_LIST_MAX);
        return NULL;
    }
    return carrel_store_egress_list(mgr->store, door.session->id, MAX(after_seq, 0), limit, error);
}
