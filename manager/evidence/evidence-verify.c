/*
 * evidence: verifying a bundle offline. The tar is untrusted (an auditor got it from anywhere):
 * it is read as a stream and never extracted, so no name in it can reach the file system; each
 * member is hashed as it passes and only the few files the checks need are kept, bounded.
 */
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

#include "evidence/evidence.h"

#define CHUNK (64 * 1024)

static const char *const problem_names[CARREL_EVIDENCE_PROBLEM_LAST] = {
    [CARREL_EVIDENCE_PROBLEM_CHANGED] = "changed",
    [CARREL_EVIDENCE_PROBLEM_MISSING] = "missing",
    [CARREL_EVIDENCE_PROBLEM_EXTRA] = "extra",
    [CARREL_EVIDENCE_PROBLEM_UNSAFE] = "unsafe",
    [CARREL_EVIDENCE_PROBLEM_DUPLICATE] = "duplicate",
    [CARREL_EVIDENCE_PROBLEM_SIGNATURE] = "signature",
    [CARREL_EVIDENCE_PROBLEM_KEY] = "key",
    [CARREL_EVIDENCE_PROBLEM_MANIFEST] = "manifest",
    [CARREL_EVIDENCE_PROBLEM_AUDIT] = "audit",
    [CARREL_EVIDENCE_PROBLEM_ARCHIVE] = "archive",
};

const char *
carrel_evidence_problem_to_string(CarrelEvidenceProblemKind kind)
{
    return carrel_util_enum_to_string(problem_names, CARREL_EVIDENCE_PROBLEM_LAST, (int)kind);
}

static void
problem_free(CarrelEvidenceProblem *p)
{
    g_free(p->file);
    g_free(p->detail);
    g_free(p);
}

void
carrel_evidence_report_free(CarrelEvidenceReport *r)
{
    if (!r)
        return;
    carrel_evidence_manifest_free(r->manifest);
    g_clear_pointer(&r->problems, g_ptr_array_unref);
    g_free(r);
}

gboolean
carrel_evidence_report_ok(const CarrelEvidenceReport *r)
{
    return r->problems->len == 0 && r->signature_ok && r->manifest;
}

static void add_problem(CarrelEvidenceReport *r, CarrelEvidenceProblemKind kind, const char *file,
                        const char *fmt, ...) G_GNUC_PRINTF(4, 5);

static void
add_problem(CarrelEvidenceReport *r, CarrelEvidenceProblemKind kind, const char *file,
            const char *fmt, ...)
{
    CarrelEvidenceProblem *p = g_new0(CarrelEvidenceProblem, 1);
    va_list ap;

    p->kind = kind;
    /* Names come from the tar: escaped, so a report never carries control characters. */
    p->file = file ? g_strescape(file, NULL) : NULL;
    va_start(ap, fmt);
    p->detail = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_ptr_array_add(r->problems, p);
}

static void
add_string(JsonBuilder *b, const char *member, const char *value)
{
    json_builder_set_member_name(b, member);
    if (value)
        json_builder_add_string_value(b, value);
    else
        json_builder_add_null_value(b);
}

JsonNode *
carrel_evidence_report_to_json(const CarrelEvidenceReport *r)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "ok");
    json_builder_add_boolean_value(b, carrel_evidence_report_ok(r));
    add_string(b, "session", r->manifest ? r->manifest->session_id : NULL);
    add_string(b, "fingerprint", r->manifest ? r->manifest->host_fingerprint : NULL);
    json_builder_set_member_name(b, "signature_ok");
    json_builder_add_boolean_value(b, r->signature_ok);
    json_builder_set_member_name(b, "key_pinned");
    json_builder_add_boolean_value(b, r->key_pinned);
    json_builder_set_member_name(b, "files_checked");
    json_builder_add_int_value(b, r->files_checked);
    json_builder_set_member_name(b, "audit_rows");
    json_builder_add_int_value(b, r->audit_rows);
    json_builder_set_member_name(b, "problems");
    json_builder_begin_array(b);
    for (guint i = 0; i < r->problems->len; i++) {
        const CarrelEvidenceProblem *p = g_ptr_array_index(r->problems, i);

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "kind");
        json_builder_add_string_value(b, carrel_evidence_problem_to_string(p->kind));
        add_string(b, "file", p->file);
        add_string(b, "detail", p->detail);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* A member as it passed. */
