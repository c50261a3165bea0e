/* The egress module's parsers: squid's log lines, dnsmasq's refusals, the helper's questions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "egress/egress-priv.h"

static void
test_squid_lines(void **state)
{
    static const struct {
        const char *line;
        const char *name; /* NULL: no record */
        const char *protocol;
        const char *decision;
        guint port;
        gint64 out, in, ms;
    } cases[] = {
        {"1733070000.123 10.77.0.5 198.51.100.80 80 - allowed.test 198.51.100.80 http GET "
         "TCP_MISS - allow 76 307 2",
         "allowed.test", "http", "allowed", 80, 76, 307, 2},
        {"1733070001.000 10.77.0.5 198.51.100.80 443 allowed.test allowed.test 198.51.100.80 "
         "http CONNECT TCP_TUNNEL splice allow 719 1635 93",
         "allowed.test", "tls", "allowed", 443, 719, 1635, 93},
        /* a request with another Host inside a decrypted connection */
        {"1733070001.000 10.77.0.5 198.51.100.80 443 secret.test other.test 198.51.100.80 https "
         "GET TCP_DENIED bump deny-host 90 3400 1",
         "secret.test", "tls", "denied", 443, 90, 3400, 1},
        /* the first half of a spliced connection: nothing yet */
        {"1733070001.000 10.77.0.5 198.51.100.80 443 allowed.test 198.51.100.80 - http CONNECT "
         "NONE_NONE splice allow 0 0 1",
         NULL, NULL, NULL, 0, 0, 0, 0},
        {"1733070002.500 10.77.0.5 198.51.100.80 80 - other.test - http GET TCP_DENIED - deny 74 "
         "3449 1",
         "other.test", "http", "denied", 80, 74, 3449, 1},
        {"1733070003.000 10.77.0.5 198.51.100.80 443 other.test 198.51.100.80 - http CONNECT "
         "NONE_NONE terminate deny 0 0 2",
         "other.test", "tls", "denied", 443, 0, 0, 2},
        {"1733070004.000 10.77.0.5 198.51.100.80 80 - ask.test 198.51.100.80 http GET TCP_MISS - "
         "ask-allow 73 278 5221",
         "ask.test", "http", "approved", 80, 73, 278, 5221},
        {"1733070005.000 10.77.0.5 198.51.100.80 443 ask.test 198.51.100.80 - http CONNECT "
         "NONE_NONE terminate ask-timeout 0 0 60000",
         "ask.test", "tls", "expired", 443, 0, 0, 60000},
        /* a forged Host refused by squid itself: no word from carreld, still denied */
        {"1733070006.000 10.77.0.5 198.51.100.66 80 - allowed.test - http GET NONE_NONE - - 0 0 0",
         "allowed.test", "http", "denied", 80, 0, 0, 0},
        /* a guest's name, escaped and with control characters: never raw */
        {"1733070007.000 10.77.0.5 198.51.100.80 80 - bad%0Aname - http GET TCP_DENIED - deny 1 1 "
         "1",
         "(unreadable)", "http", "denied", 80, 1, 1, 1},
        /* malformed */
        {"", NULL, NULL, NULL, 0, 0, 0, 0},
        {"garbage", NULL, NULL, NULL, 0, 0, 0, 0},
        {"1733070000.123 not-an-ip 198.51.100.80 80 - a - http GET TCP_MISS - allow 1 1 1", NULL,
         NULL, NULL, 0, 0, 0, 0},
        {"1733070000.123 10.77.0.5 198.51.100.80 99999 - a - http GET TCP_MISS - allow 1 1 1", NULL,
         NULL, NULL, 0, 0, 0, 0},
        {"1733070000.123 10.77.0.5 198.51.100.80 80 - a - http GET TCP_MISS - allow -1 1 1", NULL,
         NULL, NULL, 0, 0, 0, 0},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *source = NULL;
        g_autoptr(CarrelEgressRecord) rec = carrel_egress_parse_squid_line(cases[i].line, &source);

        if (!cases[i].name) {
            if (rec)
                fail_msg("case %zu: a record from '%s'", i, cases[i].line);
            continue;
        }
        if (!rec)
            fail_msg("case %zu: no record", i);
        assert_string_equal(source, "10.77.0.5");
        assert_string_equal(rec->name, cases[i].name);
        assert_string_equal(rec->protocol, cases[i].protocol);
        assert_string_equal(rec->decision, cases[i].decision);
        assert_int_equal(rec->port, cases[i].port);
        assert_int_equal(rec->bytes_out, cases[i].out);
        assert_int_equal(rec->bytes_in, cases[i].in);
        assert_int_equal(rec->duration_ms, cases[i].ms);
    }
}

