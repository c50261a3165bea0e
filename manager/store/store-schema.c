#define CARREL_STORE_PRIV_H_ALLOW
#include "store/store-priv.h"

/*
 * Schema migrations, applied in order, each in its own transaction, and tracked with
 * PRAGMA user_version (the index in this array + 1). Append a new entry for every change;
 * never edit one that has shipped. A migration that rebuilds a table (SQLite's 12-step
 * ALTER recipe) sets rebuilds_tables: foreign keys are then off while it runs and checked
 * with foreign_key_check before it commits.
 *
 * Templates and sessions: sessions name their template by (template_name, template_version)
 * without a FOREIGN KEY. A foreign key would either block deleting a template forever
 * (RESTRICT, because destroyed session rows are kept as history) or erase that history
 * (SET NULL / CASCADE). Triggers enforce the rule that matters instead: a session that is not
 * destroyed always refers to an existing template, and a template used by such a session
 * cannot be deleted. Destroyed rows keep the name and version they ran, and
 * template_versions makes sure a deleted version number is never handed out again.
 *
 * detail columns hold JSON text written by json-glib; there is no json_valid() CHECK because
 * the connection runs with trusted_schema=OFF, under which sqlite 3.40 refuses json_valid in
 * the schema (the hardening is worth more than a redundant check).
 */
typedef struct {
    const char *sql;
    gboolean rebuilds_tables;
} StoreMigration;