typedef struct {
    guint64 size;
    char *sha256;
    GBytes *kept; /* manifest, signature and audit rows only */
} Seen;

static void
seen_free(Seen *s)
{
    g_free(s->sha256);
    g_clear_pointer(&s->kept, g_bytes_unref);
    g_free(s);
}

typedef struct {
    CarrelEvidenceReport *report;
    GHashTable *seen; /* name -> Seen */
    GPtrArray *order; /* names as they came (borrowed from seen) */
} Walk;

static gboolean
kept_member(const char *name)
{
    return g_str_equal(name, CARREL_EVIDENCE_MANIFEST) ||
           g_str_equal(name, CARREL_EVIDENCE_SIGNATURE) || g_str_equal(name, CARREL_EVIDENCE_AUDIT);
}

/* Hashes the current member's data; FALSE (with an archive problem) when the tar breaks. */
static gboolean
read_member(Walk *walk, struct archive *ar, const char *name, Seen *seen)
{
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_autoptr(GByteArray) kept = kept_member(name) ? g_byte_array_new() : NULL;
    g_autofree guint8 *buf = g_malloc(CHUNK);
    la_ssize_t n;

    while ((n = archive_read_data(ar, buf, CHUNK)) > 0) {
        g_checksum_update(sum, buf, n);
        seen->size += (guint64)n;
        if (kept && seen->size > CARREL_EVIDENCE_MAX_MEMORY_MEMBER) {
            add_problem(walk->report, CARREL_EVIDENCE_PROBLEM_ARCHIVE, name,
                        "over %" G_GUINT64_FORMAT " bytes", CARREL_EVIDENCE_MAX_MEMORY_MEMBER);
            return FALSE;
        }
        if (kept)
            g_byte_array_append(kept, buf, (guint)n);
    }
    if (n < 0) {
        add_problem(walk->report, CARREL_EVIDENCE_PROBLEM_ARCHIVE, name,
                    "the archive breaks in this member (truncated or corrupt): %s",
                    archive_error_string(ar) ? archive_error_string(ar) : "read error");
        return FALSE;
    }
    seen->sha256 = g_strdup(g_checksum_get_string(sum));
    if (kept)
        seen->kept = g_byte_array_free_to_bytes(g_steal_pointer(&kept));
    return TRUE;
}

/* One header: FALSE to stop reading (the archive cannot be trusted past it). */
static gboolean
walk_entry(Walk *walk, struct archive *ar, struct archive_entry *e)
{
    const char *name = archive_entry_pathname(e);
    g_autoptr(GError) bad = NULL;
    Seen *seen;

    if (!name || !carrel_evidence_check_name(name, &bad)) {
        add_problem(walk->report, CARREL_EVIDENCE_PROBLEM_UNSAFE, name ? name : "", "%s",
                    bad ? bad->message : "a member without a name");
        return archive_read_data_skip(ar) == ARCHIVE_OK;
    }
    if (archive_entry_filetype(e) != AE_IFREG || archive_entry_hardlink(e) ||
        archive_entry_symlink(e)) {
        add_problem(walk->report, CARREL_EVIDENCE_PROBLEM_UNSAFE, name,
                    "not a regular file (a bundle holds only regular files)");
        return archive_read_data_skip(ar) == ARCHIVE_OK;
    }
    if (g_hash_table_contains(walk->seen, name)) {
        add_problem(walk->report, CARREL_EVIDENCE_PROBLEM_DUPLICATE, name,
                    "the archive holds this name more than once");
        return archive_read_data_skip(ar) == ARCHIVE_OK;
    }
    seen = g_new0(Seen, 1);
    g_hash_table_insert(walk->seen, g_strdup(name), seen);
    g_ptr_array_add(walk->order, g_strdup(name));
    return read_member(walk, ar, name, seen);
}

