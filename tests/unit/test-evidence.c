/*
 * evidence: the host key, bundles written and verified, and every kind of tampering named by
 * the file it touched. Bundles are built in a temp folder; hostile ones are re-written from a
 * good one with libarchive (extra, missing, duplicate, traversing and symlink members).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "evidence/evidence.h"

#define SESSION "s-0123456789ab"

typedef struct {
    char *root;
    char *key_path;
    char *bundle;
    CarrelEvidenceKey *key;
} Fixture;

static int
setup(void **state)
{
    Fixture *f = g_new0(Fixture, 1);
    g_autoptr(GError) error = NULL;

    f->root = g_dir_make_tmp("carrel-evidence-XXXXXX", NULL);
    f->key_path = g_build_filename(f->root, "host-key.pem", NULL);
    f->bundle = g_build_filename(f->root, "bundle.tar", NULL);
    f->key = carrel_evidence_key_load_or_create(f->key_path, &error);
    assert_null(error);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    Fixture *f = *state;

    assert_true(carrel_util_remove_tree(f->root, NULL));
    carrel_evidence_key_free(f->key);
    g_free(f->root);
    g_free(f->key_path);
    g_free(f->bundle);
    g_free(f);
    return 0;
}

/* A chained row of the session, as the store would chain it after prev. */
static CarrelAuditRecord *
audit_row(gint64 seq, const char *prev_hash, const char *operation)
{
    CarrelAuditRecord *rec = carrel_audit_record_new();

    rec->seq = seq;
    rec->ts_us = 1700000000000000 + seq;
    rec->principal_id = g_strdup("t-admin");
    rec->principal_label = g_strdup("admin");
    rec->role = g_strdup("admin");
    rec->operation = g_strdup(operation);
    rec->session_id = g_strdup(SESSION);
    rec->params_digest = g_strdup("ab");
    rec->result = g_strdup("ok");
    rec->prev_hash = g_strdup(prev_hash);
    rec->hash = carrel_audit_record_hash(rec);
    return rec;
}

/* Rows 1, 2 (linked) and 5 (rows 3-4 are another session's). */
static char *
audit_text(gboolean break_it)
{
    g_autoptr(GPtrArray) rows =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_audit_record_free);
    CarrelAuditRecord *one = audit_row(1, CARREL_AUDIT_GENESIS, "session.create");
    CarrelAuditRecord *two = audit_row(2, one->hash, "session.input");
    CarrelAuditRecord *five = audit_row(5, "ff", "session.export");

    g_ptr_array_add(rows, one);
    g_ptr_array_add(rows, two);
    g_ptr_array_add(rows, five);
    if (break_it) {
        /* An edited row that keeps its old hash: only recomputing the hash finds it. */
        g_free(two->result);
        two->result = g_strdup("denied");
    }
    return carrel_evidence_audit_to_jsonl(rows);
}

static void
write_bundle(Fixture *f, gboolean broken_audit)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelEvidenceManifest) m = carrel_evidence_manifest_new();
    g_autofree char *audit = audit_text(broken_audit);
    g_autofree char *artifact = g_build_filename(f->root, "artifact.txt", NULL);
    int fd = g_open(f->bundle, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    g_autoptr(CarrelEvidenceWriter) w = carrel_evidence_writer_new(fd, 1700000000, &error);

    assert_non_null(w);
    assert_true(g_file_set_contents(artifact, "the agent's output\n", -1, NULL));
    assert_true(carrel_evidence_writer_add_bytes(w, "session.json", "session", "{}\n", 3, &error));
    assert_true(carrel_evidence_writer_add_bytes(w, CARREL_EVIDENCE_AUDIT, "audit", audit,
                                                 strlen(audit), &error));
    assert_true(carrel_evidence_writer_add_bytes(w, "timeline.jsonl", "timeline",
                                                 "{\"seq\":1}\n{\"seq\":2}\n", 20, &error));
    assert_true(carrel_evidence_writer_add_bytes(w, "screenshots/0001.png", "screenshot",
                                                 "\x89PNG-pixels", 11, &error));
    assert_true(carrel_evidence_writer_add_file(w, "artifacts/x-1/home/user/out.txt", "artifact",
                                                artifact, &error));
    /* The same name twice, or a bad name, never goes out. */
    assert_false(carrel_evidence_writer_add_bytes(w, "session.json", "session", "", 0, &error));
    g_clear_error(&error);
    assert_false(carrel_evidence_writer_add_bytes(w, "../up", "session", "", 0, &error));
    g_clear_error(&error);
    m->session_id = g_strdup(SESSION);
    m->exported_by = g_strdup("tester");
    m->carrel_version = g_strdup("0.0-test");
    assert_true(carrel_evidence_writer_finish(w, m, f->key, &error));
    assert_null(error);
    close(fd);
    assert_int_equal(m->files->len, 5);
}

