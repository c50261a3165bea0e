/* store: helpers shared by the module's own files (and its unit test); not for other modules. */
#pragma once

#ifndef CARREL_STORE_PRIV_H_ALLOW
#error "store-priv.h is for the store module and its tests only"
#endif

#include <sqlite3.h>

#include "store/store.h"

G_BEGIN_DECLS

/* "CRL1": marks the file as carrel's, so another program's database is never migrated. */
#define CARREL_STORE_APPLICATION_ID 0x43524c31

struct _CarrelStore {
    sqlite3 *db;
    GMutex lock; /* held by every public call: one connection serves every daemon thread */
    int version;
    char *dir;                     /* the database's folder; NULL in memory */
    CarrelStoreFullFunc full_func; /* see carrel_store_set_full_func */
    gpointer full_data;
    GMutex stmt_lock;  /* guards stmts (a statement may be released after lock is) */
    GHashTable *stmts; /* SQL text -> GPtrArray of idle prepared statements */
};

/*
 * Gives a statement of carrel_store_prepare back: reset and kept for the next prepare of the
 * same SQL (parsing SQL was a third of a session list's time), or finalized when enough are
 * kept already. g_autoptr(sqlite3_stmt) calls it.
 */
void carrel_store_stmt_release(sqlite3_stmt *stmt);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(sqlite3_stmt, carrel_store_stmt_release)

/* Messages for constraint violations that callers can name better than sqlite can. */
typedef struct {
    const char *unique;      /* a UNIQUE index other than the primary key, or NULL */
    const char *primary_key; /* the PRIMARY KEY, or NULL */
} CarrelStoreConflict;

/*
 * The one place where a sqlite result code becomes a GError. UNIQUE and PRIMARY KEY violations
 * are CARREL_ERROR_EXISTS (with conflict's message when given), trigger aborts
 * CARREL_ERROR_WRONG_STATE, anything else CARREL_ERROR_STORE with sqlite's message.
 */
void carrel_store_set_error(CarrelStore *store, int rc, const CarrelStoreConflict *conflict,
                            const char *context, GError **error);

/* Prepares one statement (or reuses one that was released); NULL with an error on failure. */
sqlite3_stmt *carrel_store_prepare(CarrelStore *store, const char *sql, GError **error);

/* Binds text (NULL binds SQL NULL) or an integer; FALSE with an error on failure. */
gboolean carrel_store_bind_text(CarrelStore *store, sqlite3_stmt *stmt, int index,
                                const char *value, GError **error);
/* 0 is bound as NULL (no limit, no default); read back as 0 by sqlite3_column_int64. */
gboolean carrel_store_bind_int_or_null(CarrelStore *store, sqlite3_stmt *stmt, int index,
                                       gint64 value, GError **error);
gboolean carrel_store_bind_int64(CarrelStore *store, sqlite3_stmt *stmt, int index, gint64 value,
                                 GError **error);

/* Steps a statement that returns no rows (INSERT, UPDATE, DELETE). */
gboolean carrel_store_step_done(CarrelStore *store, sqlite3_stmt *stmt,
                                const CarrelStoreConflict *conflict, const char *context,
                                GError **error);

/*
 * Steps a query: TRUE with *ret_row TRUE on a row, TRUE with *ret_row FALSE when done,
 * FALSE with an error otherwise.
 */
gboolean carrel_store_step_row(CarrelStore *store, sqlite3_stmt *stmt, const char *context,
                               gboolean *ret_row, GError **error);

/* Runs a query that yields one integer (COUNT, MAX, a PRAGMA); NULL reads as 0. */
gboolean carrel_store_query_int64(CarrelStore *store, sqlite3_stmt *stmt, const char *context,
                                  gint64 *ret_value, GError **error);

/* Runs static SQL (no values: those are always bound), possibly several statements. */
gboolean carrel_store_exec(CarrelStore *store, const char *sql, GError **error);

/* BEGIN IMMEDIATE / COMMIT / ROLLBACK (rollback never fails the caller). */
gboolean carrel_store_begin(CarrelStore *store, GError **error);
gboolean carrel_store_commit(CarrelStore *store, GError **error);
void carrel_store_rollback(CarrelStore *store);

/* A text column as a new string (NULL stays NULL). */
char *carrel_store_column_dup(sqlite3_stmt *stmt, int column);

/* Reads PRAGMA user_version. */
gboolean carrel_store_read_version(CarrelStore *store, int *ret_version, GError **error);

/* Applies every migration above the current version up to target, each in its own transaction. */
gboolean carrel_store_migrate(CarrelStore *store, int target, GError **error);

/*
 * Like carrel_store_open, but migrates only up to target_version (tests of migrations use it to
 * build a database at an older schema). target_version -1 = the latest.
 */
CarrelStore *carrel_store_open_full(const char *path, int target_version, GError **error);

/* Value of a PRAGMA that answers with text (e.g. "journal_mode"), for tests and checks. */
char *carrel_store_pragma_text(CarrelStore *store, const char *pragma, GError **error);

/* Where an audit record lands in the chain; it becomes the record's once its row commits. */
typedef struct {
    gint64 seq;
    char *prev_hash;
    char *hash;
} CarrelAuditLink;

void carrel_audit_link_clear(CarrelAuditLink *link);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(CarrelAuditLink, carrel_audit_link_clear)

/*
 * Checks rec, chains it to the last row (or CARREL_AUDIT_GENESIS) and inserts it, filling
 * ret_link. The caller holds the store's lock and has begun a transaction, so no other row
 * can take the same place in the chain; rec itself is unchanged until
 * carrel_audit_link_settle, after the commit.
 */
gboolean carrel_store_audit_insert(CarrelStore *store, const CarrelAuditRecord *rec,
                                   CarrelAuditLink *ret_link, GError **error);
/* Moves link's seq and hashes into rec. */
void carrel_audit_link_settle(CarrelAuditLink *link, CarrelAuditRecord *rec);

G_END_DECLS
