/*
 * The fake hypervisor: an in-memory backend behind the same table of operations as the libvirt
 * one, with controls to script what the guest does. Test code: it links only into tests (never
 * into carreld, see tests/style/check-product.sh).
 */
#pragma once

#include "hypervisor/hypervisor.h"

G_BEGIN_DECLS

/*
 * An in-memory backend for core's unit tests; domains exist only inside the object. Its save
 * writes a small but valid save image (the domain XML, a cookie, a few bytes standing for the
 * memory) and its restore rewrites and reads it back like the real one, so the files and the
 * per-file serialisation of core can be tested without QEMU.
 */
CarrelHypervisor *carrel_hypervisor_new_fake(void);

/*
 * Makes the fake fail the next call of the given op once with CARREL_ERROR_HYPERVISOR. op is a
 * member name of CarrelHypervisorOps: "define_start", "start", "shutdown", "destroy",
 * "undefine", "get_state", "agent_ping", "list", "define", "save", "restore", "set_time",
 * "agent_exec", "screenshot", "file_read", "file_write", "hid_send", "fs_freeze", "pause",
 * "ensure_network", "set_balloon", "spice_info", "spice_password", "get_pause_reason",
 * "disk_allocation" or "cpu_time".
 */
void carrel_hypervisor_fake_fail_next(CarrelHypervisor *hv, const char *op);

/*
 * Sets the state of a fake domain, as if the guest or QEMU did it (e.g. CRASHED: QEMU died).
 * FALSE when there is no such domain.
 */
gboolean carrel_hypervisor_fake_set_state(CarrelHypervisor *hv, const char *name,
                                          CarrelDomainState state);

/* Pauses a running fake domain as QEMU would by itself, e.g. NO_SPACE: a disk write found the
 * host's disk full. FALSE when there is no such running domain. */
gboolean carrel_hypervisor_fake_pause_for(CarrelHypervisor *hv, const char *name,
                                          CarrelPauseReason reason);

/* What the fake's disk_allocation reports for domain name from now on (0: UNSUPPORTED, the
 * default, as libvirt's test driver). FALSE when there is no such domain. */
gboolean carrel_hypervisor_fake_set_disk_allocation(CarrelHypervisor *hv, const char *name,
                                                    guint64 bytes);

/* Makes every fake guest busy (a whole CPU, as cpu_time reports it) for ms from the first time
 * its CPU time is read, and idle after; 0 (the default): idle from the start. */
/* Whether qemu_owner answers (with this process's user and group, so that a test can give a
 * file to it) or says UNSUPPORTED (the default, as test:///). */
void carrel_hypervisor_fake_set_qemu_owner(CarrelHypervisor *hv, gboolean known);
/* The XML a domain was defined or restored with (NULL when there is no such domain). */
char *carrel_hypervisor_fake_get_xml(CarrelHypervisor *hv, const char *name);
void carrel_hypervisor_fake_set_busy(CarrelHypervisor *hv, guint ms);

/* What the fake's file_read gives for a path no file_write made (NULL: NOT_FOUND), e.g. the
 * tar a guest would have packed. */
void carrel_hypervisor_fake_set_read_fallback(CarrelHypervisor *hv, GBytes *data);

/* Makes every guest-agent call of the fake (ping, set_time, agent_exec) time out (silent) or
 * answer again. */
void carrel_hypervisor_fake_set_agent_silent(CarrelHypervisor *hv, gboolean silent);

/*
 * Scripts what the fake's agent_exec reports from now on: the exit code and the output (NULL =
 * empty), cut to each call's max_output like the real one. The default is exit code 0 with no
 * output.
 */
void carrel_hypervisor_fake_set_exec_result(CarrelHypervisor *hv, int exit_code,
                                            const char *stdout_text, const char *stderr_text);

/* Makes the fake's agent_exec report a program killed at its deadline (timed out, exit code
 * 137, no output) at once instead of the scripted result, or stop doing so. */
void carrel_hypervisor_fake_set_exec_hang(CarrelHypervisor *hv, gboolean hang);

/* Turns the fake's terminal on (a fresh one) or off: while on, carrel-guest's proc commands for
 * a --pty process are answered by a tiny shell (hypervisor-fake-terminal.c) instead of the
 * scripted result. */
void carrel_hypervisor_fake_set_terminal(CarrelHypervisor *hv, gboolean on);
/* The terminal's process: FALSE before any start; else whether it runs, its exit code and its
 * size. */
gboolean carrel_hypervisor_fake_get_terminal(CarrelHypervisor *hv, gboolean *ret_running,
                                             int *ret_exit_code, guint *ret_rows, guint *ret_cols);

/* The argv of the fake's last successful agent_exec (NULL before any); free with g_strfreev. */
char **carrel_hypervisor_fake_get_exec_argv(CarrelHypervisor *hv);