static CarrelEvidenceReport *
verify(const char *path, const char *pin)
{
    g_autoptr(GError) error = NULL;
    int fd = g_open(path, O_RDONLY | O_CLOEXEC, 0);
    CarrelEvidenceReport *r;

    assert_true(fd >= 0);
    r = carrel_evidence_verify(fd, pin, &error);
    close(fd);
    assert_null(error);
    assert_non_null(r);
    return r;
}

/* Whether r has a problem of kind naming file (NULL: the archive as a whole). */
static gboolean
has_problem(const CarrelEvidenceReport *r, CarrelEvidenceProblemKind kind, const char *file)
{
    for (guint i = 0; i < r->problems->len; i++) {
        const CarrelEvidenceProblem *p = g_ptr_array_index(r->problems, i);

        if (p->kind == kind && g_strcmp0(p->file, file) == 0)
            return TRUE;
    }
    return FALSE;
}

static void
dump(const CarrelEvidenceReport *r)
{
    g_autoptr(JsonNode) json = carrel_evidence_report_to_json(r);
    g_autofree char *text = json_to_string(json, TRUE);

    print_message("%s\n", text);
}

static void
test_key(void **state)
{
    Fixture *f = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelEvidenceKey) again = carrel_evidence_key_load_or_create(f->key_path, &error);
    g_autoptr(CarrelEvidenceKey) pub = NULL;
    g_autoptr(CarrelEvidenceKey) other = NULL;
    g_autofree char *other_path = g_build_filename(f->root, "other.pem", NULL);
    g_autofree char *sig = NULL;
    g_autofree char *pem = NULL;
    struct stat st;

    /* Created once, 0600; loading it again gives the same key. */
    assert_int_equal(g_stat(f->key_path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_non_null(again);
    assert_string_equal(carrel_evidence_key_fingerprint(again),
                        carrel_evidence_key_fingerprint(f->key));
    assert_true(g_str_has_prefix(carrel_evidence_key_fingerprint(f->key), "sha256:"));
    assert_int_equal(strlen(carrel_evidence_key_fingerprint(f->key)), 7 + 64);
    assert_true(g_file_get_contents(f->key_path, &pem, NULL, NULL));
    assert_non_null(strstr(pem, "-----BEGIN PRIVATE KEY-----"));

    /* Sign with the pair, verify with the public key alone. */
    sig = carrel_evidence_key_sign(f->key, (const guint8 *)"abc", 3, &error);
    assert_non_null(sig);
    pub = carrel_evidence_key_new_public(carrel_evidence_key_public(f->key), &error);
    assert_non_null(pub);
    assert_string_equal(carrel_evidence_key_fingerprint(pub),
                        carrel_evidence_key_fingerprint(f->key));
    assert_true(carrel_evidence_key_verify(pub, (const guint8 *)"abc", 3, sig, &error));
    assert_false(carrel_evidence_key_verify(pub, (const guint8 *)"abd", 3, sig, &error));
    assert_int_equal(error->code, CARREL_ERROR_FORBIDDEN);
    g_clear_error(&error);
    assert_null(carrel_evidence_key_sign(pub, (const guint8 *)"abc", 3, &error));
    assert_int_equal(error->code, CARREL_ERROR_UNSUPPORTED);
    g_clear_error(&error);

    /* Another key does not verify it; bad public key text is refused. */
    other = carrel_evidence_key_load_or_create(other_path, &error);
    assert_non_null(other);
    assert_false(carrel_evidence_key_verify(other, (const guint8 *)"abc", 3, sig, &error));
    g_clear_error(&error);
    assert_null(carrel_evidence_key_new_public("c2hvcnQ=", &error));
    assert_int_equal(error->code, CARREL_ERROR_INVALID_ARG);
    g_clear_error(&error);

    /* A symlink where the key should be is neither followed nor replaced. */
    {
        g_autofree char *link = g_build_filename(f->root, "link.pem", NULL);
        g_autofree char *target = g_build_filename(f->root, "elsewhere.pem", NULL);

        assert_int_equal(symlink(target, link), 0);
        assert_null(carrel_evidence_key_load_or_create(link, &error));
        g_clear_error(&error);
        assert_false(g_file_test(target, G_FILE_TEST_EXISTS));
        assert_int_equal(symlink(f->key_path, target), 0);
        assert_null(carrel_evidence_key_load_or_create(target, &error));
        g_clear_error(&error);
    }

    /* A key file others may read is refused, never used. */
    assert_int_equal(g_chmod(f->key_path, 0644), 0);
    assert_null(carrel_evidence_key_load_or_create(f->key_path, &error));
    assert_int_equal(error->code, CARREL_ERROR_FORBIDDEN);
    assert_null(strstr(error->message, "PRIVATE"));
}

static void
test_names(void **state)
{
    const char *const good[] = {"manifest.json", "artifacts/x-1/home/user/a.txt",
                                "screenshots/0001-20260101.png", NULL};
    const char *const bad[] = {"",   "/etc/passwd", "../up", "a/../b", "a//b",     "./a",
                               "a/", "a b",         "a\nb",  "a\\b",   "\xc3\xa9", NULL};

    for (guint i = 0; good[i]; i++)
        assert_true(carrel_evidence_check_name(good[i], NULL));
    for (guint i = 0; bad[i]; i++) {
        g_autoptr(GError) error = NULL;

        assert_false(carrel_evidence_check_name(bad[i], &error));
        assert_int_equal(error->code, CARREL_ERROR_INVALID_ARG);
        assert_null(strchr(error->message, '\n'));
    }
}

static void
test_round_trip(void **state)
{
    Fixture *f = *state;
    g_autoptr(CarrelEvidenceReport) r = NULL;
    g_autoptr(CarrelEvidenceReport) pinned = NULL;
    g_autoptr(CarrelEvidenceReport) by_key = NULL;
    g_autoptr(CarrelEvidenceReport) wrong = NULL;

    write_bundle(f, FALSE);
    r = verify(f->bundle, NULL);
    if (!carrel_evidence_report_ok(r))
        dump(r);
    assert_true(carrel_evidence_report_ok(r));
    assert_true(r->signature_ok);
    assert_false(r->key_pinned);
    assert_int_equal(r->files_checked, 5);
    assert_int_equal(r->audit_rows, 3);
    assert_string_equal(r->manifest->session_id, SESSION);

    pinned = verify(f->bundle, carrel_evidence_key_fingerprint(f->key));
    assert_true(carrel_evidence_report_ok(pinned));
    assert_true(pinned->key_pinned);
    by_key = verify(f->bundle, carrel_evidence_key_public(f->key));
    assert_true(by_key->key_pinned);
    wrong = verify(f->bundle, "sha256:00");
    assert_false(carrel_evidence_report_ok(wrong));
    assert_true(has_problem(wrong, CARREL_EVIDENCE_PROBLEM_KEY, CARREL_EVIDENCE_SIGNATURE));
}

/* The data offset of member name in an uncompressed tar (ustar/pax headers walked by hand). */
static gsize
member_offset(const char *tar, gsize len, const char *name, gsize *ret_size)
{
    gsize off = 0;

    while (off + 512 <= len && tar[off]) {
        char size_text[13] = {0};
        gsize size;

        memcpy(size_text, tar + off + 124, 12);
        size = (gsize)g_ascii_strtoull(size_text, NULL, 8);
        if (tar[off + 156] != 'x' && strncmp(tar + off, name, 100) == 0) {
            *ret_size = size;
            return off + 512;
        }
        off += 512 + (size + 511) / 512 * 512;
    }
    fail_msg("no member '%s'", name);
    return 0;
}

/* A copy of the bundle with one byte of member name flipped (at its middle). */
static char *
flip_byte(Fixture *f, const char *name)
{
    g_autofree char *tar = NULL;
    g_autofree char *base = g_strdelimit(g_strdup(name), "/", '_');
    char *copy = g_build_filename(f->root, base, NULL);
    gsize len = 0, size = 0, off;

    assert_true(g_file_get_contents(f->bundle, &tar, &len, NULL));
    off = member_offset(tar, len, name, &size);
    tar[off + size / 2] ^= 0x01;
    assert_true(g_file_set_contents(copy, tar, (gssize)len, NULL));
    return copy;
}

static void
test_flipped_bytes(void **state)
{
    Fixture *f = *state;
    const char *const members[] = {"screenshots/0001.png", "artifacts/x-1/home/user/out.txt",
                                   "timeline.jsonl", "session.json", NULL};

    write_bundle(f, FALSE);
    for (guint i = 0; members[i]; i++) {
        g_autofree char *copy = flip_byte(f, members[i]);
        g_autoptr(CarrelEvidenceReport) r = verify(copy, NULL);

        assert_false(carrel_evidence_report_ok(r));
        assert_true(has_problem(r, CARREL_EVIDENCE_PROBLEM_CHANGED, members[i]));
        /* Only that file: the rest still match, and the signature still holds. */
        assert_int_equal(r->problems->len, 1);
        assert_true(r->signature_ok);
    }
    {
        /* The audit rows: their file changed, and their chain breaks. */
        g_autofree char *copy = flip_byte(f, CARREL_EVIDENCE_AUDIT);
        g_autoptr(CarrelEvidenceReport) r = verify(copy, NULL);

        assert_true(has_problem(r, CARREL_EVIDENCE_PROBLEM_CHANGED, CARREL_EVIDENCE_AUDIT));
        assert_false(carrel_evidence_report_ok(r));
    }
    {
        g_autofree char *copy = flip_byte(f, CARREL_EVIDENCE_MANIFEST);
        g_autoptr(CarrelEvidenceReport) r = verify(copy, NULL);

        assert_false(carrel_evidence_report_ok(r));
        assert_false(r->signature_ok);
        assert_true(has_problem(r, CARREL_EVIDENCE_PROBLEM_SIGNATURE, CARREL_EVIDENCE_MANIFEST) ||
                    has_problem(r, CARREL_EVIDENCE_PROBLEM_MANIFEST, CARREL_EVIDENCE_MANIFEST));
    }
    {
        g_autofree char *copy = flip_byte(f, CARREL_EVIDENCE_SIGNATURE);
        g_autoptr(CarrelEvidenceReport) r = verify(copy, NULL);

        assert_false(carrel_evidence_report_ok(r));
        assert_true(has_problem(r, CARREL_EVIDENCE_PROBLEM_SIGNATURE, CARREL_EVIDENCE_MANIFEST));
    }
}

/* A signed bundle whose audit rows were edited before signing: the files all match, the chain
 * does not. */
static void
test_audit_chain(void **state)
{
    Fixture *f = *state;
    g_autoptr(CarrelEvidenceReport) r = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *good = audit_text(FALSE);
    gint64 rows = 0;

    write_bundle(f, TRUE);
    r = verify(f->bundle, NULL);
    assert_false(carrel_evidence_report_ok(r));
    assert_true(r->signature_ok);
    assert_true(has_problem(r, CARREL_EVIDENCE_PROBLEM_AUDIT, CARREL_EVIDENCE_AUDIT));
    assert_int_equal(r->problems->len, 1);

    /* The same check alone: a row of another session is refused too. */
    assert_true(carrel_evidence_audit_check(good, strlen(good), SESSION, &rows, &error));
    assert_int_equal(rows, 3);
    assert_false(carrel_evidence_audit_check(good, strlen(good), "s-other", &rows, &error));
    assert_non_null(strstr(error->message, "row 1"));
}

typedef enum { EDIT_EXTRA, EDIT_DROP, EDIT_TRAVERSE, EDIT_SYMLINK, EDIT_DUPLICATE } Edit;

static void
copy_entry(struct archive *out, struct archive_entry *e, const void *data, gsize len)
{
    assert_int_equal(archive_write_header(out, e), ARCHIVE_OK);
    if (len)
        assert_int_equal(archive_write_data(out, data, len), (la_ssize_t)len);
}

static void
add_member(struct archive *out, const char *name, unsigned type, const char *data)
{
    struct archive_entry *e = archive_entry_new();

    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, 0644);
    if (type == AE_IFLNK)
        archive_entry_set_symlink(e, "/etc/passwd");
    archive_entry_set_size(e, type == AE_IFREG ? (la_int64_t)strlen(data) : 0);
    copy_entry(out, e, data, type == AE_IFREG ? strlen(data) : 0);
    archive_entry_free(e);
}

