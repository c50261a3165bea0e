/*
 * evidence: the host key. Ed25519 through GnuTLS: the TLS library carreld's stack already
 * carries (libsoup's TLS is GnuTLS), with standard PKCS#8 PEM key files an admin can inspect
 * with certtool or openssl. The private key never leaves this file's functions, and no message
 * here ever holds key material.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "evidence/evidence.h"

#define ED25519_PUBLIC_BYTES 32
#define KEY_FILE_MAX 16384

struct _CarrelEvidenceKey {
    gnutls_privkey_t priv; /* NULL for a public key */
    gnutls_pubkey_t pub;
    char *public_b64;
    char *fingerprint;
};

void
carrel_evidence_key_free(CarrelEvidenceKey *key)
{
    if (!key)
        return;
    if (key->priv)
        gnutls_privkey_deinit(key->priv);
    if (key->pub)
        gnutls_pubkey_deinit(key->pub);
    g_free(key->public_b64);
    g_free(key->fingerprint);
    g_free(key);
}

static gboolean
gnutls_failed(int rc, const char *what, GError **error)
{
    if (rc >= 0)
        return FALSE;
    g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "%s: %s", what, gnutls_strerror(rc));
    return TRUE;
}

/* Fills public_b64 and fingerprint from the raw public key bytes. */
static void
set_public_text(CarrelEvidenceKey *key, const guint8 *raw, gsize len)
{
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);

    g_checksum_update(sum, raw, len);
    key->public_b64 = g_base64_encode(raw, len);
    key->fingerprint = g_strconcat("sha256:", g_checksum_get_string(sum), NULL);
}

/* The public half of key->priv, as a pubkey and as text. */
static gboolean
derive_public(CarrelEvidenceKey *key, GError **error)
{
    gnutls_datum_t x = {0};
    gnutls_ecc_curve_t curve = GNUTLS_ECC_CURVE_INVALID;
    int rc;

    if (gnutls_failed(gnutls_pubkey_init(&key->pub), "host key", error) ||
        gnutls_failed(gnutls_pubkey_import_privkey(key->pub, key->priv, 0, 0), "host key", error))
        return FALSE;
    rc = gnutls_pubkey_export_ecc_raw2(key->pub, &curve, &x, NULL, 0);
    if (gnutls_failed(rc, "host key", error))
        return FALSE;
    if (curve != GNUTLS_ECC_CURVE_ED25519 || x.size != ED25519_PUBLIC_BYTES) {
        gnutls_free(x.data);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "host key is not an Ed25519 key");
        return FALSE;
    }
    set_public_text(key, x.data, x.size);
    gnutls_free(x.data);
    return TRUE;
}

/* Reads the key file: a regular file, not a symlink, only its owner may read it. */
static gboolean
read_key_file(const char *path, char **ret_text, gsize *ret_len, GError **error)
{
    int fd = g_open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
    g_autoptr(GString) text = g_string_new(NULL);
    struct stat st;
    char buf[4096];
    ssize_t n;

    if (fd < 0 || fstat(fd, &st) < 0) {
        int saved = errno;
        if (fd >= 0)
            close(fd);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "host key '%s': %s", path,
                    g_strerror(saved));
        return FALSE;
    }
    if (!S_ISREG(st.st_mode) || (st.st_mode & 077) || st.st_size > KEY_FILE_MAX) {
        close(fd);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN,
                    "host key '%s' must be a regular file of mode 0600 (at most %d bytes)", path,
                    KEY_FILE_MAX);
        return FALSE;
    }
    while ((n = read(fd, buf, sizeof buf)) > 0 && text->len <= KEY_FILE_MAX)
        g_string_append_len(text, buf, n);
    close(fd);
    if (n < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "host key '%s': read failed", path);
        return FALSE;
    }
    *ret_len = text->len;
    *ret_text = g_string_free(g_steal_pointer(&text), FALSE);
    return TRUE;
}

static CarrelEvidenceKey *
load_key(const char *path, GError **error)
{
    g_autoptr(CarrelEvidenceKey) key = g_new0(CarrelEvidenceKey, 1);
    g_autofree char *text = NULL;
    gsize len = 0;
    gnutls_datum_t data;
    int rc;

    if (!read_key_file(path, &text, &len, error))
        return NULL;
    data = (gnutls_datum_t){.data = (unsigned char *)text, .size = (unsigned)len};
    if (gnutls_failed(gnutls_privkey_init(&key->priv), "host key", error))
        return NULL;
    rc = gnutls_privkey_import_x509_raw(key->priv, &data, GNUTLS_X509_FMT_PEM, NULL, 0);
    explicit_bzero(text, len);
    if (rc < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "host key '%s' is not a PKCS#8 PEM private key: %s", path, gnutls_strerror(rc));
        return NULL;
    }
    if (gnutls_privkey_get_pk_algorithm(key->priv, NULL) != GNUTLS_PK_EDDSA_ED25519) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "host key '%s' is not an Ed25519 key", path);
        return NULL;
    }
    if (!derive_public(key, error))
        return NULL;
    return g_steal_pointer(&key);
}

/* Writes pem to a new file at path: O_EXCL, so neither an existing file nor a symlink is
 * followed or replaced, and 0600 from the start. */