static const StoreMigration migrations[] = {
    /* v1 */
    {"CREATE TABLE templates ("
     "  name TEXT NOT NULL,"
     "  version INTEGER NOT NULL CHECK (version > 0),"
     "  sha256 TEXT NOT NULL,"
     "  format TEXT NOT NULL,"
     "  size_bytes INTEGER NOT NULL CHECK (size_bytes >= 0),"
     "  virtual_size_bytes INTEGER NOT NULL CHECK (virtual_size_bytes >= 0),"
     "  boot TEXT NOT NULL,"
     "  dir TEXT NOT NULL,"
     "  disk_path TEXT NOT NULL,"
     "  kernel_path TEXT,"
     "  initrd_path TEXT,"
     "  cmdline TEXT,"
     "  recipe_hash TEXT,"
     "  created_at INTEGER NOT NULL,"
     "  PRIMARY KEY (name, version)"
     ") STRICT;"
     /* Highest version ever given to a name, so numbers are not reused after a delete. */
     "CREATE TABLE template_versions ("
     "  name TEXT PRIMARY KEY NOT NULL,"
     "  last_version INTEGER NOT NULL"
     ") STRICT;"
     "CREATE TABLE sessions ("
     "  id TEXT PRIMARY KEY NOT NULL,"
     "  name TEXT NOT NULL,"
     "  template_name TEXT NOT NULL,"
     "  template_version INTEGER NOT NULL,"
     "  state TEXT NOT NULL,"
     "  state_reason TEXT,"
     "  vcpus INTEGER NOT NULL CHECK (vcpus > 0),"
     "  memory_mib INTEGER NOT NULL CHECK (memory_mib > 0),"
     "  dir TEXT NOT NULL,"
     "  overlay_path TEXT NOT NULL,"
     "  created_at INTEGER NOT NULL,"
     "  updated_at INTEGER NOT NULL"
     ") STRICT;"
     "CREATE UNIQUE INDEX sessions_live_name ON sessions (name) WHERE state != 'destroyed';"
     "CREATE INDEX sessions_template ON sessions (template_name, template_version);"
     "CREATE INDEX sessions_created ON sessions (created_at);"
     "CREATE TRIGGER sessions_template_insert BEFORE INSERT ON sessions"
     "  WHEN NEW.state != 'destroyed' AND NOT EXISTS (SELECT 1 FROM templates"
     "    WHERE name = NEW.template_name AND version = NEW.template_version)"
     "  BEGIN SELECT RAISE(ABORT, 'the session''s template does not exist'); END;"
     "CREATE TRIGGER sessions_template_update"
     "  BEFORE UPDATE OF state, template_name, template_version ON sessions"
     "  WHEN NEW.state != 'destroyed' AND NOT EXISTS (SELECT 1 FROM templates"
     "    WHERE name = NEW.template_name AND version = NEW.template_version)"
     "  BEGIN SELECT RAISE(ABORT, 'the session''s template does not exist'); END;"
     "CREATE TRIGGER templates_in_use BEFORE DELETE ON templates"
     "  WHEN EXISTS (SELECT 1 FROM sessions WHERE template_name = OLD.name"
     "    AND template_version = OLD.version AND state != 'destroyed')"
     "  BEGIN SELECT RAISE(ABORT, 'the template is used by sessions'); END;"
     "CREATE TABLE tokens ("
     "  hash TEXT PRIMARY KEY NOT NULL,"
     "  role TEXT NOT NULL,"
     "  label TEXT,"
     "  created_at INTEGER NOT NULL"
     ") STRICT;"
     /* Checked at commit, so deleting a session removes a whole chain in any order. */
     "CREATE TABLE snapshots ("
     "  id TEXT PRIMARY KEY NOT NULL,"
     "  session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,"
     "  name TEXT NOT NULL,"
     "  parent TEXT REFERENCES snapshots (id) DEFERRABLE INITIALLY DEFERRED,"
     "  overlay_path TEXT NOT NULL,"
     "  memory_path TEXT,"
     "  created_at INTEGER NOT NULL,"
     "  UNIQUE (session_id, name)"
     ") STRICT;"
     "CREATE TABLE artifacts ("
     "  id TEXT PRIMARY KEY NOT NULL,"
     "  session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,"
     "  guest_path TEXT NOT NULL,"
     "  host_path TEXT NOT NULL,"
     "  sha256 TEXT NOT NULL,"
     "  size INTEGER NOT NULL CHECK (size >= 0),"
     "  mode INTEGER,"
     "  created_at INTEGER NOT NULL"
     ") STRICT;"
     "CREATE INDEX artifacts_session ON artifacts (session_id);"
     /* A hash chain: each row's hash covers prev_hash, so rows are only ever appended. */
     "CREATE TABLE audit ("
     "  seq INTEGER PRIMARY KEY,"
     "  ts INTEGER NOT NULL,"
     "  actor TEXT NOT NULL,"
     "  action TEXT NOT NULL,"
     "  subject TEXT,"
     "  detail TEXT,"
     "  prev_hash TEXT NOT NULL,"
     "  hash TEXT NOT NULL UNIQUE"
     ") STRICT;"
     "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit"
     "  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;"
     "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit"
     "  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;"
     /* AUTOINCREMENT: clients follow events by seq, which must never go back. */
     "CREATE TABLE events ("
     "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
     "  session_id TEXT REFERENCES sessions (id) ON DELETE CASCADE,"
     "  ts INTEGER NOT NULL,"
     "  actor TEXT,"
     "  kind TEXT NOT NULL,"
     "  detail TEXT"
     ") STRICT;"
     "CREATE INDEX events_session ON events (session_id, seq);",
     FALSE},
    /* v2: warm states (a saved desktop per template version) and how a session started. */
    {"CREATE TABLE warm_states ("
     "  template_name TEXT NOT NULL,"
     "  template_version INTEGER NOT NULL,"
     "  memory_path TEXT NOT NULL,"
     "  disk_path TEXT NOT NULL,"
     "  vcpus INTEGER NOT NULL CHECK (vcpus > 0),"
     "  memory_mib INTEGER NOT NULL CHECK (memory_mib > 0),"
     "  memory_bytes INTEGER NOT NULL CHECK (memory_bytes >= 0),"
     "  created_at INTEGER NOT NULL,"
     "  PRIMARY KEY (template_name, template_version),"
     "  FOREIGN KEY (template_name, template_version) REFERENCES templates (name, version)"
     "    ON DELETE CASCADE"
     ") STRICT;"
     "ALTER TABLE sessions ADD COLUMN origin TEXT NOT NULL DEFAULT 'cold'"
     "  CHECK (origin IN ('cold', 'warm'));",
     FALSE},
    /* v3: extractions and their artifacts (v1's artifacts table was never written), and the
     * paths a session's exit collects. */
    {"DROP TABLE artifacts;"
     "CREATE TABLE extractions ("
     "  id TEXT PRIMARY KEY NOT NULL,"
     "  session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,"
     "  reason TEXT NOT NULL,"
     "  source TEXT NOT NULL CHECK (source IN ('agent', 'disk')),"
     "  dir TEXT NOT NULL,"
     "  detail TEXT NOT NULL,"
     "  created_at INTEGER NOT NULL"
     ") STRICT;"
     "CREATE INDEX extractions_session ON extractions (session_id, created_at);"
     "CREATE TABLE artifacts ("
     "  id TEXT PRIMARY KEY NOT NULL,"
     "  extraction_id TEXT NOT NULL REFERENCES extractions (id) ON DELETE CASCADE,"
     "  session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,"
     "  seq INTEGER NOT NULL,"
     "  guest_path TEXT NOT NULL,"
     "  path TEXT,"
     "  type TEXT NOT NULL CHECK (type IN ('file', 'dir', 'symlink', 'hardlink', 'other')),"
     "  size INTEGER NOT NULL CHECK (size >= 0),"
     "  mode INTEGER NOT NULL,"
     "  uid INTEGER NOT NULL,"
     "  gid INTEGER NOT NULL,"
     "  mtime INTEGER NOT NULL,"
     "  sha256 TEXT,"
     "  link_target TEXT,"
     "  skipped TEXT,"
     "  created_at INTEGER NOT NULL,"
     "  UNIQUE (extraction_id, seq)"
     ") STRICT;"
     "CREATE INDEX artifacts_session ON artifacts (session_id);"
     "ALTER TABLE sessions ADD COLUMN exit_paths TEXT;",
     FALSE},
    /* v4: the snapshot a session's disk and memory descend from; the session a fork came from
     * (its disk stands on that session's snapshot layers). */
    {"ALTER TABLE sessions ADD COLUMN head_snapshot TEXT;"
     "ALTER TABLE sessions ADD COLUMN origin_session TEXT;"
     "CREATE INDEX sessions_origin ON sessions (origin_session) WHERE origin_session IS NOT NULL;"
     /* Time limits, kept here so they survive restarts. */
     "ALTER TABLE sessions ADD COLUMN expires_at INTEGER;"
     "ALTER TABLE sessions ADD COLUMN idle_timeout_s INTEGER;"
     "ALTER TABLE sessions ADD COLUMN expiry_action TEXT;"
     /* The MAC of the session's NIC (NULL for sessions made before NICs). */
     "ALTER TABLE sessions ADD COLUMN mac TEXT"
     "  CHECK (mac IS NULL OR (length(mac) = 17 AND mac NOT GLOB '*[^0-9a-f:]*'));"
     /* Warm pools: members are sessions with pool set (the template's name) until a create
      * takes one; from_pool says a session came from one. */
     "ALTER TABLE sessions ADD COLUMN pool TEXT;"
     "ALTER TABLE sessions ADD COLUMN from_pool INTEGER NOT NULL DEFAULT 0;"
     "CREATE TABLE pools ("
     "  template_name TEXT PRIMARY KEY NOT NULL,"
     "  size INTEGER NOT NULL CHECK (size >= 0)"
     ") STRICT;",
     FALSE},
    /* v5: the machine a warm state was saved from: an older one is redone, never restored. */
    {"ALTER TABLE warm_states ADD COLUMN machine_revision INTEGER NOT NULL DEFAULT 1;", FALSE},
    /* v6: actions waiting for a reviewer, and who holds a session's input (the control lease):
     * both survive restarts, so a human's hold is never lost to one. */
    {"CREATE TABLE approvals ("
     "  id TEXT PRIMARY KEY NOT NULL,"
     "  session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,"
     "  action TEXT NOT NULL,"
     "  detail TEXT NOT NULL,"
     "  requested_by TEXT NOT NULL,"
     "  requested_at INTEGER NOT NULL,"
     "  state TEXT NOT NULL DEFAULT 'pending'"
     "    CHECK (state IN ('pending', 'approved', 'denied')),"
     "  decided_by TEXT,"
     "  decided_at INTEGER,"
     "  reason TEXT"
     ") STRICT;"
     "CREATE INDEX approvals_state ON approvals (state, requested_at);"
     "CREATE TABLE leases ("
     "  session_id TEXT PRIMARY KEY NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,"
     "  holder TEXT NOT NULL,"
     "  since INTEGER NOT NULL"
     ") STRICT;",
     FALSE},
    /* v7: principals. Tokens get an id (what sessions, leases, events and the audit log name
     * them by, so a rotated secret keeps its history) and a unique label, expiry and
     * revocation; sessions an owner; leases and events the id beside the label. */
    {"CREATE TABLE tokens_v7 ("
     "  id TEXT PRIMARY KEY NOT NULL,"
     "  hash TEXT NOT NULL UNIQUE,"
     "  role TEXT NOT NULL,"
     "  label TEXT NOT NULL UNIQUE,"
     "  created_at INTEGER NOT NULL,"
     "  last_used_at INTEGER NOT NULL DEFAULT 0,"
     "  expires_at INTEGER NOT NULL DEFAULT 0,"
     "  revoked_at INTEGER NOT NULL DEFAULT 0"
     ") STRICT;"
     /*
      * Old labels were optional and not unique. Each name's first token (oldest) keeps it;
      * the others get name-2, name-3 ... in created_at order, skipping any that another token
      * already has as its own name (else one odd label would fail the upgrade). A name with m
      * tokens draws from N candidates (N = all tokens), at most N - m of them taken by other
      * names, so there are always enough; and name-k never equals other-j (the text after
      * the last '-' is k), so the new labels are unique too.
      */
     "INSERT INTO tokens_v7 (id, hash, role, label, created_at)"
     "  WITH RECURSIVE"
     "  old AS (SELECT rowid AS rid, hash, role, created_at, coalesce(label, role) AS name,"
     "    row_number() OVER (PARTITION BY coalesce(label, role) ORDER BY created_at, rowid)"
     "      AS n"
     "    FROM tokens),"
     "  candidate (name, k) AS (SELECT name, 2 FROM old WHERE n = 2"
     "    UNION ALL SELECT name, k + 1 FROM candidate"
     "      WHERE k <= (SELECT count(*) FROM tokens)),"
     "  free AS (SELECT name, name || '-' || k AS label,"
     "    1 + row_number() OVER (PARTITION BY name ORDER BY k) AS n"
     "    FROM candidate WHERE name || '-' || k NOT IN (SELECT name FROM old))"
     "  SELECT 't-' || lower(hex(randomblob(6))), old.hash, old.role,"
     "    CASE WHEN old.n = 1 THEN old.name ELSE free.label END, old.created_at"
     "  FROM old LEFT JOIN free ON free.name = old.name AND free.n = old.n"
     "  ORDER BY old.created_at, old.rid;"
     "DROP TABLE tokens;"
     "ALTER TABLE tokens_v7 RENAME TO tokens;"
     /* Sessions older than owners have none: only admins and reviewers reach them. */
     "ALTER TABLE sessions ADD COLUMN owner_id TEXT;"
     "ALTER TABLE sessions ADD COLUMN owner_label TEXT;"
     /* holder keeps the label (what people see); holder_id is what the lease is keyed by. */
     "ALTER TABLE leases ADD COLUMN holder_id TEXT;"
     "UPDATE leases SET holder_id = holder;"
     "ALTER TABLE events ADD COLUMN actor_id TEXT;"
     /* v1's audit table was never written: made anew for principals and operations. */
     "DROP TRIGGER audit_no_update;"
     "DROP TRIGGER audit_no_delete;"
     "DROP TABLE audit;"
     /*
      * A hash chain: each row's hash covers its prev_hash, so an edited, deleted or reordered
      * row shows (carrel_store_audit_verify). No foreign key on session_id: the log must
      * outlive the sessions it speaks of.
      */
     "CREATE TABLE audit ("
     "  seq INTEGER PRIMARY KEY,"
     "  ts_us INTEGER NOT NULL,"
     "  principal_id TEXT NOT NULL,"
     "  principal_label TEXT NOT NULL,"
     "  role TEXT NOT NULL,"
     "  operation TEXT NOT NULL,"
     "  session_id TEXT,"
     "  params_digest TEXT NOT NULL,"
     "  result TEXT NOT NULL CHECK (result IN ('ok', 'denied', 'failed')),"
     "  error_code TEXT,"
     "  prev_hash TEXT NOT NULL,"
     "  hash TEXT NOT NULL UNIQUE"
     ") STRICT;"
     "CREATE INDEX audit_session ON audit (session_id, seq);"
     "CREATE INDEX audit_ts ON audit (ts_us);"
     /* Against mistakes in this program; someone with the file can drop these (hence the chain). */
     "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit"
     "  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;"
     "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit"
     "  BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;",
     TRUE},
    /* v8: named policies. Sessions made before them ran under the one policy, now "default";
     * a token's policies are comma-separated names, NULL for any. */
    {"ALTER TABLE sessions ADD COLUMN policy TEXT NOT NULL DEFAULT 'default';"
     "ALTER TABLE tokens ADD COLUMN policies TEXT;",
     FALSE},
    /*
     * v9: controlled egress. A session with network has an address on the egress network
     * (unique among sessions that are not destroyed); the egress log keeps every attempt of
     * every session to reach out, and outlives the session row like the audit log does.
     */
    {"ALTER TABLE sessions ADD COLUMN egress_ip TEXT;"
     "CREATE UNIQUE INDEX sessions_egress_ip ON sessions (egress_ip)"
     "  WHERE egress_ip IS NOT NULL AND state != 'destroyed';"
     "CREATE TABLE egress ("
     "  seq INTEGER PRIMARY KEY,"
     "  session_id TEXT NOT NULL,"
     "  ts_us INTEGER NOT NULL,"
     "  name TEXT NOT NULL,"
     "  address TEXT,"
     "  port INTEGER NOT NULL,"
     "  protocol TEXT NOT NULL,"
     "  decision TEXT NOT NULL,"
     "  bytes_out INTEGER NOT NULL DEFAULT 0,"
     "  bytes_in INTEGER NOT NULL DEFAULT 0,"
     "  duration_ms INTEGER NOT NULL DEFAULT 0"
     ") STRICT;"
     "CREATE INDEX egress_session ON egress (session_id, seq);",
     FALSE},
    /* v10: intents of long operations, for recovery after a crash (store-intent.c). */
    {"CREATE TABLE intents ("
     "  key TEXT PRIMARY KEY,"
     "  op TEXT NOT NULL,"
     "  data TEXT NOT NULL,"
     "  created_at INTEGER NOT NULL"
     ") STRICT;",
     FALSE},
    /* v11: a session's screen size (NULL: the image's own) and a template's defaults from its
     * recipe (NULL: none; screen as "WxH"). */
    {"ALTER TABLE sessions ADD COLUMN screen_width INTEGER;"
     "ALTER TABLE sessions ADD COLUMN screen_height INTEGER;"
     "ALTER TABLE templates ADD COLUMN default_vcpus INTEGER;"
     "ALTER TABLE templates ADD COLUMN default_memory_mib INTEGER;"
     "ALTER TABLE templates ADD COLUMN default_screen_width INTEGER;"
     "ALTER TABLE templates ADD COLUMN default_screen_height INTEGER;",
     FALSE},
    /* v12: guest RAM in a file (NULL: in the save image, anonymous in the domain): a warm
     * state's, and that of every session whose memory stands on it. */
    {"ALTER TABLE warm_states ADD COLUMN memory_file TEXT;"
     "ALTER TABLE sessions ADD COLUMN memory_file TEXT;",
     FALSE},
    /* v13: a snapshot's RAM in a file of its own (NULL: all in its save image), which its
     * reverts and forks map (sessions.memory_file then names it). */
    {"ALTER TABLE snapshots ADD COLUMN memory_file TEXT;", FALSE},
};