/* A copy of the bundle with an edit; returns its path. */
static char *
rewrite(Fixture *f, Edit edit, const char *target)
{
    char *copy = g_strdup_printf("%s/edit-%d.tar", f->root, (int)edit);
    struct archive *in = archive_read_new();
    struct archive *out = archive_write_new();
    struct archive_entry *e;

    archive_read_support_format_tar(in);
    assert_int_equal(archive_read_open_filename(in, f->bundle, 10240), ARCHIVE_OK);
    archive_write_set_format_pax_restricted(out);
    assert_int_equal(archive_write_open_filename(out, copy), ARCHIVE_OK);
    while (archive_read_next_header(in, &e) == ARCHIVE_OK) {
        gsize len = (gsize)archive_entry_size(e);
        g_autofree char *data = g_malloc(len + 1);
        gboolean is_target = g_str_equal(archive_entry_pathname(e), target);

        assert_int_equal(archive_read_data(in, data, len), (la_ssize_t)len);
        if (!(edit == EDIT_DROP && is_target))
            copy_entry(out, e, data, len);
        if (edit == EDIT_DUPLICATE && is_target)
            add_member(out, target, AE_IFREG, "other bytes");
    }
    if (edit == EDIT_EXTRA)
        add_member(out, target, AE_IFREG, "planted");
    if (edit == EDIT_TRAVERSE)
        add_member(out, target, AE_IFREG, "escape");
    if (edit == EDIT_SYMLINK)
        add_member(out, target, AE_IFLNK, "");
    archive_read_free(in);
    archive_write_close(out);
    archive_write_free(out);
    return copy;
}

