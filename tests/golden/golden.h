/*
 * The harness shared by the golden tests: every tests/data/<subdir>/<case>.json is handed to a
 * generator, whose output must match <case>.<suffix> byte for byte or, when <case>.err exists,
 * whose error must match it exactly ("code: message"). CARREL_TEST_REGENERATE=1 rewrites the
 * expected files: review that diff.
 */
#pragma once

#include <json-glib/json-glib.h>

/* Output for one case (root is the case file's object), or NULL with a CARREL_ERROR. */
typedef char *(*GoldenGenerate)(JsonObject *root, GError **error);

/* Refuses (g_error) members of root outside allowed: a typo must not test a default instead. */
void golden_check_members(JsonObject *root, const char *const *allowed, const char *path);

/* Registers a test per case of CARREL_TEST_DATA/subdir, sorted by name, and runs them. */
int golden_main(int argc, char **argv, const char *subdir, const char *suffix,
                GoldenGenerate generate);