static void
test_dnsmasq_lines(void **state)
{
    static const struct {
        const char *line;
        const char *name;
    } cases[] = {
        {"dnsmasq[3336]: 7 10.77.0.11/52598 config other.test is NXDOMAIN", "other.test"},
        {"dnsmasq: 7 10.77.0.11/52598 config Other.TEST is NXDOMAIN", "other.test"},
        {"dnsmasq[3336]: 7 10.77.0.11/52598 query[A] other.test from 10.77.0.11", NULL},
        {"dnsmasq[3336]: 1 10.77.0.11/55892 forwarded allowed.test to 198.51.100.53", NULL},
        {"dnsmasq[3336]: 7 10.77.0.11/52598 config  is NXDOMAIN", NULL},
        {"dnsmasq[3336]: config a b is NXDOMAIN", NULL},
        {"", NULL},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *name = carrel_egress_parse_dnsmasq_line(cases[i].line);
        assert_string_equal(name ? name : "(none)", cases[i].name ? cases[i].name : "(none)");
    }
}

static void
test_helper_questions(void **state)
{
    static const struct {
        const char *line;
        const char *name; /* NULL: refused */
        guint port;
        const char *protocol;
    } cases[] = {
        {"1 10.77.0.11 allowed.test - allowed.test 80 GET -", "allowed.test", 80, "http"},
        {"2 10.77.0.11 198.51.100.80 allowed.test 198.51.100.80 443 CONNECT -", "allowed.test", 443,
         "tls"},
        {"3 10.77.0.11 Allowed.Test:8080 - allowed.test 8080 GET -", "allowed.test", 8080, "http"},
        {"4 10.77.0.11 198.51.100.80 - 198.51.100.80 80 GET -", "198.51.100.80", 80, "http"},
        {"5 10.77.0.11 %65vil.test - - 80 GET -", "evil.test", 80, "http"},
        {"6 10.77.0.11 a%0Ab - - 80 GET -", "", 80, "http"},
        {"x 10.77.0.11 a - a 80 GET -", NULL, 0, NULL},
        {"7 nope a - a 80 GET -", NULL, 0, NULL},
        {"8 10.77.0.11 a - a 0 GET -", NULL, 0, NULL},
        {"9 10.77.0.11 a", NULL, 0, NULL},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        CarrelEgressQuery *q = carrel_egress_query_parse(cases[i].line, NULL);
        g_autofree char *yes = NULL;

        if (!cases[i].name) {
            assert_null(q);
            continue;
        }
        assert_non_null(q);
        assert_string_equal(carrel_egress_query_name(q), cases[i].name);
        assert_int_equal(carrel_egress_query_port(q), cases[i].port);
        assert_string_equal(carrel_egress_query_protocol(q), cases[i].protocol);
        assert_string_equal(carrel_egress_query_source(q), "10.77.0.11");
        /* The answer names the same channel, so squid can match answers given out of order. */
        yes = carrel_egress_query_reply_line(q, TRUE, "allow", NULL);
        assert_true(g_str_has_suffix(yes, " OK log=allow\n"));
        assert_true(g_str_has_prefix(yes, cases[i].line) ||
                    strncmp(yes, cases[i].line, strcspn(cases[i].line, " ")) == 0);
        carrel_egress_query_free(q);
    }
}

/* Notes ride on the answer as key="value" pairs, after the log word. */
static void
test_answer_notes(void **state)
{
    CarrelEgressQuery *q = carrel_egress_query_parse(
        "12 10.77.0.2 secret.test secret.test secret.test 443 GET -", NULL);
    const char *notes[] = {"carrel_hdr_0", "Bearer abc def", "carrel_bump", "yes", NULL};
    g_autofree char *line = NULL;

    assert_non_null(q);
    assert_false(carrel_egress_query_is_connect(q));
    line = carrel_egress_query_reply_line(q, TRUE, "allow", notes);
    assert_string_equal(line,
                        "12 OK log=allow carrel_hdr_0=\"Bearer abc def\" carrel_bump=\"yes\"\n");
    carrel_egress_query_free(q);
}

/* Inside a decrypted connection, a Host other than the SNI is a mismatch; the step-2 look
 * (Host: the address connected to) and plain HTTP (no SNI) are not. */
static void
test_host_mismatch(void **state)
{
    static const struct {
        const char *line;
        gboolean mismatch;
    } cases[] = {
        {"1 10.77.0.2 other.test secret.test secret.test 443 GET -", TRUE},
        {"2 10.77.0.2 Other.Test:443 secret.test secret.test 443 GET -", TRUE},
        {"3 10.77.0.2 secret.test:443 secret.test secret.test 443 GET -", FALSE},
        {"4 10.77.0.2 SECRET.test secret.test secret.test 443 GET -", FALSE},
        {"5 10.77.0.2 198.51.100.80 secret.test 198.51.100.80 443 CONNECT -", FALSE},
        {"6 10.77.0.2 other.test - other.test 80 GET -", FALSE},
        {"7 10.77.0.2 - secret.test secret.test 443 CONNECT -", FALSE},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        CarrelEgressQuery *q = carrel_egress_query_parse(cases[i].line, NULL);

        assert_non_null(q);
        assert_int_equal(carrel_egress_query_host_mismatch(q), cases[i].mismatch);
        carrel_egress_query_free(q);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_mismatch), cmocka_unit_test(test_squid_lines),
        cmocka_unit_test(test_dnsmasq_lines), cmocka_unit_test(test_helper_questions),
        cmocka_unit_test(test_answer_notes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
