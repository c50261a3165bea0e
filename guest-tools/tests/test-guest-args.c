/* carrel-guest: command-line parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "guest.h"

/* Parses a NULL-terminated argument list (without the program name). */
static CarrelGuestOptions *
parse(GError **error, ...)
{
    g_autoptr(GPtrArray) args = g_ptr_array_new();
    va_list ap;
    const char *arg;

    g_ptr_array_add(args, (char *)"carrel-guest");
    va_start(ap, error);
    while ((arg = va_arg(ap, const char *)))
        g_ptr_array_add(args, (char *)arg);
    va_end(ap);
    return carrel_guest_options_parse((int)args->len, (char **)args->pdata, error);
}

static void
assert_parse_error(CarrelGuestOptions *options, GError *error, CarrelGuestErrorCode code,
                   const char *fragment)
{
    assert_null(options);
    assert_non_null(error);
    assert_true(g_error_matches(error, CARREL_GUEST_ERROR, (int)code));
    if (fragment && !strstr(error->message, fragment))
        fail_msg("'%s' not in '%s'", fragment, error->message);
}

static void
test_defaults(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelGuestOptions) ready = parse(&error, "ready", NULL);
    g_autoptr(CarrelGuestOptions) get = parse(&error, "clipboard", "get", NULL);
    g_autoptr(CarrelGuestOptions) windows = parse(&error, "windows", NULL);
    g_autoptr(CarrelGuestOptions) read = parse(&error, "proc", "read", "p1", NULL);
    g_autoptr(CarrelGuestOptions) waiting =
        parse(&error, "proc", "read", "p1", "0", "0", "--timeout", "1.5", NULL);

    assert_null(error);
    /* A read answers at once unless told to wait. */
    assert_int_equal(read->timeout_ms, 0);
    assert_int_equal(waiting->timeout_ms, 1500);
    assert_int_equal(ready->command, CARREL_GUEST_COMMAND_READY);
    assert_string_equal(ready->display, ":0");
    assert_null(ready->xauthority);
    assert_int_equal(ready->timeout_ms, 60000);
    assert_int_equal(get->command, CARREL_GUEST_COMMAND_CLIPBOARD_GET);
    assert_int_equal(get->timeout_ms, 5000);
    assert_int_equal(windows->command, CARREL_GUEST_COMMAND_WINDOWS);
    assert_null(windows->argv[0]);
}

static void
test_options_anywhere(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelGuestOptions) a =
        parse(&error, "--display", ":3", "ready", "--timeout=2.5", "--xauthority", "/x/a", NULL);
    g_autoptr(CarrelGuestOptions) b = parse(&error, "ready", "--timeout", "0", NULL);

    assert_null(error);
    assert_string_equal(a->display, ":3");
    assert_string_equal(a->xauthority, "/x/a");
    assert_int_equal(a->timeout_ms, 2500);
    assert_int_equal(b->timeout_ms, 0);
}

static void
test_launch_passes_arguments_through(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelGuestOptions) options = parse(&error, "launch", "--user", "agent", "xterm",
                                                  "-title", "--display", "x y", "--", NULL);

    assert_null(error);
    assert_int_equal(options->command, CARREL_GUEST_COMMAND_LAUNCH);
    assert_string_equal(options->user, "agent");
    assert_string_equal(options->display, ":0");
    assert_int_equal(g_strv_length(options->argv), 5);
    assert_string_equal(options->argv[0], "xterm");
    assert_string_equal(options->argv[2], "--display");
    assert_string_equal(options->argv[4], "--");
}

static void
test_double_dash(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelGuestOptions) set = parse(&error, "clipboard", "set", "--", "--stdin", NULL);
    g_autoptr(CarrelGuestOptions) launch = parse(&error, "launch", "--", "-weird", "-x", NULL);

    assert_null(error);
    assert_int_equal(set->command, CARREL_GUEST_COMMAND_CLIPBOARD_SET);
    assert_false(set->use_stdin);
    assert_string_equal(set->text, "--stdin");
    assert_string_equal(launch->argv[0], "-weird");
    assert_string_equal(launch->argv[1], "-x");
}

