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

/* A --pty process runs as the desktop session's user when carrel-guest runs as root, else as
 * this one (else "agent"). */
#define CARREL_GUEST_PTY_USER "user"

/* How a --pty process starts: its terminal's size and whom it runs as (NULL: when root, the
 * desktop's user; otherwise the caller itself, the unit tests' case). */
typedef struct {
    guint rows, cols;
    const char *user;
} CarrelGuestPtySpec;

/* Forks the keeper of a new handle in dir (which holds nothing yet) and returns the command's
 * process id once it exists. */
gboolean carrel_guest_procs_spawn(const char *dir, char **argv, gint64 *ret_pid, GError **error);

/* The same for a --pty process (guest-procs-pty.c): argv (NULL or empty: a login shell) on a new
 * pseudo-terminal whose master the keeper relays, output to "stdout", "stdin" to the terminal;
 * "tty" names the terminal for proc resize. NOT_FOUND for an unknown user, FORBIDDEN for
 * another user when not root. */
gboolean carrel_guest_procs_spawn_pty(const char *dir, char **argv, const CarrelGuestPtySpec *spec,
                                      gint64 *ret_pid, GError **error);

/* Helpers shared by both keepers (guest-procs-spawn.c). */
int carrel_guest_procs_open_in(const char *dir, const char *name, int flags);
void carrel_guest_procs_write_small(const char *dir, const char *name, const char *text);
void carrel_guest_procs_null_stdio(void);
/* The holder of the FIFO's write end (killed by proc close); -1 on failure. */
pid_t carrel_guest_procs_fork_holder(const char *dir);
/* The exit file's text of a wait status: the code, or 128 + the signal. */
char *carrel_guest_procs_exit_text(int status);
