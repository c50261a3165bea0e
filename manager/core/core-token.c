/*
 * core: credentials. Tokens have an id, a unique name, a role, an optional expiry and a
 * revocation; only their sha256 is stored, so a leaked database leaks no usable token.
 */
#include <glib/gstdio.h>
#include <string.h>

#include "core/core-priv.h"

#define TOKEN_MAX_LEN 256
#define ADMIN_LABEL "admin"
/* Verified tokens kept at once; past this, all go (they are read again on their next use). */
#define TOKENS_KNOWN_MAX 256

static CarrelPrincipal *
principal_of(const CarrelToken *t)
{
    CarrelPrincipal *who = carrel_principal_new(t->id, t->label, t->role);

    who->policies = g_strdupv(t->policies);
    return who;
}

void
carrel_manager_tokens_init(CarrelManager *mgr)
{
    g_mutex_init(&mgr->tokens_lock);
    mgr->tokens_known =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)carrel_token_free);
}

void
carrel_manager_tokens_clear(CarrelManager *mgr)
{
    g_clear_pointer(&mgr->tokens_known, g_hash_table_unref);
    g_mutex_clear(&mgr->tokens_lock);
}

static CarrelToken *
token_copy(const CarrelToken *t)
{
    CarrelToken *copy = carrel_token_new();

    copy->id = g_strdup(t->id);
    copy->label = g_strdup(t->label);
    copy->role = t->role;
    copy->created_at = t->created_at;
    copy->last_used_at = t->last_used_at;
    copy->expires_at = t->expires_at;
    copy->revoked_at = t->revoked_at;
    copy->policies = g_strdupv(t->policies);
    return copy;
}

/* Moves the kept tokens to generation when it is newer: a write may have changed any row. */
static void
tokens_advance(CarrelManager *mgr, guint64 generation)
{
    if (generation <= mgr->tokens_generation)
        return;
    g_hash_table_remove_all(mgr->tokens_known);
    mgr->tokens_generation = generation;
}

/*
 * The token row of hash as the store holds it now, kept from an earlier read while nothing was
 * written since (generation, read before): revoking, rotating and every last-use write raise
 * the generation, so a kept row is never older than the store. NULL when not kept.
 */
static CarrelToken *
tokens_lookup(CarrelManager *mgr, const char *hash, guint64 generation)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->tokens_lock);
    const CarrelToken *t;

    tokens_advance(mgr, generation);
    if (generation != mgr->tokens_generation || !(t = g_hash_table_lookup(mgr->tokens_known, hash)))
        return NULL;
    return token_copy(t);
}

static void
tokens_keep(CarrelManager *mgr, const char *hash, guint64 generation, const CarrelToken *t)
{
    g_autoptr(GMutexLocker) locker G_GNUC_UNUSED = g_mutex_locker_new(&mgr->tokens_lock);

    tokens_advance(mgr, generation);
    if (generation != mgr->tokens_generation)
        return;
    if (g_hash_table_size(mgr->tokens_known) >= TOKENS_KNOWN_MAX)
        g_hash_table_remove_all(mgr->tokens_known);
    g_hash_table_replace(mgr->tokens_known, g_strdup(hash), token_copy(t));
}

/* A credential refused: UNAUTHORIZED, and a "denied" row for auth.login. */
static gboolean
refuse(CarrelManager *mgr, const CarrelToken *t, const char *why, GError **error)
{
    g_autoptr(GError) refusal = g_error_new_literal(CARREL_ERROR, CARREL_ERROR_UNAUTHORIZED, why);
    g_autoptr(CarrelAuditRecord) rec = carrel_audit_record_new();

    rec->ts_us = g_get_real_time();
    rec->principal_id = g_strdup(t ? t->id : "-");
    rec->principal_label = g_strdup(t ? t->label : "-");
    rec->role = g_strdup(t ? carrel_role_to_string(t->role) : "-");
    rec->operation = g_strdup(carrel_op_to_string(CARREL_OP_AUTH_LOGIN));
    rec->params_digest = carrel_audit_digest(NULL);
    rec->result = g_strdup("denied");
    rec->error_code = g_strdup(carrel_error_code_to_string(CARREL_ERROR_UNAUTHORIZED));
    carrel_manager_audit(mgr, rec);
    g_propagate_error(error, g_steal_pointer(&refusal));
    return FALSE;
}