static void
test_clipboard_set(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelGuestOptions) text = parse(&error, "clipboard", "set", "héllo\n", NULL);
    g_autoptr(CarrelGuestOptions) in = parse(&error, "clipboard", "set", "--stdin", NULL);
    g_autoptr(CarrelGuestOptions) none = NULL;
    g_autoptr(CarrelGuestOptions) both = NULL;

    assert_null(error);
    assert_string_equal(text->text, "héllo\n");
    assert_true(in->use_stdin);
    assert_null(in->text);
    none = parse(&error, "clipboard", "set", NULL);
    assert_parse_error(none, error, CARREL_GUEST_ERROR_INVALID_ARG, "clipboard set");
    g_clear_error(&error);
    both = parse(&error, "clipboard", "set", "--stdin", "text", NULL);
    assert_parse_error(both, error, CARREL_GUEST_ERROR_INVALID_ARG, NULL);
}

static void
test_type(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelGuestOptions) text = parse(&error, "type", "na\xc3\xafve \xe4\xb8\xad", NULL);
    g_autoptr(CarrelGuestOptions) in = parse(&error, "--display", ":1", "type", "--stdin", NULL);
    g_autofree char *over = g_strnfill(CARREL_GUEST_LIMIT_TYPE_BYTES + 1, 'a');
    g_autoptr(CarrelGuestOptions) none = NULL;
    g_autoptr(CarrelGuestOptions) both = NULL;
    g_autoptr(CarrelGuestOptions) too_big = NULL;
    g_autoptr(CarrelGuestOptions) user = NULL;

    assert_null(error);
    assert_int_equal(text->command, CARREL_GUEST_COMMAND_TYPE);
    assert_string_equal(text->text, "na\xc3\xafve \xe4\xb8\xad");
    assert_int_equal(text->timeout_ms, CARREL_GUEST_DEFAULT_TYPE_TIMEOUT_MS);
    assert_true(in->use_stdin);
    assert_null(in->text);
    assert_string_equal(in->display, ":1");
    assert_string_equal(carrel_guest_command_to_string(CARREL_GUEST_COMMAND_TYPE), "type");
    none = parse(&error, "type", NULL);
    assert_parse_error(none, error, CARREL_GUEST_ERROR_INVALID_ARG, "type");
    g_clear_error(&error);
    both = parse(&error, "type", "--stdin", "text", NULL);
    assert_parse_error(both, error, CARREL_GUEST_ERROR_INVALID_ARG, NULL);
    g_clear_error(&error);
    too_big = parse(&error, "type", over, NULL);
    assert_parse_error(too_big, error, CARREL_GUEST_ERROR_LIMIT, "typed text is larger");
    g_clear_error(&error);
    user = parse(&error, "type", "--user", "bob", "x", NULL);
    assert_parse_error(user, error, CARREL_GUEST_ERROR_INVALID_ARG, "does not apply to 'type'");
    assert_non_null(strstr(carrel_guest_usage(), "type TEXT|--stdin"));
}

static void
test_clipboard_text_limit(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *max = g_strnfill(CARREL_GUEST_LIMIT_CLIPBOARD_BYTES, 'a');
    g_autofree char *over = g_strnfill(CARREL_GUEST_LIMIT_CLIPBOARD_BYTES + 1, 'a');
    g_autoptr(CarrelGuestOptions) ok = parse(&error, "clipboard", "set", max, NULL);
    g_autoptr(CarrelGuestOptions) too_big = NULL;

    assert_null(error);
    assert_int_equal(strlen(ok->text), CARREL_GUEST_LIMIT_CLIPBOARD_BYTES);
    too_big = parse(&error, "clipboard", "set", over, NULL);
    assert_parse_error(too_big, error, CARREL_GUEST_ERROR_LIMIT, NULL);
}

