/* carrel-guest proc: background commands with their output in a spool folder (guest-procs.c,
 * guest-procs-spawn.c). */
#pragma once

#include "guest.h"

/* Where each handle's folder lives: root's only, in /run (gone with the guest's boot, as the
 * processes are). CARREL_GUEST_PROC_DIR names another folder (the unit tests' temporary one). */
#define CARREL_GUEST_PROC_DIR "/run/carrel-guest/procs"
/* Handles kept at once: the oldest ended ones make room for a new one; when all run, LIMIT. */
#define CARREL_GUEST_PROC_MAX 32
/* Per stream: the command gets SIGXFSZ past this. */
#define CARREL_GUEST_PROC_OUTPUT_MAX (64 * 1024 * 1024)
/* Bytes of each stream one "proc read" returns (base64 in the agent's reply, twice). */
#define CARREL_GUEST_PROC_READ_MAX (48 * 1024)
/* Bytes one "proc write" takes. */
#define CARREL_GUEST_PROC_WRITE_MAX (256 * 1024)

/* The spool folder in use. */
const char *carrel_guest_procs_dir(void);

/* TRUE for a handle this tool would make: "p" and 1 to 16 lowercase hex digits. */
gboolean carrel_guest_procs_handle_valid(const char *handle);

/* Forks the keeper of a new handle in dir (which holds nothing yet) and returns the command's
 * process id once it exists. */
gboolean carrel_guest_procs_spawn(const char *dir, char **argv, gint64 *ret_pid, GError **error);
