/*
 * Golden test of bundle manifests: every tests/data/evidence-manifest/<case>.json (the fields of
 * a CarrelEvidenceManifest) is given to carrel_evidence_manifest_to_text and the text must match
 * <case>.manifest exactly (or its error <case>.err): these are the bytes the host key signs.
 * The text must also parse back to the same text. CARREL_TEST_REGENERATE=1 rewrites the
 * expected files: review that diff.
 */
#include <string.h>

#include "evidence/evidence.h"
#include "tests/golden/golden.h"

static const char *const case_members[] = {
    "session_id",  "session_name", "template",    "template_version", "state",          "policy",
    "created_at",  "updated_at",   "exported_at", "exported_by",      "carrel_version", "host_key",
    "fingerprint", "files",        NULL};

static char *
dup_string(JsonObject *root, const char *name)
{
    return g_strdup(json_object_get_string_member_with_default(root, name, NULL));
}

static char *
generate(JsonObject *root, GError **error)
{
    g_autoptr(CarrelEvidenceManifest) m = carrel_evidence_manifest_new();
    g_autoptr(CarrelEvidenceManifest) back = NULL;
    JsonArray *files = json_object_get_array_member(root, "files");
    g_autofree char *text = NULL;
    g_autofree char *again = NULL;

    golden_check_members(root, case_members, "an evidence-manifest case");
    m->session_id = dup_string(root, "session_id");
    m->session_name = dup_string(root, "session_name");
    m->template_name = dup_string(root, "template");
    m->template_version =
        (guint)json_object_get_int_member_with_default(root, "template_version", 0);
    m->state = dup_string(root, "state");
    m->policy = dup_string(root, "policy");
    m->created_at = json_object_get_int_member_with_default(root, "created_at", 0);
    m->updated_at = json_object_get_int_member_with_default(root, "updated_at", 0);
    m->exported_at = json_object_get_int_member_with_default(root, "exported_at", 0);
    m->exported_by = dup_string(root, "exported_by");
    m->carrel_version = dup_string(root, "carrel_version");
    m->host_key = dup_string(root, "host_key");
    m->host_fingerprint = dup_string(root, "fingerprint");
    for (guint i = 0; files && i < json_array_get_length(files); i++) {
        JsonObject *o = json_array_get_object_element(files, i);
        CarrelEvidenceFile *f = g_new0(CarrelEvidenceFile, 1);

        f->path = dup_string(o, "path");
        f->kind = dup_string(o, "kind");
        f->size = (guint64)json_object_get_int_member_with_default(o, "size", 0);
        f->sha256 = dup_string(o, "sha256");
        g_ptr_array_add(m->files, f);
    }
    text = carrel_evidence_manifest_to_text(m);
    /* What a verifier reads back must say the same. */
    if (!(back = carrel_evidence_manifest_parse(text, strlen(text), error)))
        return NULL;
    again = carrel_evidence_manifest_to_text(back);
    if (!g_str_equal(text, again))
        g_error("the manifest does not parse back to itself:\n%s\n---\n%s", text, again);
    return g_steal_pointer(&text);
}

int
main(int argc, char **argv)
{
    return golden_main(argc, argv, "evidence-manifest", ".manifest", generate);
}
