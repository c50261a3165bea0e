/* The core tests' fixture, shared by test-core.c and test-core-life.c. */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <glib/gstdio.h>
#include <string.h>

#include "core/core-priv.h"
#include "disk/disk.h"
#include "tests/fake/hypervisor-fake.h"

/* The principal these tests act as: an admin, who may do everything. */
extern const CarrelPrincipal test_admin;
#define ADMIN (&test_admin)
/* A PPM screen that is drawn (not blank), what the fake shows unless a test says otherwise. */
extern const guint8 core_fixture_picture[];
extern const gsize core_fixture_picture_len;

typedef struct {
    char *dir;
    char *disk;
    char *kernel;
    CarrelManager *mgr;
    CarrelHypervisor *hv; /* owned by mgr */
} Fixture;

/* The fixture's policy folder holds small.policy (no default.policy: the built-in one). */
#define CORE_FIXTURE_SMALL_POLICY                                                                  \
    "[resources]\nmax_vcpus=1\nmax_memory_mib=1024\n[timeouts]\nttl_s=600\n"                       \
    "[artifacts]\npaths=/tmp/out\n"

/* A manager over the fake hypervisor in a temp dir; guests answer and draw a desktop. */
int setup(void **state);
int teardown(void **state);
/* Imports the fixture's disk as template name (a new version each time). */
CarrelTemplate *import(Fixture *fx, const char *name);
/* A session of "tiny" named name, created by ADMIN. */
CarrelSession *create(Fixture *fx, const char *name, GError **error);
/* The seq of a session's first event, its creation (by ADMIN): later events follow it. */
gint64 after_create(Fixture *fx, const char *id);
