/* archive: helpers shared by the module's own files (and its tests). */
#pragma once

#ifndef CARREL_ARCHIVE_PRIV_H_ALLOW
#error "archive-priv.h is for the archive module and its tests only"
#endif

#include <archive.h>
#include <archive_entry.h>

#include "archive/archive.h"

/* Longest segment of a path (NAME_MAX on Linux). */
#define CARREL_ARCHIVE_SEGMENT_MAX 255

/* Untrusted bytes as clean text for messages and records: printable UTF-8 is kept, other bytes
 * become \xNN and a backslash "\\"; cut after CARREL_LIMIT_GUEST_PATH input bytes. */
char *carrel_archive_escape(const char *text);

/* The limits with zero fields replaced by the defaults. */
CarrelArchiveLimits carrel_archive_limits_resolve(const CarrelArchiveLimits *limits);

/* The type of a tar member (hard links first: they carry a regular file type). */
CarrelArchiveType carrel_archive_entry_type(struct archive_entry *entry);

/* Sets a LIMIT error for one of the two limits. */
void carrel_archive_set_limit_error(GError **error, const char *what, guint64 value);

/* Converts libarchive's last error of a into a GError (FAILED) with context. */
void carrel_archive_set_error(GError **error, struct archive *a, const char *context);