/* The guest's input queues: room free buffers now (-1: the fake cannot tell, the default),
 * grow more handed back at each look, and the hypervisor's wait for room. Sends beyond the room
 * are counted as dropped, as QEMU would drop them. */
void carrel_hypervisor_fake_set_hid_room(CarrelHypervisor *hv, gint room, guint grow,
                                         guint wait_ms);
/* Frames sent without room, and (optional) how often the room was asked. */
guint carrel_hypervisor_fake_get_hid_dropped(CarrelHypervisor *hv, guint *ret_room_calls);

/* The standard input of the fake's last successful agent_exec (NULL when it had none). */
GBytes *carrel_hypervisor_fake_get_exec_stdin(CarrelHypervisor *hv);

/* Sets the image (PPM or PNG) the fake's screenshot returns (NULL: the default, a uniformly
 * black 4x3 PPM). It is not validated here, so tests can feed hostile images. */
void carrel_hypervisor_fake_set_screen(CarrelHypervisor *hv, GBytes *image);

/*
 * Makes the fake's screen react to HID events (on) or show the set screen again (off). While
 * on, every screenshot is an 8x6 PPM whose pixels all hold its generation (red = low byte,
 * green = next byte: carrel_hypervisor_fake_screen_generation reads it back), 0 at first.
 * After each HID event, delay screenshots still show the current frame; then each of the next
 * frames screenshots shows a new generation (G_MAXUINT: a screen that never stops changing),
 * and later ones the last.
 */
void carrel_hypervisor_fake_set_drawing(CarrelHypervisor *hv, gboolean on, guint delay,
                                        guint frames);
/* A slow guest: gap screenshots between two of the drawing screen's new frames (0 after
 * carrel_hypervisor_fake_set_drawing). */
void carrel_hypervisor_fake_set_drawing_gap(CarrelHypervisor *hv, guint gap);
/* The generation of a drawing screen's frame (PPM or PNG as core returns it), or -1 when it is
 * not one. */
gint carrel_hypervisor_fake_screen_generation(GBytes *image);
/* How many screenshots the fake has served. */
guint carrel_hypervisor_fake_get_screenshots(CarrelHypervisor *hv);

/* Makes the fake hold network name with xml as it is (to test a foreign network of carrel's
 * name); ensure_network then leaves it as it is. */
void carrel_hypervisor_fake_set_network(CarrelHypervisor *hv, const char *name, const char *xml);

/* The SPICE password the fake's domain name was given last (NULL: none) and its expiry. */
char *carrel_hypervisor_fake_get_spice_password(CarrelHypervisor *hv, const char *name,
                                                gint64 *ret_valid_until);

/* How many set_balloon calls the fake has served (each counted once it returns). */
guint carrel_hypervisor_fake_get_balloon_calls(CarrelHypervisor *hv);
/* Each set_balloon call from now on lasts ms, as a guest moving its balloon does. */
void carrel_hypervisor_fake_set_balloon_hold(CarrelHypervisor *hv, guint ms);
/* The most set_balloon calls ever under way at once. */
guint carrel_hypervisor_fake_get_balloon_most(CarrelHypervisor *hv);
/* Each restore from now on lasts ms, as QEMU loading a memory image does. */
void carrel_hypervisor_fake_set_restore_hold(CarrelHypervisor *hv, guint ms);
/* Each restore from now on lasts until count restores were under way at once, at most ms. */
void carrel_hypervisor_fake_set_restore_gather(CarrelHypervisor *hv, guint count, guint ms);
/* The most restores ever under way at once. */
guint carrel_hypervisor_fake_get_restore_most(CarrelHypervisor *hv);
/* How many set_balloon calls began while a restore was under way, and restores while a
 * set_balloon call was. */
guint carrel_hypervisor_fake_get_holds_beside(CarrelHypervisor *hv);
/* How many agent_exec and set_time calls (guest work: a catch-up's clock and MAC) came while a
 * restore was under way. */
guint carrel_hypervisor_fake_get_agent_beside(CarrelHypervisor *hv);

/* A copy of the QMP commands the fake received so far (GPtrArray of strings, in order). */
GPtrArray *carrel_hypervisor_fake_get_hid(CarrelHypervisor *hv);

/* Makes the fake's carrel-guest screen fail (exit 1, an error object) or answer again. Without
 * this, "carrel-guest screen WxH" sets the domain's screen: its screenshots are then WxH until
 * its next start or restore. */
void carrel_hypervisor_fake_set_screen_refused(CarrelHypervisor *hv, gboolean refused);
/* The screen size carrel-guest screen set on domain name (0x0: the image's own, or no such
 * domain); returns how many carrel-guest screen commands the fake answered in all. */
guint carrel_hypervisor_fake_get_screen(CarrelHypervisor *hv, const char *name, guint *ret_width,
                                        guint *ret_height);

G_END_DECLS
