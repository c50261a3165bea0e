/* disk: helpers shared by the module's own files; not for other modules. */
#pragma once

#ifndef CARREL_DISK_PRIV_H_ALLOW
#error "disk-priv.h is for the disk module and its tests only"
#endif

#include "disk/disk.h"

G_BEGIN_DECLS

/* Generous: TCG hosts are slow, and qemu-img check reads every cluster's metadata. */
#define CARREL_DISK_INFO_TIMEOUT_S 60
#define CARREL_DISK_CHECK_TIMEOUT_S 600
#define CARREL_DISK_CREATE_TIMEOUT_S 60

/*
 * Refuses a path qemu-img could read as something else than a file name: it must be absolute
 * (QEMU treats "json:{...}" or "nbd:host" before any '/' as a protocol) and clean text.
 */
gboolean carrel_disk_check_path(const char *path, const char *what, GError **error);

/* TRUE for the formats carrel stores disks in: "qcow2" and "raw". */
gboolean carrel_disk_is_supported_format(const char *format);

G_END_DECLS