static void
walk_archive(Walk *walk, struct archive *ar)
{
    guint count = 0;

    for (;;) {
        struct archive_entry *e = NULL;
        int rc = archive_read_next_header(ar, &e);

        if (rc == ARCHIVE_EOF)
            return;
        if (rc < ARCHIVE_WARN) {
            add_problem(walk->report, CARREL_EVIDENCE_PROBLEM_ARCHIVE, NULL,
                        "not a readable tar after %u members (truncated or corrupt): %s", count,
                        archive_error_string(ar) ? archive_error_string(ar) : "read error");
            return;
        }
        if (++count > CARREL_EVIDENCE_MAX_MEMBERS) {
            add_problem(walk->report, CARREL_EVIDENCE_PROBLEM_ARCHIVE, NULL, "more than %d members",
                        CARREL_EVIDENCE_MAX_MEMBERS);
            return;
        }
        if (!walk_entry(walk, ar, e))
            return;
    }
}

/* The signature over the manifest's exact bytes, with the key the manifest names, then that
 * key against the pin. */
static void
check_signature(Walk *walk, GBytes *manifest, const char *pin)
{
    CarrelEvidenceReport *r = walk->report;
    Seen *sig = g_hash_table_lookup(walk->seen, CARREL_EVIDENCE_SIGNATURE);
    g_autoptr(CarrelEvidenceKey) key = NULL;
    g_autoptr(CarrelEvidenceKey) pinned = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *sig_text = NULL;
    gsize len = 0;
    const guint8 *data = g_bytes_get_data(manifest, &len);

    if (!(key = carrel_evidence_key_new_public(r->manifest->host_key, &error))) {
        add_problem(r, CARREL_EVIDENCE_PROBLEM_MANIFEST, CARREL_EVIDENCE_MANIFEST, "host key: %s",
                    error->message);
        return;
    }
    if (g_strcmp0(r->manifest->host_fingerprint, carrel_evidence_key_fingerprint(key)) != 0)
        add_problem(r, CARREL_EVIDENCE_PROBLEM_MANIFEST, CARREL_EVIDENCE_MANIFEST,
                    "the fingerprint it states is not its key's (%s)",
                    carrel_evidence_key_fingerprint(key));
    if (!sig) {
        add_problem(r, CARREL_EVIDENCE_PROBLEM_MISSING, CARREL_EVIDENCE_SIGNATURE,
                    "the manifest is not signed");
    } else {
        sig_text = g_strndup(g_bytes_get_data(sig->kept, NULL), g_bytes_get_size(sig->kept));
        r->signature_ok = carrel_evidence_key_verify(key, data, len, sig_text, &error);
        if (!r->signature_ok)
            add_problem(r, CARREL_EVIDENCE_PROBLEM_SIGNATURE, CARREL_EVIDENCE_MANIFEST,
                        CARREL_EVIDENCE_SIGNATURE " does not verify over it: %s", error->message);
    }
    if (!pin)
        return;
    if (g_str_has_prefix(pin, "sha256:")) {
        r->key_pinned = g_ascii_strcasecmp(pin, carrel_evidence_key_fingerprint(key)) == 0;
    } else {
        g_clear_error(&error);
        pinned = carrel_evidence_key_new_public(pin, &error);
        r->key_pinned = pinned && g_str_equal(carrel_evidence_key_fingerprint(pinned),
                                              carrel_evidence_key_fingerprint(key));
    }
    if (!r->key_pinned)
        add_problem(r, CARREL_EVIDENCE_PROBLEM_KEY, CARREL_EVIDENCE_SIGNATURE,
                    "signed by %s, not by the pinned key%s%s", carrel_evidence_key_fingerprint(key),
                    pinned || !error ? "" : ": ", pinned || !error ? "" : error->message);
}

