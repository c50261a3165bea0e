/*
 * carrel export ID -o FILE: a session's signed evidence bundle; carrel verify FILE: checks one
 * offline (no daemon, no token), with the evidence module's streaming reader.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <gio/gunixoutputstream.h>
#include <glib/gstdio.h>

#include "cli/cli.h"
#include "evidence/evidence.h"

/* Where the bundle goes: stdout, or a temporary file beside out renamed over it at the end, so
 * a failed export never leaves half a bundle under the name asked for. */
static GOutputStream *
open_out(const char *out, char **ret_tmp, GError **error)
{
    g_autofree char *dir = NULL;
    g_autofree char *tmpl = NULL;
    int fd;

    if (g_str_equal(out, "-"))
        return g_unix_output_stream_new(STDOUT_FILENO, FALSE);
    dir = g_path_get_dirname(out);
    tmpl = g_build_filename(dir, ".carrel-export-XXXXXX", NULL);
    fd = g_mkstemp_full(tmpl, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "creating a file in '%s': %s", dir,
                    g_strerror(errno));
        return NULL;
    }
    *ret_tmp = g_steal_pointer(&tmpl);
    return g_unix_output_stream_new(fd, TRUE);
}

/* The bundle just written, read back: a summary, and proof it arrived whole. */
static CarrelEvidenceReport *
check_written(const char *path, GError **error)
{
    int fd = g_open(path, O_RDONLY | O_CLOEXEC, 0);
    CarrelEvidenceReport *r;

    if (fd < 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "reading '%s': %s", path,
                    g_strerror(errno));
        return NULL;
    }
    r = carrel_evidence_verify(fd, NULL, error);
    close(fd);
    if (r && !carrel_evidence_report_ok(r)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "the bundle carreld sent does not verify (carrel verify '%s' says why)", path);
        carrel_evidence_report_free(r);
        return NULL;
    }
    return r;
}

static int
export_summary(CarrelCli *cli, const char *out, const CarrelClientDownload *info,
               const CarrelEvidenceReport *r)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) node = NULL;
    g_autofree char *shown = carrel_cli_clean_text(out);

    if (!cli->json) {
        g_printerr("exported session %s: %u files, %" G_GUINT64_FORMAT
                   " bytes to %s, signed by %s\n",
                   r->manifest->session_id, r->files_checked, info->bytes, shown,
                   r->manifest->host_fingerprint);
        return CARREL_CLI_EXIT_OK;
    }
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "session");
    json_builder_add_string_value(b, r->manifest->session_id);
    json_builder_set_member_name(b, "file");
    json_builder_add_string_value(b, out);
    json_builder_set_member_name(b, "bytes");
    json_builder_add_int_value(b, (gint64)info->bytes);
    json_builder_set_member_name(b, "sha256");
    json_builder_add_string_value(b, info->sha256);
    json_builder_set_member_name(b, "files");
    json_builder_add_int_value(b, r->files_checked);
    json_builder_set_member_name(b, "audit_rows");
    json_builder_add_int_value(b, r->audit_rows);
    json_builder_set_member_name(b, "fingerprint");
    json_builder_add_string_value(b, r->manifest->host_fingerprint);
    json_builder_end_object(b);
    node = json_builder_get_root(b);
    carrel_cli_print_json(cli, node);
    return CARREL_CLI_EXIT_OK;
}

int
carrel_cli_export(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *out = NULL;
    const GOptionEntry entries[] = {
        {"output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "File to write ('-': stdout)", "FILE"},
        G_OPTION_ENTRY_NULL,
    };
    g_autofree char *path = NULL;
    g_autofree char *tmp = NULL;
    g_autoptr(GOutputStream) stream = NULL;
    g_autoptr(CarrelEvidenceReport) r = NULL;
    g_auto(CarrelClientDownload) info = {0};
    g_autoptr(GError) error = NULL;
    gboolean ok;

    if (!carrel_cli_parse_options(cli, "ID -o FILE",
                                  "Writes a session's signed evidence bundle (a tar: audit rows, "
                                  "timeline, screenshots, artifacts, egress log, policy, "
                                  "manifest.json and the host key's manifest.sig). Any state, "
                                  "destroyed included. Check it with 'carrel verify'.",
                                  entries, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (!out)
        return carrel_cli_usage(cli, "export needs -o FILE ('-' for stdout)");
    if (cli->json && g_str_equal(out, "-"))
        return carrel_cli_usage(cli, "--json and '-o -' both want stdout");
    if (!(path = carrel_cli_item_path("sessions", argv[1], "export")))
        return carrel_cli_usage(cli, "invalid session '%s'", argv[1]);
    if (!(stream = open_out(out, &tmp, &error)))
        return carrel_cli_fail(cli, error);
    carrel_cli_transfer_begin(cli, "export");
    ok = carrel_client_download(cli->client, path, stream, &info, &error) &&
         g_output_stream_close(stream, NULL, &error);
    carrel_cli_transfer_end(cli);
    if (ok && tmp && !(r = check_written(tmp, &error)))
        ok = FALSE;
    if (ok && tmp && g_rename(tmp, out) != 0) {
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_FAILED, "writing '%s': %s", out,
                    g_strerror(errno));
        ok = FALSE;
    }
    if (!ok) {
        if (tmp)
            (void)g_unlink(tmp);
        return carrel_cli_fail(cli, error);
    }
    return r ? export_summary(cli, out, &info, r) : CARREL_CLI_EXIT_OK;
}

/* --key: a fingerprint, or a file holding a public key (base64) or a fingerprint, or the
 * public key itself. */
static char *
read_pin(const char *key, GError **error)
{
    g_autofree char *text = NULL;
    gsize len = 0;

    if (g_str_has_prefix(key, "sha256:") || !g_file_test(key, G_FILE_TEST_EXISTS))
        return g_strstrip(g_strdup(key));
    if (!g_file_get_contents(key, &text, &len, error))
        return NULL;
    if (len > 4096 || strlen(text) != len) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "'%s' does not hold a public key or a fingerprint", key);
        return NULL;
    }
    return g_strstrip(g_steal_pointer(&text));
}

