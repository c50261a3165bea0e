/*
 * evidence: signed bundles of what happened in a session. A bundle is an uncompressed tar whose
 * manifest.json lists every other member with its sha256 and size, signed (manifest.sig) with
 * the host's Ed25519 key (GnuTLS). Core gathers the contents; this module writes the tar, signs
 * it and verifies one offline, streaming and without extracting. Pure apart from the files it is
 * given; no logging.
 */
#pragma once

#include "conf/conf.h"

G_BEGIN_DECLS

/* The manifest's "format": a verifier refuses any other. */
#define CARREL_EVIDENCE_FORMAT "carrel-evidence/1"
#define CARREL_EVIDENCE_MANIFEST "manifest.json"
#define CARREL_EVIDENCE_SIGNATURE "manifest.sig"
/* Files of a bundle that the verifier reads into memory (the rest are only hashed). */
#define CARREL_EVIDENCE_AUDIT "audit.jsonl"
/* Bounds a hostile bundle cannot pass: members read into memory, members, names. */
#define CARREL_EVIDENCE_MAX_MEMORY_MEMBER (G_GUINT64_CONSTANT(64) * 1024 * 1024)
/* How deep the JSON of a bundle (manifest, audit rows) may nest: a few levels are used. */
#define CARREL_EVIDENCE_JSON_DEPTH 32
#define CARREL_EVIDENCE_MAX_MEMBERS 200000
#define CARREL_EVIDENCE_MAX_NAME 1024

/* The host key: an Ed25519 key pair (private part only on carreld's host) or a public key. */
typedef struct _CarrelEvidenceKey CarrelEvidenceKey;

/*
 * The host key at path: loaded when it exists (a regular file, PKCS#8 PEM, mode 0600 or
 * stricter: anything looser is FORBIDDEN), else generated and written there (0600, never over
 * an existing file or through a symlink).
 */
CarrelEvidenceKey *carrel_evidence_key_load_or_create(const char *path, GError **error);
/* A public key from its text: the base64 of its 32 raw bytes. INVALID_ARG otherwise. */
CarrelEvidenceKey *carrel_evidence_key_new_public(const char *base64, GError **error);
void carrel_evidence_key_free(CarrelEvidenceKey *key);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelEvidenceKey, carrel_evidence_key_free)
/* The public key as base64 of its 32 raw bytes. */
const char *carrel_evidence_key_public(const CarrelEvidenceKey *key);
/* "sha256:" + hex sha256 of the 32 raw public key bytes: what auditors pin. */
const char *carrel_evidence_key_fingerprint(const CarrelEvidenceKey *key);
/* Base64 Ed25519 signature over data; UNSUPPORTED for a public key. */
char *carrel_evidence_key_sign(const CarrelEvidenceKey *key, const guint8 *data, gsize len,
                               GError **error);
/* Whether signature (base64) is key's over data: FALSE with FORBIDDEN when it is not. */
gboolean carrel_evidence_key_verify(const CarrelEvidenceKey *key, const guint8 *data, gsize len,
                                    const char *signature, GError **error);

/* One member of a bundle as its manifest lists it. */
typedef struct {
    char *path; /* member name, relative, e.g. "screenshots/0001.png" */
    char *kind; /* "session", "audit", "timeline", "screenshot", "artifact", "egress", ... */
    guint64 size;
    char *sha256; /* hex */
} CarrelEvidenceFile;

void carrel_evidence_file_free(CarrelEvidenceFile *file);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelEvidenceFile, carrel_evidence_file_free)

/* What a manifest says besides its files. Times are Unix seconds. */
typedef struct {
    char *session_id;
    char *session_name;
    char *template_name;
    guint template_version;
    char *state;  /* the session's state at export */
    char *policy; /* the named policy it ran under */
    gint64 created_at;
    gint64 updated_at;
    gint64 exported_at;
    char *exported_by; /* principal label */
    char *carrel_version;
    char *host_key;         /* base64 public key */
    char *host_fingerprint; /* "sha256:..." */
    GPtrArray *files;       /* CarrelEvidenceFile, in tar order */
} CarrelEvidenceManifest;

CarrelEvidenceManifest *carrel_evidence_manifest_new(void);
void carrel_evidence_manifest_free(CarrelEvidenceManifest *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelEvidenceManifest, carrel_evidence_manifest_free)
/* The manifest as pretty JSON text (the signed bytes). Pure. */
char *carrel_evidence_manifest_to_text(const CarrelEvidenceManifest *m);
/* Parses manifest text (untrusted); INVALID_ARG naming what is wrong. */
CarrelEvidenceManifest *carrel_evidence_manifest_parse(const char *text, gsize len, GError **error);

/*
 * Whether name may be a bundle member: relative, segments of [A-Za-z0-9._@+=,-] only (so no
 * control characters, spaces or quoting tricks), no "." or ".." segment, no empty segment, at
 * most CARREL_EVIDENCE_MAX_NAME bytes. INVALID_ARG naming it (escaped) otherwise.
 */
gboolean carrel_evidence_check_name(const char *name, GError **error);

/*
 * The audit rows of a bundle: one JSON object a line, carrel_audit_record_to_json plus "ts_us"
 * (the exact time the chain hash covers).
 */