/* TRUE when t may be used now; else a refusal naming why (never the secret). */
static gboolean
check_live(CarrelManager *mgr, const CarrelToken *t, GError **error)
{
    g_autofree char *why = NULL;

    if (t->revoked_at)
        why = g_strdup_printf("token '%s' was revoked", t->label);
    else if (!carrel_token_is_live(t, carrel_util_now()))
        why = g_strdup_printf("token '%s' expired", t->label);
    if (!why) {
        gint64 now = carrel_util_now();

        /* The store writes only then (t is its row as of now): no statement for the rest. */
        if (t->last_used_at < now - CARREL_STORE_TOKEN_TOUCH_S)
            (void)carrel_store_token_touch(mgr->store, t->id, now, NULL);
        return TRUE;
    }
    return refuse(mgr, t, why, error);
}

CarrelPrincipal *
carrel_manager_authenticate(CarrelManager *mgr, const char *token, GError **error)
{
    g_autofree char *hash = NULL;
    g_autoptr(CarrelToken) t = NULL;
    guint64 generation;

    if (!token || !*token || strlen(token) > TOKEN_MAX_LEN) {
        refuse(mgr, NULL, "invalid token", error);
        return NULL;
    }
    hash = carrel_util_sha256_string(token);
    /* First: the row read after it is at least as new as this generation. */
    generation = carrel_store_generation(mgr->store);
    t = tokens_lookup(mgr, hash, generation);
    if (!t) {
        t = carrel_store_token_by_hash(mgr->store, hash, error);
        if (!t) {
            if (error && *error)
                return NULL;
            refuse(mgr, NULL, "invalid token", error);
            return NULL;
        }
        tokens_keep(mgr, hash, generation, t);
    }
    /* Revocation and expiry are checked on every request, kept row or not. */
    return check_live(mgr, t, error) ? principal_of(t) : NULL;
}

CarrelPrincipal *
carrel_manager_principal(CarrelManager *mgr, const char *token_id, GError **error)
{
    g_autoptr(CarrelToken) t = carrel_store_token_get(mgr->store, token_id, NULL);

    if (!t) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNAUTHORIZED, "invalid token");
        return NULL;
    }
    return check_live(mgr, t, error) ? principal_of(t) : NULL;
}

void
carrel_manager_audit_refused_login(CarrelManager *mgr, const char *source, const GError *why)
{
    g_autoptr(CarrelAuditRecord) rec = carrel_audit_record_new();
    g_autoptr(JsonNode) params = carrel_conf_new_object_node();

    json_object_set_string_member(json_node_get_object(params), "source", source);
    rec->ts_us = g_get_real_time();
    rec->principal_id = g_strdup("-");
    rec->principal_label = g_strdup("-");
    rec->role = g_strdup("-");
    rec->operation = g_strdup(carrel_op_to_string(CARREL_OP_AUTH_LOGIN));
    rec->params_digest = carrel_audit_digest(params);
    rec->result = g_strdup("denied");
    rec->error_code = g_strdup(carrel_error_code_to_string(
        why && why->domain == CARREL_ERROR ? (CarrelErrorCode)why->code : CARREL_ERROR_LIMIT));
    carrel_manager_audit(mgr, rec);
}

static gboolean
insert_token(CarrelManager *mgr, const char *secret, CarrelRole role, const char *label,
             gint64 ttl_s, char **policies, CarrelToken **ret_token, GError **error)
{
    g_autoptr(CarrelToken) t = carrel_token_new();
    g_autofree char *hash = carrel_util_sha256_string(secret);

    t->id = carrel_util_new_id("t-");
    t->label = g_strdup(label);
    t->role = role;
    t->created_at = carrel_util_now();
    t->expires_at = ttl_s ? t->created_at + ttl_s : 0;
    t->policies = g_strdupv(policies);
    if (!carrel_store_token_insert(mgr->store, t, hash, error))
        return FALSE;
    if (ret_token)
        *ret_token = g_steal_pointer(&t);
    return TRUE;
}

gboolean
carrel_manager_ensure_admin_token(CarrelManager *mgr, const char *token, GError **error)
{
    g_autofree char *hash = carrel_util_sha256_string(token);
    g_autoptr(CarrelToken) known = carrel_store_token_by_hash(mgr->store, hash, NULL);
    g_autoptr(CarrelToken) admin = NULL;

    if (known)
        return TRUE;
    /* The file is the authority: whoever can write it is root on this host anyway. */
    admin = carrel_store_token_get(mgr->store, ADMIN_LABEL, NULL);
    if (admin)
        return carrel_store_token_set_hash(mgr->store, admin->id, hash, error);
    return insert_token(mgr, token, CARREL_ROLE_ADMIN, ADMIN_LABEL, 0, NULL, NULL, error);
}