static gboolean
write_new_key_file(const char *path, const gnutls_datum_t *pem, GError **error)
{
    int fd = g_open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    gsize done = 0;

    if (fd < 0) {
        g_set_error(error, CARREL_ERROR, errno == EEXIST ? CARREL_ERROR_EXISTS : CARREL_ERROR_DISK,
                    "creating host key '%s': %s", path, g_strerror(errno));
        return FALSE;
    }
    while (done < pem->size) {
        ssize_t n = write(fd, pem->data + done, pem->size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (gsize)n;
    }
    if (done < pem->size || fsync(fd) < 0) {
        int saved = errno;
        close(fd);
        (void)g_unlink(path);
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_DISK, "writing host key '%s': %s", path,
                    g_strerror(saved));
        return FALSE;
    }
    close(fd);
    return TRUE;
}

static gboolean
create_key(const char *path, GError **error)
{
    gnutls_privkey_t priv = NULL;
    gnutls_x509_privkey_t x509 = NULL;
    gnutls_datum_t pem = {0};
    gboolean ok = FALSE;

    if (gnutls_failed(gnutls_privkey_init(&priv), "generating host key", error))
        return FALSE;
    if (!gnutls_failed(gnutls_privkey_generate2(priv, GNUTLS_PK_EDDSA_ED25519, 256, 0, NULL, 0),
                       "generating host key", error) &&
        !gnutls_failed(gnutls_privkey_export_x509(priv, &x509), "generating host key", error) &&
        !gnutls_failed(gnutls_x509_privkey_export2_pkcs8(x509, GNUTLS_X509_FMT_PEM, NULL,
                                                         GNUTLS_PKCS_PLAIN, &pem),
                       "generating host key", error))
        ok = write_new_key_file(path, &pem, error);
    if (pem.data) {
        explicit_bzero(pem.data, pem.size);
        gnutls_free(pem.data);
    }
    if (x509)
        gnutls_x509_privkey_deinit(x509);
    gnutls_privkey_deinit(priv);
    return ok;
}

CarrelEvidenceKey *
carrel_evidence_key_load_or_create(const char *path, GError **error)
{
    g_autoptr(GError) local = NULL;

    if (!g_file_test(path, G_FILE_TEST_EXISTS) && !g_file_test(path, G_FILE_TEST_IS_SYMLINK) &&
        !create_key(path, &local) && !g_error_matches(local, CARREL_ERROR, CARREL_ERROR_EXISTS)) {
        g_propagate_error(error, g_steal_pointer(&local));
        return NULL;
    }
    /* EXISTS: another process created it first; loading it is right. */
    return load_key(path, error);
}

CarrelEvidenceKey *
carrel_evidence_key_new_public(const char *base64, GError **error)
{
    g_autoptr(CarrelEvidenceKey) key = g_new0(CarrelEvidenceKey, 1);
    g_autofree guint8 *raw = NULL;
    g_autofree char *text = g_strstrip(g_strdup(base64 ? base64 : ""));
    gsize len = 0;
    gnutls_datum_t x;

    if (*text &&
        strspn(text, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") ==
            strlen(text))
        raw = g_base64_decode(text, &len);
    if (len != ED25519_PUBLIC_BYTES) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a public key is the base64 of 32 bytes (an Ed25519 key)");
        return NULL;
    }
    x = (gnutls_datum_t){.data = raw, .size = (unsigned)len};
    if (gnutls_failed(gnutls_pubkey_init(&key->pub), "public key", error) ||
        gnutls_failed(gnutls_pubkey_import_ecc_raw(key->pub, GNUTLS_ECC_CURVE_ED25519, &x, NULL),
                      "public key", error))
        return NULL;
    set_public_text(key, raw, len);
    return g_steal_pointer(&key);
}

const char *
carrel_evidence_key_public(const CarrelEvidenceKey *key)
{
    return key->public_b64;
}

const char *
carrel_evidence_key_fingerprint(const CarrelEvidenceKey *key)
{
    return key->fingerprint;
}

char *
carrel_evidence_key_sign(const CarrelEvidenceKey *key, const guint8 *data, gsize len,
                         GError **error)
{
    gnutls_datum_t in = {.data = (unsigned char *)data, .size = (unsigned)len};
    gnutls_datum_t sig = {0};
    char *text;

    if (!key->priv) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED, "a public key cannot sign");
        return NULL;
    }
    if (len > G_MAXUINT32) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_LIMIT, "too much data to sign");
        return NULL;
    }
    if (gnutls_failed(gnutls_privkey_sign_data2(key->priv, GNUTLS_SIGN_EDDSA_ED25519, 0, &in, &sig),
                      "signing", error))
        return NULL;
    text = g_base64_encode(sig.data, sig.size);
    gnutls_free(sig.data);
    return text;
}

gboolean
carrel_evidence_key_verify(const CarrelEvidenceKey *key, const guint8 *data, gsize len,
                           const char *signature, GError **error)
{
    g_autofree char *text = g_strstrip(g_strdup(signature ? signature : ""));
    g_autofree guint8 *raw = NULL;
    gsize raw_len = 0;
    gnutls_datum_t in = {.data = (unsigned char *)data, .size = (unsigned)len};
    gnutls_datum_t sig;

    if (*text &&
        strspn(text, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") ==
            strlen(text))
        raw = g_base64_decode(text, &raw_len);
    sig = (gnutls_datum_t){.data = raw, .size = (unsigned)raw_len};
    if (!raw || raw_len == 0 || len > G_MAXUINT32 ||
        gnutls_pubkey_verify_data2(key->pub, GNUTLS_SIGN_EDDSA_ED25519, 0, &in, &sig) < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FORBIDDEN,
                    "the signature does not verify with key %s", key->fingerprint);
        return FALSE;
    }
    return TRUE;
}