static void
test_errors(void **state)
{
    static const struct {
        const char *args[6];
        const char *fragment;
    } cases[] = {
        {{NULL}, "missing command"},
        {{"frobnicate", NULL}, "unknown command 'frobnicate'"},
        {{"clipboard", NULL}, "clipboard get"},
        {{"clipboard", "peek", NULL}, "clipboard get"},
        {{"ready", "extra", NULL}, "takes no arguments"},
        {{"ready", "--user", "agent", NULL}, "'--user' does not apply to 'ready'"},
        {{"windows", "--timeout", "3", NULL}, "does not apply to 'windows'"},
        {{"ready", "--timeout", "-1", NULL}, "invalid timeout"},
        {{"ready", "--timeout", "3601", NULL}, "invalid timeout"},
        {{"ready", "--timeout", "nan", NULL}, "invalid timeout"},
        {{"ready", "--timeout", "2s", NULL}, "invalid timeout"},
        {{"ready", "--timeout", NULL}, "needs a value"},
        {{"ready", "--display", "0", NULL}, "invalid value '0'"},
        {{"ready", "--display", ":x", NULL}, "invalid value"},
        {{"ready", "--display", ":1", "--display", ":2", NULL}, "given twice"},
        {{"ready", "--xauthority", "relative", NULL}, "invalid value"},
        {{"launch", "--user", "a b", "x", NULL}, "invalid value"},
        {{"launch", "--user", "", "x", NULL}, "invalid value"},
        {{"launch", NULL}, "takes 1 to"},
        {{"open", "a", "b", NULL}, "takes 1 to 1"},
        {{"set-mac", NULL}, "takes 1 to 1"},
        {{"set-mac", "02:00:00:00:00:01", "x", NULL}, "takes 1 to 1"},
        {{"set-mac", "--display", ":1", "02:00:00:00:00:01", NULL}, "does not apply to 'set-mac'"},
        {{"set-net", NULL}, "takes 1 to 3"},
        {{"set-net", "10.77.0.5/16", "10.77.0.1", NULL}, "'ADDRESS/PREFIX GATEWAY DNS' or 'none'"},
        {{"set-net", "a", "b", "c", "d", NULL}, "takes 1 to 3"},
        {{"set-net", "--timeout", "3", "none", NULL}, "does not apply to 'set-net'"},
        {{"ready", "--stdin=yes", NULL}, "takes no value"},
        {{"ready", "-x", NULL}, "unknown option '-x'"},
        {{"ready", "--nope", NULL}, "unknown option '--nope'"},
        {{"version", "--display", ":1", NULL}, "does not apply to 'version'"},
    };

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(GPtrArray) args = g_ptr_array_new();
        g_autoptr(CarrelGuestOptions) options = NULL;

        g_ptr_array_add(args, (char *)"carrel-guest");
        for (guint j = 0; cases[i].args[j]; j++)
            g_ptr_array_add(args, (char *)cases[i].args[j]);
        options = carrel_guest_options_parse((int)args->len, (char **)args->pdata, &error);
        assert_parse_error(options, error, CARREL_GUEST_ERROR_INVALID_ARG, cases[i].fragment);
        assert_int_equal(carrel_guest_error_exit_status(error), 2);
    }
}

static void
test_launch_limits(void **state)
{
    g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelGuestOptions) options = NULL;
    g_autofree char *big = g_strnfill(CARREL_GUEST_LIMIT_ARGS_BYTES, 'a');

    g_ptr_array_add(args, g_strdup("carrel-guest"));
    g_ptr_array_add(args, g_strdup("launch"));
    for (guint i = 0; i <= CARREL_GUEST_LIMIT_ARGS; i++)
        g_ptr_array_add(args, g_strdup("x"));
    options = carrel_guest_options_parse((int)args->len, (char **)args->pdata, &error);
    assert_parse_error(options, error, CARREL_GUEST_ERROR_INVALID_ARG, "takes 1 to 256");
    g_clear_error(&error);
    g_ptr_array_set_size(args, 3);
    g_ptr_array_add(args, g_strdup(big));
    options = carrel_guest_options_parse((int)args->len, (char **)args->pdata, &error);
    assert_parse_error(options, error, CARREL_GUEST_ERROR_LIMIT, "longer than");
}

static void
test_set_net(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelGuestOptions) none = parse(&error, "set-net", "none", NULL);
    g_autoptr(CarrelGuestOptions) full =
        parse(&error, "set-net", "10.77.0.5/16", "10.77.0.1", "10.77.0.1", NULL);

    /* The values are set-net's to check (carrel_guest_net_config_parse); only the count here. */
    assert_null(error);
    assert_int_equal(none->command, CARREL_GUEST_COMMAND_SET_NET);
    assert_int_equal(g_strv_length(none->argv), 1);
    assert_string_equal(none->argv[0], "none");
    assert_int_equal(g_strv_length(full->argv), 3);
    assert_string_equal(full->argv[2], "10.77.0.1");
    assert_string_equal(carrel_guest_command_to_string(CARREL_GUEST_COMMAND_SET_NET), "set-net");
    assert_non_null(strstr(carrel_guest_usage(), "set-net none"));
}