int
carrel_store_latest_schema_version(void)
{
    return (int)G_N_ELEMENTS(migrations);
}

static gboolean
check_foreign_keys(CarrelStore *store, GError **error)
{
    g_autoptr(sqlite3_stmt) stmt = carrel_store_prepare(store, "PRAGMA foreign_key_check", error);
    gboolean row = FALSE;

    if (!stmt || !carrel_store_step_row(store, stmt, "checking foreign keys", &row, error))
        return FALSE;
    if (row) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_STORE,
                    "table '%s' has rows that break a foreign key",
                    (const char *)sqlite3_column_text(stmt, 0));
        return FALSE;
    }
    return TRUE;
}

static gboolean
apply_in_transaction(CarrelStore *store, int version, GError **error)
{
    const StoreMigration *m = &migrations[version - 1];
    /* Integers from this file, not values from outside: PRAGMA cannot take bound parameters. */
    g_autofree char *stamp = g_strdup_printf("PRAGMA user_version = %d; PRAGMA application_id = %d",
                                             version, CARREL_STORE_APPLICATION_ID);

    if (!carrel_store_begin(store, error))
        return FALSE;
    if (!carrel_store_exec(store, m->sql, error) ||
        (m->rebuilds_tables && !check_foreign_keys(store, error)) ||
        !carrel_store_exec(store, stamp, error)) {
        carrel_store_rollback(store);
        return FALSE;
    }
    return carrel_store_commit(store, error);
}

static gboolean
apply_migration(CarrelStore *store, int version, GError **error)
{
    const StoreMigration *m = &migrations[version - 1];
    gboolean ok;

    /* foreign_keys cannot change inside a transaction, so it is switched around it. */
    if (m->rebuilds_tables && !carrel_store_exec(store, "PRAGMA foreign_keys = OFF", error))
        return FALSE;
    ok = apply_in_transaction(store, version, error);
    if (m->rebuilds_tables &&
        !carrel_store_exec(store, "PRAGMA foreign_keys = ON", ok ? error : NULL))
        return FALSE;
    return ok;
}

gboolean
carrel_store_migrate(CarrelStore *store, int target, GError **error)
{
    int latest = carrel_store_latest_schema_version();

    if (target > latest)
        target = latest;
    for (int v = store->version + 1; v <= target; v++) {
        if (!apply_migration(store, v, error)) {
            g_prefix_error(error, "migrating to schema version %d: ", v);
            return FALSE;
        }
        store->version = v;
    }
    return TRUE;
}