static void
test_hostile_archives(void **state)
{
    Fixture *f = *state;
    const struct {
        Edit edit;
        const char *target;
        CarrelEvidenceProblemKind kind;
        const char *named;
    } cases[] = {
        {EDIT_EXTRA, "screenshots/0002.png", CARREL_EVIDENCE_PROBLEM_EXTRA, NULL},
        {EDIT_DROP, "screenshots/0001.png", CARREL_EVIDENCE_PROBLEM_MISSING, NULL},
        {EDIT_DROP, CARREL_EVIDENCE_SIGNATURE, CARREL_EVIDENCE_PROBLEM_MISSING, NULL},
        {EDIT_TRAVERSE, "../../etc/cron.d/x", CARREL_EVIDENCE_PROBLEM_UNSAFE, NULL},
        {EDIT_TRAVERSE, "/etc/passwd", CARREL_EVIDENCE_PROBLEM_UNSAFE, NULL},
        {EDIT_TRAVERSE, "a\x1b[31mred", CARREL_EVIDENCE_PROBLEM_UNSAFE, "a\\033[31mred"},
        {EDIT_SYMLINK, "screenshots/link.png", CARREL_EVIDENCE_PROBLEM_UNSAFE, NULL},
        {EDIT_DUPLICATE, "timeline.jsonl", CARREL_EVIDENCE_PROBLEM_DUPLICATE, NULL},
    };

    write_bundle(f, FALSE);
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *copy = rewrite(f, cases[i].edit, cases[i].target);
        g_autoptr(CarrelEvidenceReport) r = verify(copy, NULL);

        if (!has_problem(r, cases[i].kind, cases[i].named ? cases[i].named : cases[i].target)) {
            dump(r);
            fail_msg("case %u: no %s problem naming '%s'", i,
                     carrel_evidence_problem_to_string(cases[i].kind), cases[i].target);
        }
        assert_false(carrel_evidence_report_ok(r));
    }
    /* Nothing was written anywhere by reading them. */
    assert_false(g_file_test("/etc/cron.d/x", G_FILE_TEST_EXISTS));
}