static char *
create_token(CarrelManager *mgr, const char *role_name, const char *name, gint64 ttl_s,
             char **policies, CarrelToken **ret_token, GError **error)
{
    CarrelRole role = carrel_role_from_string(role_name);
    g_autofree char *secret = NULL;

    if (role != CARREL_ROLE_ADMIN && role != CARREL_ROLE_AGENT && role != CARREL_ROLE_REVIEWER) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a token's role is admin, agent or reviewer");
        return NULL;
    }
    if (!carrel_token_check_label(name, error))
        return NULL;
    if (ttl_s < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "an expiry must be positive");
        return NULL;
    }
    /* Only what makes sessions can be limited; a reviewer's or admin's token is not. */
    if (policies && role != CARREL_ROLE_AGENT) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "only agent tokens are limited to policies");
        return NULL;
    }
    if (!carrel_manager_check_policy_names(mgr, policies, error))
        return NULL;
    secret = carrel_util_new_token();
    if (!insert_token(mgr, secret, role, name, ttl_s, policies, ret_token, error))
        return NULL;
    return g_steal_pointer(&secret);
}

char *
carrel_manager_token_create(CarrelManager *mgr, const CarrelPrincipal *who, const char *role,
                            const char *name, gint64 ttl_s, char **policies,
                            CarrelToken **ret_token, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    JsonNode *params = carrel_conf_new_object_node();
    char *secret;

    /* Name and role only: the secret never reaches the audit log, not even digested. */
    json_object_set_string_member(json_node_get_object(params), "name", name ? name : "");
    json_object_set_string_member(json_node_get_object(params), "role", role ? role : "");
    if (policies) {
        JsonArray *list = json_array_new();
        for (guint i = 0; policies[i]; i++)
            json_array_add_string_element(list, policies[i]);
        json_object_set_array_member(json_node_get_object(params), "policies", list);
    }
    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_TOKEN_CREATE, NULL, params, error))
        return NULL;
    secret = create_token(mgr, role, name, ttl_s, policies, ret_token, &local);
    return carrel_door_finish(&door, secret, &local, error);
}

GPtrArray *
carrel_manager_token_list(CarrelManager *mgr, const CarrelPrincipal *who, GError **error)
{
    g_auto(CarrelDoor) door = {0};

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_TOKEN_LIST, NULL, NULL, error))
        return NULL;
    return carrel_store_token_list(mgr->store, error);
}

static CarrelToken *
revoke_named(CarrelManager *mgr, const char *name, GError **error)
{
    g_autoptr(CarrelToken) t = carrel_store_token_get(mgr->store, name, error);

    if (!t || !carrel_store_token_revoke(mgr->store, t->id, carrel_util_now(), error))
        return NULL;
    return carrel_store_token_get(mgr->store, t->id, error);
}

CarrelToken *
carrel_manager_token_revoke(CarrelManager *mgr, const CarrelPrincipal *who, const char *name,
                            GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;
    JsonNode *params = carrel_conf_new_object_node();

    json_object_set_string_member(json_node_get_object(params), "name", name ? name : "");
    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_TOKEN_REVOKE, NULL, params, error))
        return NULL;
    return carrel_door_finish(&door, revoke_named(mgr, name, &local), &local, error);
}

static char *
rotate_admin(CarrelManager *mgr, GError **error)
{
    g_autoptr(CarrelToken) admin = carrel_store_token_get(mgr->store, ADMIN_LABEL, error);
    g_autofree char *secret = carrel_util_new_token();
    g_autofree char *hash = carrel_util_sha256_string(secret);
    g_autofree char *path = g_build_filename(mgr->state_dir, "admin.token", NULL);

    /* File first: a failed write leaves the old token working, never none. */
    if (!admin || !carrel_util_write_file(path, secret, -1, 0600, error) ||
        !carrel_store_token_set_hash(mgr->store, admin->id, hash, error))
        return NULL;
    return g_steal_pointer(&secret);
}

char *
carrel_manager_token_rotate_admin(CarrelManager *mgr, const CarrelPrincipal *who, GError **error)
{
    g_auto(CarrelDoor) door = {0};
    g_autoptr(GError) local = NULL;

    if (!carrel_door_enter(&door, mgr, who, CARREL_OP_TOKEN_ROTATE, NULL, NULL, error))
        return NULL;
    return carrel_door_finish(&door, rotate_admin(mgr, &local), &local, error);
}
