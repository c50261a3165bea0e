#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "net/net.h"

typedef struct {
    const char *text;
    const char *address; /* expected address, NULL when refused */
    guint16 port;
    const char *message_part; /* for refusals */
} ListenCase;

static const ListenCase cases[] = {
    {"127.0.0.1:8080", "127.0.0.1", 8080, NULL},
    {"127.0.0.1:1", "127.0.0.1", 1, NULL},
    {"127.0.0.1:65535", "127.0.0.1", 65535, NULL},
    {"127.1.2.3:9000", "127.1.2.3", 9000, NULL},
    {"127.255.255.254:443", "127.255.255.254", 443, NULL},
    {"[::1]:8080", "::1", 8080, NULL},
    {"[0:0:0:0:0:0:0:1]:8080", "::1", 8080, NULL},
    {"localhost:8080", "127.0.0.1", 8080, NULL},
    {"LOCALHOST:8080", "127.0.0.1", 8080, NULL},
    /* not loopback */
    {"0.0.0.0:8080", NULL, 0, "is not a loopback address"},
    {"[::]:8080", NULL, 0, "is not a loopback address"},
    {"192.168.1.10:8080", NULL, 0, "is not a loopback address"},
    {"10.0.0.1:8080", NULL, 0, "is not a loopback address"},
    {"172.16.0.1:8080", NULL, 0, "is not a loopback address"},
    {"8.8.8.8:53", NULL, 0, "is not a loopback address"},
    {"128.0.0.1:8080", NULL, 0, "is not a loopback address"},
    {"126.255.255.255:8080", NULL, 0, "is not a loopback address"},
    {"[fe80::1]:8080", NULL, 0, "is not a loopback address"},
    {"[2001:db8::1]:8080", NULL, 0, "is not a loopback address"},
    {"[::ffff:127.0.0.1]:8080", NULL, 0, "is not a loopback address"},
    /* ports */
    {"127.0.0.1", NULL, 0, "must be HOST:PORT"},
    {"127.0.0.1:", NULL, 0, "must be a number from 1 to 65535"},
    {"127.0.0.1:0", NULL, 0, "must be a number from 1 to 65535"},
    {"127.0.0.1:70000", NULL, 0, "must be a number from 1 to 65535"},
    {"127.0.0.1:65536", NULL, 0, "must be a number from 1 to 65535"},
    {"127.0.0.1:-1", NULL, 0, "must be a number from 1 to 65535"},
    {"127.0.0.1:+80", NULL, 0, "must be a number from 1 to 65535"},
    {"127.0.0.1: 80", NULL, 0, "must be a number from 1 to 65535"},
    {"127.0.0.1:80 ", NULL, 0, "must be a number from 1 to 65535"},
    {"127.0.0.1:0x50", NULL, 0, "must be a number from 1 to 65535"},
    {"127.0.0.1:http", NULL, 0, "must be a number from 1 to 65535"},
    {"127.0.0.1:8080:9090", NULL, 0, "must be HOST:PORT"},
    /* hosts */
    {":8080", NULL, 0, "must be a numeric IP address"},
    {"[]:8080", NULL, 0, "must be a numeric IP address"},
    {"::1:8080", NULL, 0, "must be HOST:PORT"},
    {"[::1]8080", NULL, 0, "must be HOST:PORT"},
    {"[::1:8080", NULL, 0, "must be HOST:PORT"},
    {"[127.0.0.1]:8080", NULL, 0, "must be a numeric IP address"},
    {"[localhost]:8080", NULL, 0, "must be a numeric IP address"},
    {"127.1:8080", NULL, 0, "must be a numeric IP address"},
    {"0177.0.0.1:8080", NULL, 0, "must be a numeric IP address"},
    {"2130706433:8080", NULL, 0, "must be a numeric IP address"},
    {"127.0.0.1.:8080", NULL, 0, "must be a numeric IP address"},
    {" 127.0.0.1:8080", NULL, 0, "must be a numeric IP address"},
    {"example.com:8080", NULL, 0, "must be a numeric IP address"},
    {"localhost.:8080", NULL, 0, "must be a numeric IP address"},
    {"[::1%lo]:8080", NULL, 0, "must be a numeric IP address"},
    {"[fe80::1%eth0]:8080", NULL, 0, "must be a numeric IP address"},
    /* junk */
    {"", NULL, 0, "must be HOST:PORT"},
    {"junk", NULL, 0, "must be HOST:PORT"},
    {"127.0.0.1:80\n", NULL, 0, "printable"},
    {"127.0.0.1:8080/evil", NULL, 0, "must be a number from 1 to 65535"},
    {"http://127.0.0.1:8080", NULL, 0, "must be HOST:PORT"},
    {"127.0.0.1:000000000000000000000000000000000000000000000000000000000000000080", NULL, 0,
     "printable"},
};

static void
test_cases(void **state)
{
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        const ListenCase *c = &cases[i];
        g_autoptr(GError) error = NULL;
        g_autoptr(GSocketAddress) addr = carrel_net_parse_loopback_listen(c->text, &error);

        if (c->address) {
            GInetSocketAddress *inet;
            g_autofree char *text = NULL;

            if (!addr)
                fail_msg("'%s' refused: %s", c->text, error->message);
            inet = G_INET_SOCKET_ADDRESS(addr);
            text = g_inet_address_to_string(g_inet_socket_address_get_address(inet));
            assert_string_equal(text, c->address);
            assert_int_equal(g_inet_socket_address_get_port(inet), c->port);
            assert_null(error);
            continue;
        }
        if (addr)
            fail_msg("'%s' accepted", c->text);
        assert_non_null(error);
        assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
        if (!strstr(error->message, c->message_part))
            fail_msg("'%s': '%s' not in '%s'", c->text, c->message_part, error->message);
    }
}

static void
test_null_refused(void **state)
{
    g_autoptr(GError) error = NULL;

    assert_null(carrel_net_parse_loopback_listen(NULL, &error));
    assert_true(g_error_matches(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG));
}

static void
test_message_names_input(void **state)
{
    g_autoptr(GError) error = NULL;

    assert_null(carrel_net_parse_loopback_listen("0.0.0.0:8080", &error));
    assert_string_equal(error->message,
                        "listen address '0.0.0.0:8080' is not a loopback address: only "
                        "127.0.0.0/8 and [::1] are allowed, so the API is never reachable from "
                        "another host");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_null_refused),
        cmocka_unit_test(test_message_names_input),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