static void
test_truncated_and_garbage(void **state)
{
    Fixture *f = *state;
    g_autofree char *tar = NULL;
    g_autofree char *cut = g_build_filename(f->root, "cut.tar", NULL);
    g_autofree char *junk = g_build_filename(f->root, "junk.tar", NULL);
    gsize len = 0, size = 0, off;

    write_bundle(f, FALSE);
    assert_true(g_file_get_contents(f->bundle, &tar, &len, NULL));
    /* Cut in the middle of the artifact's data. */
    off = member_offset(tar, len, "artifacts/x-1/home/user/out.txt", &size);
    assert_true(g_file_set_contents(cut, tar, (gssize)(off + size / 2), NULL));
    {
        g_autoptr(CarrelEvidenceReport) r = verify(cut, NULL);

        assert_false(carrel_evidence_report_ok(r));
        assert_true(
            has_problem(r, CARREL_EVIDENCE_PROBLEM_ARCHIVE, "artifacts/x-1/home/user/out.txt"));
    }
    assert_true(g_file_set_contents(junk, "not a tar at all, just text\n", -1, NULL));
    {
        g_autoptr(CarrelEvidenceReport) r = verify(junk, NULL);

        assert_false(carrel_evidence_report_ok(r));
        assert_true(has_problem(r, CARREL_EVIDENCE_PROBLEM_ARCHIVE, NULL));
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_key, setup, teardown),
        cmocka_unit_test(test_names),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flipped_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_audit_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_archives, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_and_garbage, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
