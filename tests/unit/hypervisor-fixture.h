/* What the hypervisor's unit tests share (test-hypervisor*.c). */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"
#include "tests/fake/hypervisor-fake.h"

/* libvirt's test driver: domains without a guest, in memory of this process. */
#define TEST_URI "test:///default"

/* The XML of a small direct-boot TCG domain name with session_id; fails the test otherwise. */
char *make_xml(const char *name, const char *session_id);

/* Fails the test unless error is a CARREL_ERROR of code whose message holds fragment (optional). */
void assert_error(const GError *error, int code, const char *fragment);
