/* File operations in a guest (conf-fsops.c): carrel-guest fs replies checked as untrusted input,
 * and client paths checked before they reach the guest. Included through conf.h only. */
#pragma once

#ifndef CARREL_CONF_H_INSIDE
#error "include conf/conf.h"
#endif

G_BEGIN_DECLS

/* Bounds on a carrel-guest fs reply, whatever the guest says. */
#define CARREL_FS_MAX_ENTRIES 4096
#define CARREL_FS_MAX_NAME_BYTES 255
#define CARREL_FS_MAX_TARGET_BYTES 4096
#define CARREL_FS_MAX_OUTPUT_BYTES (1024 * 1024)

/*
 * A client's guest path for a file operation: carrel_util_check_guest_path's rules (absolute,
 * no control characters, no '.' or '..' segment, bounded) and normalised: no empty segment
 * ("//") and no trailing '/' except for "/" itself. INVALID_ARG with the reason otherwise.
 */
gboolean carrel_fs_check_path(const char *path, GError **error);

/*
 * Checks one entry of a carrel-guest fs reply and returns it clean for clients:
 * {"name", "type", "size", "mode" ("0644": octal text), "mtime" (Unix seconds), "target"
 * (symlinks)}. A name or target that is not UTF-8 or holds control characters (a guest may have
 * such files) comes back as "name": null with "name_escaped" (bytes outside printable ASCII as
 * \xHH, '\' as \\) and "name_error" saying why; likewise "target". A reply no honest guest
 * gives (a name with '/', "", "." or "..", wrong types, values out of range, too long) is
 * refused: HYPERVISOR, with index (-1 for none) and the reason in the message.
 */
JsonNode *carrel_fs_entry_from_guest(JsonNode *node, gint index, GError **error);

/* A whole fs list reply ({"path","entries":[...],"truncated"}), every entry as above, at most
 * CARREL_FS_MAX_ENTRIES: {"path": path, "entries": [...], "truncated": bool}. */
JsonNode *carrel_fs_listing_from_guest(JsonNode *node, const char *path, GError **error);

/* "a\x0ab" for the bytes a, newline, b: printable ASCII as is, '\' doubled, the rest \xHH. */
char *carrel_fs_escape_name(const guint8 *bytes, gsize len);

G_END_DECLS