char *carrel_evidence_audit_to_jsonl(GPtrArray *records);
/*
 * Checks the rows of audit.jsonl: every row's hash recomputed (carrel_audit_record_hash), seqs
 * increasing, and rows next to each other in the log (seq n, n + 1) linked by prev_hash. Rows of
 * other sessions are not in a bundle, so a gap in seqs is not a break. Returns the number of
 * rows; on a break FALSE with error naming the row.
 */
gboolean carrel_evidence_audit_check(const char *text, gsize len, const char *session_id,
                                     gint64 *ret_rows, GError **error);

/*
 * Writer: the bundle tar, written to fd (not closed) as members are added, each hashed as it
 * passes. Members are regular files 0644 owned by 0:0, all with the given mtime (the export's
 * time), so the same contents at the same time give the same tar.
 */
typedef struct _CarrelEvidenceWriter CarrelEvidenceWriter;

CarrelEvidenceWriter *carrel_evidence_writer_new(int fd, gint64 mtime, GError **error);
void carrel_evidence_writer_free(CarrelEvidenceWriter *w);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelEvidenceWriter, carrel_evidence_writer_free)
gboolean carrel_evidence_writer_add_bytes(CarrelEvidenceWriter *w, const char *name,
                                          const char *kind, const void *data, gsize len,
                                          GError **error);
/* A host file, opened without following a symlink and streamed in chunks. */
gboolean carrel_evidence_writer_add_file(CarrelEvidenceWriter *w, const char *name,
                                         const char *kind, const char *host_path, GError **error);
/* The files added so far (CarrelEvidenceFile), owned by the writer. */
GPtrArray *carrel_evidence_writer_files(CarrelEvidenceWriter *w);
/* Takes m's files from the writer, writes manifest.json and manifest.sig (signed with key) and
 * the end of the tar. */
gboolean carrel_evidence_writer_finish(CarrelEvidenceWriter *w, CarrelEvidenceManifest *m,
                                       const CarrelEvidenceKey *key, GError **error);

/* One thing wrong with a bundle, naming the file. */
typedef enum {
    CARREL_EVIDENCE_PROBLEM_CHANGED,   /* sha256 or size differs from the manifest */
    CARREL_EVIDENCE_PROBLEM_MISSING,   /* in the manifest, not in the tar */
    CARREL_EVIDENCE_PROBLEM_EXTRA,     /* in the tar, not in the manifest */
    CARREL_EVIDENCE_PROBLEM_UNSAFE,    /* a name or entry type a bundle never holds */
    CARREL_EVIDENCE_PROBLEM_DUPLICATE, /* the same name twice */
    CARREL_EVIDENCE_PROBLEM_SIGNATURE, /* manifest.sig does not verify over manifest.json */
    CARREL_EVIDENCE_PROBLEM_KEY,       /* signed by another key than the pinned one */
    CARREL_EVIDENCE_PROBLEM_MANIFEST,  /* manifest.json missing or unreadable */
    CARREL_EVIDENCE_PROBLEM_AUDIT,     /* the audit rows' hash chain breaks */
    CARREL_EVIDENCE_PROBLEM_ARCHIVE,   /* the tar itself: truncated, corrupt, too big */
    CARREL_EVIDENCE_PROBLEM_LAST
} CarrelEvidenceProblemKind;

/* Wire names: "changed", "missing", "extra", "unsafe", "duplicate", "signature", "key",
 * "manifest", "audit", "archive". */
const char *carrel_evidence_problem_to_string(CarrelEvidenceProblemKind kind);

typedef struct {
    CarrelEvidenceProblemKind kind;
    char *file; /* the member (clean text), or NULL for the archive as a whole */
    char *detail;
} CarrelEvidenceProblem;

/* What carrel_evidence_verify found. */
typedef struct {
    CarrelEvidenceManifest *manifest; /* NULL when there was none to read */
    gboolean signature_ok;
    gboolean key_pinned; /* a pin was given and the signer matched it */
    guint files_checked;
    gint64 audit_rows;
    GPtrArray *problems; /* CarrelEvidenceProblem */
} CarrelEvidenceReport;

void carrel_evidence_report_free(CarrelEvidenceReport *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelEvidenceReport, carrel_evidence_report_free)
/* TRUE when nothing is wrong. */
gboolean carrel_evidence_report_ok(const CarrelEvidenceReport *r);
/* {ok, session, signature_ok, key_pinned, fingerprint, files_checked, audit_rows,
 *  problems: [{kind, file, detail}]} */
JsonNode *carrel_evidence_report_to_json(const CarrelEvidenceReport *r);

/*
 * Verifies the bundle read from fd (a tar stream, untrusted) without extracting it: members are
 * hashed as they pass, only manifest, signature and audit rows are held in memory (bounded).
 * pin: NULL, a fingerprint ("sha256:...") or a base64 public key the signer must match. Returns
 * a report (check carrel_evidence_report_ok), also for what is no tar at all; NULL with error
 * only when out of memory.
 */
CarrelEvidenceReport *carrel_evidence_verify(int fd, const char *pin, GError **error);

G_END_DECLS