static void
test_screen(void **state)
{
    static const char *const bad[] = {"",         "x",         "1280",      "1280x",   "x800",
                                      "1280X800", "01280x800", "-640x480",  "199x480", "640x199",
                                      "8193x800", "800x8193",  "1280x800x", "12a0x800"};
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelGuestOptions) ok = parse(&error, "screen", "1280x800", NULL);
    guint w = 0, h = 0;

    assert_null(error);
    assert_int_equal(ok->command, CARREL_GUEST_COMMAND_SCREEN);
    assert_string_equal(ok->argv[0], "1280x800");
    assert_int_equal(ok->timeout_ms, CARREL_GUEST_DEFAULT_SCREEN_TIMEOUT_MS);
    assert_true(carrel_guest_screen_parse("1280x800", &w, &h, &error));
    assert_int_equal(w, 1280);
    assert_int_equal(h, 800);
    assert_true(carrel_guest_screen_parse("8192x200", &w, &h, &error));
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) local = NULL;

        if (carrel_guest_screen_parse(bad[i], &w, &h, &local))
            fail_msg("'%s' was accepted", bad[i]);
        assert_true(g_error_matches(local, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG));
    }
    assert_null(parse(&error, "screen", NULL));
    g_clear_error(&error);
    assert_null(parse(&error, "screen", "800x600", "1x1", NULL));
    g_clear_error(&error);
    assert_string_equal(carrel_guest_command_to_string(CARREL_GUEST_COMMAND_SCREEN), "screen");
    assert_non_null(strstr(carrel_guest_usage(), "screen WxH"));
}

/* The CVT reduced-blanking timings "cvt -r W H" prints (X.Org's cvt, VESA CVT 1.2). */
static void
test_cvt_rb(void **state)
{
    static const CarrelGuestTiming expected[] = {
        {1280, 800, 71000000, 1328, 1360, 1440, 803, 809, 823},
        {1920, 1200, 154000000, 1968, 2000, 2080, 1203, 1209, 1235},
        {800, 600, 35500000, 848, 880, 960, 603, 607, 618},
        {1920, 1080, 138500000, 1968, 2000, 2080, 1083, 1088, 1111},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(expected); i++) {
        CarrelGuestTiming t = {0};

        carrel_guest_cvt_rb(expected[i].width, expected[i].height, &t);
        assert_memory_equal(&t, &expected[i], sizeof(t));
    }
}

static void
test_help_and_names(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(CarrelGuestOptions) help = parse(&error, "windows", "--help", NULL);
    g_autoptr(CarrelGuestOptions) word = parse(&error, "help", NULL);

    assert_null(error);
    assert_int_equal(help->command, CARREL_GUEST_COMMAND_HELP);
    assert_int_equal(word->command, CARREL_GUEST_COMMAND_HELP);
    assert_non_null(strstr(carrel_guest_usage(), "clipboard set"));
    assert_string_equal(carrel_guest_command_to_string(CARREL_GUEST_COMMAND_CLIPBOARD_SET),
                        "clipboard set");
    assert_string_equal(carrel_guest_command_to_string(CARREL_GUEST_COMMAND_OPEN), "open");
    assert_string_equal(carrel_guest_command_to_string(CARREL_GUEST_COMMAND_SET_MAC), "set-mac");
    assert_string_equal(carrel_guest_command_to_string(CARREL_GUEST_COMMAND_LAST), "unknown");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_options_anywhere),
        cmocka_unit_test(test_launch_passes_arguments_through),
        cmocka_unit_test(test_double_dash),
        cmocka_unit_test(test_clipboard_set),
        cmocka_unit_test(test_clipboard_text_limit),
        cmocka_unit_test(test_type),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_launch_limits),
        cmocka_unit_test(test_set_net),
        cmocka_unit_test(test_screen),
        cmocka_unit_test(test_cvt_rb),
        cmocka_unit_test(test_help_and_names),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