/* Every listed file against what passed, then what passed unlisted. */
static void
check_files(Walk *walk)
{
    CarrelEvidenceReport *r = walk->report;
    g_autoptr(GHashTable) listed = g_hash_table_new(g_str_hash, g_str_equal);

    for (guint i = 0; i < r->manifest->files->len; i++) {
        const CarrelEvidenceFile *f = g_ptr_array_index(r->manifest->files, i);
        Seen *s = g_hash_table_lookup(walk->seen, f->path);

        if (!g_hash_table_add(listed, f->path)) {
            add_problem(r, CARREL_EVIDENCE_PROBLEM_MANIFEST, f->path, "listed twice");
            continue;
        }
        r->files_checked++;
        if (!s)
            add_problem(r, CARREL_EVIDENCE_PROBLEM_MISSING, f->path, "listed, not in the archive");
        else if (s->size != f->size || g_strcmp0(s->sha256, f->sha256) != 0)
            add_problem(r, CARREL_EVIDENCE_PROBLEM_CHANGED, f->path,
                        "%" G_GUINT64_FORMAT
                        " bytes, sha256 %s; the manifest says %" G_GUINT64_FORMAT
                        " bytes, sha256 %s",
                        s->size, s->sha256 ? s->sha256 : "?", f->size, f->sha256);
    }
    for (guint i = 0; i < walk->order->len; i++) {
        const char *name = g_ptr_array_index(walk->order, i);

        if (!g_hash_table_contains(listed, name) && !g_str_equal(name, CARREL_EVIDENCE_MANIFEST) &&
            !g_str_equal(name, CARREL_EVIDENCE_SIGNATURE))
            add_problem(r, CARREL_EVIDENCE_PROBLEM_EXTRA, name, "in the archive, not listed");
    }
}

static void
check_audit(Walk *walk)
{
    CarrelEvidenceReport *r = walk->report;
    Seen *s = g_hash_table_lookup(walk->seen, CARREL_EVIDENCE_AUDIT);
    g_autoptr(GError) error = NULL;
    gsize len = 0;
    const char *text;

    if (!s || !s->kept)
        return;
    text = g_bytes_get_data(s->kept, &len);
    if (!carrel_evidence_audit_check(text ? text : "", len, r->manifest->session_id, &r->audit_rows,
                                     &error))
        add_problem(r, CARREL_EVIDENCE_PROBLEM_AUDIT, CARREL_EVIDENCE_AUDIT, "%s", error->message);
}

static void
check_bundle(Walk *walk, const char *pin)
{
    CarrelEvidenceReport *r = walk->report;
    Seen *m = g_hash_table_lookup(walk->seen, CARREL_EVIDENCE_MANIFEST);
    g_autoptr(GError) error = NULL;
    gsize len = 0;
    const char *text;

    if (!m || !m->kept) {
        add_problem(r, CARREL_EVIDENCE_PROBLEM_MISSING, CARREL_EVIDENCE_MANIFEST,
                    "no manifest: this is not a carrel bundle, or it lost its manifest");
        return;
    }
    text = g_bytes_get_data(m->kept, &len);
    if (!(r->manifest = carrel_evidence_manifest_parse(text ? text : "", len, &error))) {
        add_problem(r, CARREL_EVIDENCE_PROBLEM_MANIFEST, CARREL_EVIDENCE_MANIFEST, "%s",
                    error->message);
        return;
    }
    check_signature(walk, m->kept, pin);
    check_files(walk);
    check_audit(walk);
}

CarrelEvidenceReport *
carrel_evidence_verify(int fd, const char *pin, GError **error)
{
    g_autoptr(CarrelEvidenceReport) r = g_new0(CarrelEvidenceReport, 1);
    g_autoptr(GHashTable) seen =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)seen_free);
    g_autoptr(GPtrArray) order = g_ptr_array_new_with_free_func(g_free);
    Walk walk = {.report = r, .seen = seen, .order = order};
    struct archive *ar = archive_read_new();

    r->problems = g_ptr_array_new_with_free_func((GDestroyNotify)problem_free);
    if (!ar) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "out of memory");
        return NULL;
    }
    /* Tar only, no decompression: a bundle is written uncompressed, and nothing else is one. */
    if (archive_read_support_format_tar(ar) != ARCHIVE_OK ||
        archive_read_open_fd(ar, fd, 10240) != ARCHIVE_OK) {
        add_problem(r, CARREL_EVIDENCE_PROBLEM_ARCHIVE, NULL, "not a readable tar: %s",
                    archive_error_string(ar) ? archive_error_string(ar) : "read error");
        archive_read_free(ar);
        return g_steal_pointer(&r);
    }
    walk_archive(&walk, ar);
    archive_read_free(ar);
    check_bundle(&walk, pin);
    return g_steal_pointer(&r);
}
