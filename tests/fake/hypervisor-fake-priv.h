/*
 * What the fake backend's files share (hypervisor-fake.c, hypervisor-fake-input.c): its state and
 * the lookups every operation starts with. Test code only.
 */
#ifndef CARREL_HYPERVISOR_FAKE_PRIV_H
#define CARREL_HYPERVISOR_FAKE_PRIV_H

#include "tests/fake/hypervisor-fake.h"

typedef struct {
    char *session_id;
    char *instance_id;
    char *xml; /* as defined or restored: what a save writes into the image */
    CarrelDomainState state;
    CarrelPauseReason paused_by; /* while state is PAUSED */
    guint64 allocation;          /* what disk_allocation reports; 0: UNSUPPORTED */
    gboolean persistent;
    gint64 run_id; /* a new one at every start, as libvirt's domain id */
    char *spice_password;
    gint64 spice_valid_until;
    guint screen_width; /* set by carrel-guest screen; 0: the image's own (again at every run) */
    guint screen_height;
    gint64 cpu_origin_us; /* the first cpu_time read: the guest is busy for busy_ms from then */
} FakeDomain;

typedef struct _FakeTerminal FakeTerminal;

/* A call that takes a guest's time (fake_hold), and how many are under way together. */
typedef struct {
    guint ms;        /* each call lasts this long (outside the lock) */
    guint gather;    /* when set, a call ends as soon as this many were under way at once */
    guint in_flight; /* calls under way now */
    guint most;      /* the most ever under way at once */
    guint done;      /* calls over: counted as one leaves, so a test waiting finds none under way */
} FakeHold;

typedef struct {
    GMutex lock;
    GHashTable *domains;   /* name -> FakeDomain */
    GHashTable *fail_next; /* op names whose next call fails */
    gboolean agent_silent; /* every guest agent times out, as in a guest without one */
    int exec_code;         /* the scripted agent_exec result */
    char *exec_stdout;
    char *exec_stderr;
    gboolean exec_hang;
    char **exec_argv;      /* of the last agent_exec */
    GBytes *exec_stdin;    /* of the last agent_exec; NULL when it had none */
    GBytes *screen;        /* NULL: the default screen */
    GHashTable *files;     /* guest path -> GBytes, shared by every fake domain */
    GBytes *read_fallback; /* what reading any other path gives, or NULL */
    GPtrArray *hid_sent;   /* QMP input-send-event commands received, in order */
    gint hid_room;         /* free input buffers of the guest (both devices); -1: not told */
    guint hid_room_grow;   /* how many the guest hands back between two looks */
    guint hid_room_calls;
    guint hid_dropped;    /* frames sent without room: QEMU would have dropped them */
    GHashTable *networks; /* name -> XML */
    FakeHold balloon;     /* set_balloon calls */
    FakeHold restore;     /* restores */
    guint holds_beside;   /* balloon calls and restores that began while the other kind ran */
    GCond held;           /* a hold began (what a gathering hold waits on) */
    guint agent_beside;   /* agent_exec and set_time calls while a restore was under way */
    gint64 next_run_id;
    gboolean screen_refused; /* carrel-guest screen fails, as in a guest whose X cannot */
    guint screen_calls;      /* carrel-guest screen commands answered */
    FakeTerminal *terminal;  /* NULL: proc commands get the scripted result */
    gboolean drawing;  /* the screen reacts to HID events (carrel_hypervisor_fake_set_drawing) */
    guint draw_delay;  /* screenshots after a HID event that still show the old frame */
    guint draw_frames; /* new frames then drawn, one per screenshot (G_MAXUINT: no end) */
    guint draw_gap;    /* screenshots between two new frames (a slow guest); 0 = none */
    guint draw_wait;   /* countdown of draw_delay since the last HID event, or of draw_gap */
    guint draw_left;   /* frames still to draw */
    guint draw_generation; /* the frame shown now: 0 before any HID event */
    guint screenshots;     /* screenshots served */
    guint busy_ms;         /* every guest uses a whole CPU this long (cpu_time), then idles */
    gboolean qemu_owner;   /* qemu_owner answers (this process's user), else UNSUPPORTED */
} FakeBackend;

/* TRUE (with the error set) when op was told to fail once. Called with be->lock held. */
gboolean fake_take_failure(FakeBackend *be, const char *op, GError **error);
/* The domain called name, or NULL with NOT_FOUND. Called with be->lock held. */
FakeDomain *fake_find_domain(FakeBackend *be, const char *name, GError **error);

/* Answers a "carrel-guest proc" command for the fake terminal (hypervisor-fake-terminal.c);
 * FALSE when it is not the terminal's. Called with be->lock held. */
gboolean fake_terminal_exec(FakeBackend *be, const CarrelGuestExec *run,
                            CarrelExecResult *ret_result);
void fake_terminal_free(FakeTerminal *t);

gboolean fake_cpu_time(CarrelHypervisor *hv, const char *name, guint64 *ret_ns, GError **error);
gboolean fake_qemu_owner(CarrelHypervisor *hv, guint *ret_uid, guint *ret_gid, GError **error);

gboolean fake_hid_send(CarrelHypervisor *hv, const char *name, const char *command, GError **error);
gboolean fake_hid_room(CarrelHypervisor *hv, const char *name, CarrelHidDevice device, char **where,
                       guint *ret_free, GError **error);

/* Answers exec run when it is carrel-guest screen (TRUE), setting dom's screen; FALSE for any
 * other command. Called with be->lock held. */
gboolean fake_guest_screen(FakeBackend *be, FakeDomain *dom, const CarrelGuestExec *run,
                           CarrelExecResult *ret_result);
/* Called with be->lock held, which it lets go for h->ms: one call of h, counted while under way. */
void fake_hold(FakeBackend *be, FakeHold *h);
gboolean fake_set_balloon(CarrelHypervisor *hv, const char *name, guint target_mib, guint timeout_s,
                          guint *ret_actual_mib, GError **error);

/* A drawn PPM of width x height. */
GBytes *fake_sized_screen(guint width, guint height);
/* The next frame of the drawing screen (a screenshot while drawing is on); counts the
 * countdown and the frames. Called with be->lock held. */
GBytes *fake_drawing_screen(FakeBackend *be);
/* A HID event reached the drawing screen: its countdown starts again. Called with be->lock
 * held. */
void fake_drawing_hid(FakeBackend *be);

#endif