static void
print_report(const CarrelEvidenceReport *r)
{
    const CarrelEvidenceManifest *m = r->manifest;

    if (m) {
        g_autofree char *session = carrel_cli_clean_text(m->session_id);
        g_autofree char *tmpl = carrel_cli_clean_text(m->template_name ? m->template_name : "?");
        g_autofree char *by = carrel_cli_clean_text(m->exported_by ? m->exported_by : "?");
        g_autofree char *fp =
            carrel_cli_clean_text(m->host_fingerprint ? m->host_fingerprint : "?");
        g_print("session:    %s (template %s), exported by %s\n", session, tmpl, by);
        g_print("signed by:  %s (%s, %s)\n", fp, r->signature_ok ? "signature ok" : "BAD SIGNATURE",
                r->key_pinned ? "the pinned key" : "key not pinned: pass --key to check who");
        g_print("files:      %u checked, %" G_GINT64_FORMAT " audit rows\n", r->files_checked,
                r->audit_rows);
    }
    for (guint i = 0; i < r->problems->len; i++) {
        const CarrelEvidenceProblem *p = g_ptr_array_index(r->problems, i);
        g_autofree char *detail = carrel_cli_clean_text(p->detail ? p->detail : "");

        g_print("%-10s  %s: %s\n", carrel_evidence_problem_to_string(p->kind),
                p->file ? p->file : "(archive)", detail);
    }
    g_print("%s\n", carrel_evidence_report_ok(r) ? "OK" : "FAILED");
}

int
carrel_cli_verify(CarrelCli *cli, int argc, char **argv)
{
    g_autofree char *key = NULL;
    const GOptionEntry entries[] = {
        {"key", 0, 0, G_OPTION_ARG_STRING, &key,
         "The host key it must be signed by: a fingerprint (sha256:...), a public key, or a file "
         "holding either (carrel version --json shows them)",
         "KEY"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(CarrelEvidenceReport) r = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *pin = NULL;
    int fd;

    if (!carrel_cli_parse_options(cli, "BUNDLE",
                                  "Checks an evidence bundle offline (no daemon, no token): the "
                                  "signature over its manifest, every file's sha256 and size, "
                                  "files missing or not listed, and the audit rows' hash chain. "
                                  "'-' reads stdin. Exit 0 when all holds, 10 otherwise.",
                                  entries, 1, 1, &argc, &argv))
        return CARREL_CLI_EXIT_USAGE;
    if (key && !(pin = read_pin(key, &error)))
        return carrel_cli_fail(cli, error);
    fd = g_str_equal(argv[1], "-") ? dup(STDIN_FILENO) : g_open(argv[1], O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        g_set_error(&error, CARREL_ERROR, CARREL_ERROR_NOT_FOUND, "cannot read '%s': %s", argv[1],
                    g_strerror(errno));
        return carrel_cli_fail(cli, error);
    }
    r = carrel_evidence_verify(fd, pin, &error);
    close(fd);
    if (!r)
        return carrel_cli_fail(cli, error);
    if (cli->json) {
        g_autoptr(JsonNode) node = carrel_evidence_report_to_json(r);
        carrel_cli_print_json(cli, node);
    } else {
        print_report(r);
    }
    return carrel_evidence_report_ok(r) ? CARREL_CLI_EXIT_OK : CARREL_CLI_EXIT_BUNDLE_BROKEN;
}
