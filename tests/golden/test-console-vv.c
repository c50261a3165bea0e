/*
 * Golden test of the remote-viewer files: every tests/data/console-vv/<case>.json, an object
 * {"title", "port", "password"}, is given to carrel_spice_vv_file and the file must match
 * <case>.vv exactly (or its error <case>.err). CARREL_TEST_REGENERATE=1 rewrites the expected
 * files: review that diff.
 */
#include "api/api-console-priv.h"
#include "tests/golden/golden.h"

static const char *const case_members[] = {"title", "port", "password", NULL};

static char *
generate(JsonObject *root, GError **error)
{
    CarrelVvSpec spec = {0};

    golden_check_members(root, case_members, "a console-vv case");
    spec.title = json_object_get_string_member_with_default(root, "title", NULL);
    spec.port = (guint)json_object_get_int_member_with_default(root, "port", 0);
    spec.password = json_object_get_string_member_with_default(root, "password", NULL);
    return carrel_spice_vv_file(&spec, error);
}

int
main(int argc, char **argv)
{
    return golden_main(argc, argv, "console-vv", ".vv", generate);
}
