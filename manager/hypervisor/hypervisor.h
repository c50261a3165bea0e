/*
 * hypervisor: an operations table with a libvirt backend and a fake one, the pure domain-XML
 * builder and accelerator detection. libvirt errors are converted to GError only in here.
 */
#pragma once

#include "conf/conf.h"

G_BEGIN_DECLS

typedef enum {
    CARREL_ACCEL_AUTO,
    CARREL_ACCEL_KVM,
    CARREL_ACCEL_TCG,
    CARREL_ACCEL_LAST
} CarrelAccel;

const char *carrel_accel_to_string(CarrelAccel accel);
/* Returns CARREL_ACCEL_LAST for unknown names. */
CarrelAccel carrel_accel_from_string(const char *name);

/* What the domain-XML builder needs; everything else is fixed policy of carrel. */
typedef struct {
    const char *domain_name; /* carrel-<id> */
    const char *session_id;
    const char *instance_id; /* "i-" + 12 hex: which carrel state dir owns the domain */
    const char *uuid;        /* NULL lets libvirt choose */
    CarrelAccel accel;       /* KVM or TCG (never AUTO here) */
    guint vcpus;
    guint memory_mib;
    CarrelBoot boot;
    const char *kernel_path; /* DIRECT only */
    const char *initrd_path; /* DIRECT only, optional */
    const char *cmdline;     /* DIRECT only, optional */
    const char *disk_path;   /* the session overlay */
    const char *disk_format; /* "qcow2" or "raw": always stated, never probed */
    const char *console_log_path;
    guint tb_cache_mib; /* TCG translation cache; 0 = QEMU default; ignored under KVM */
} CarrelDomainSpec;

/*
 * Pure generator: the libvirt domain XML for spec. No I/O. Text is escaped; values that cannot
 * be meaningful (control characters in paths or names, '/' in the name, a session id not of the
 * form "s-" + 12 lowercase hex, an invalid uuid, relative paths, a disk format other than qcow2
 * or raw, missing kernel for direct boot, kernel/initrd/cmdline without direct boot, AUTO accel,
 * vcpus or memory outside CARREL_LIMIT_*) are refused with CARREL_ERROR_INVALID_ARG.
 */
char *carrel_hypervisor_build_domain_xml(const CarrelDomainSpec *spec, GError **error);

/* XML namespace of carrel's <metadata> element. */
#define CARREL_XMLNS_SESSION "https://carrel.dev/xmlns/session/1"

typedef enum {
    CARREL_DOMAIN_RUNNING,
    CARREL_DOMAIN_PAUSED,
    CARREL_DOMAIN_SHUTOFF,
    CARREL_DOMAIN_CRASHED,
    CARREL_DOMAIN_OTHER,
    CARREL_DOMAIN_LAST
} CarrelDomainState;

const char *carrel_domain_state_to_string(CarrelDomainState state);
/* Returns CARREL_DOMAIN_LAST for unknown names. */
CarrelDomainState carrel_domain_state_from_string(const char *name);

/* A libvirt domain carrying carrel's metadata. */
typedef struct {
    char *name;
    char *session_id;  /* from <metadata>, never from the name alone */
    char *instance_id; /* from <metadata>; NULL when absent */
    CarrelDomainState state;
} CarrelDomainInfo;

void carrel_domain_info_free(CarrelDomainInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelDomainInfo, carrel_domain_info_free)

typedef struct _CarrelHypervisor CarrelHypervisor;

/*
 * The backend interface. Every call is synchronous and thread-safe. Errors: NOT_FOUND when the
 * domain does not exist, EXISTS when define_start finds one of that name, WRONG_STATE when the
 * domain is not in a state for the call, TIMEOUT when the guest does not react in time,
 * HYPERVISOR for everything else (with libvirt's message).
 */
typedef struct {
    /* Defines the persistent domain from xml and starts it; undefines it again if start fails. */
    gboolean (*define_start)(CarrelHypervisor *hv, const char *xml, GError **error);
    /* Starts an already defined domain. */
    gboolean (*start)(CarrelHypervisor *hv, const char *name, GError **error);
    /* Asks the guest to power off (agent, then ACPI) and waits up to timeout_s; FALSE+TIMEOUT if
     * not. */
    gboolean (*shutdown)(CarrelHypervisor *hv, const char *name, guint timeout_s, GError **error);
    /* Hard power-off; success when already off. */
    gboolean (*destroy)(CarrelHypervisor *hv, const char *name, GError **error);
    /* Removes the definition; success when absent. */
    gboolean (*undefine)(CarrelHypervisor *hv, const char *name, GError **error);
    /* State of a domain (CRASHED also when QEMU died); NOT_FOUND when it does not exist. */
    gboolean (*get_state)(CarrelHypervisor *hv, const char *name, CarrelDomainState *ret_state,
                          GError **error);
    /*
     * One guest-ping through the guest agent with a response timeout (1..300 s). TIMEOUT while
     * the agent is not connected yet or does not answer; WRONG_STATE when not running.
     */
    gboolean (*agent_ping)(CarrelHypervisor *hv, const char *name, guint timeout_s, GError **error);
    /* Every domain with valid carrel metadata (GPtrArray of CarrelDomainInfo); others skipped. */
    GPtrArray *(*list)(CarrelHypervisor *hv, GError **error);
    /* Hypervisor description for /v1/version: e.g. "libvirt 9.0.0, QEMU 7.2.22". */
    char *(*describe)(CarrelHypervisor *hv);
    void (*close)(CarrelHypervisor *hv);
} CarrelHypervisorOps;

/*
 * Opens the libvirt backend on uri. test:/// URIs work for fast tests; there the guest agent
 * is reported ready at once for a running domain, since the test driver runs no guest, and
 * shutdown uses the driver's default method. Installs (once per process) a libvirt error handler
 * that keeps libvirt from printing to stderr.
 */
CarrelHypervisor *carrel_hypervisor_open_libvirt(const char *uri, GError **error);

/* An in-memory backend for core's unit tests; domains exist only inside the object. */
CarrelHypervisor *carrel_hypervisor_new_fake(void);

/*
 * Makes the fake fail the next call of the given op once with CARREL_ERROR_HYPERVISOR. op is a
 * member name of CarrelHypervisorOps: "define_start", "start", "shutdown", "destroy",
 * "undefine", "get_state", "agent_ping" or "list".
 */
void carrel_hypervisor_fake_fail_next(CarrelHypervisor *hv, const char *op);

/*
 * Sets the state of a fake domain, as if the guest or QEMU did it (e.g. CRASHED: QEMU died).
 * FALSE when there is no such domain.
 */
gboolean carrel_hypervisor_fake_set_state(CarrelHypervisor *hv, const char *name,
                                          CarrelDomainState state);

void carrel_hypervisor_free(CarrelHypervisor *hv);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CarrelHypervisor, carrel_hypervisor_free)

/* Makes every guest-agent ping of the fake time out (silent) or answer again. */
void carrel_hypervisor_fake_set_agent_silent(CarrelHypervisor *hv, gboolean silent);

/* The URI the backend was opened with ("fake://" for the fake). */
const char *carrel_hypervisor_get_uri(CarrelHypervisor *hv);

/* Dispatchers through the table (each adds "domain 'NAME': " context). */
gboolean carrel_hypervisor_define_start(CarrelHypervisor *hv, const char *xml, GError **error);
gboolean carrel_hypervisor_start(CarrelHypervisor *hv, const char *name, GError **error);
gboolean carrel_hypervisor_shutdown(CarrelHypervisor *hv, const char *name, guint timeout_s,
                                    GError **error);
gboolean carrel_hypervisor_destroy(CarrelHypervisor *hv, const char *name, GError **error);
gboolean carrel_hypervisor_undefine(CarrelHypervisor *hv, const char *name, GError **error);
gboolean carrel_hypervisor_get_state(CarrelHypervisor *hv, const char *name,
                                     CarrelDomainState *ret_state, GError **error);
gboolean carrel_hypervisor_agent_ping(CarrelHypervisor *hv, const char *name, guint timeout_s,
                                      GError **error);
GPtrArray *carrel_hypervisor_list(CarrelHypervisor *hv, GError **error);
char *carrel_hypervisor_describe(CarrelHypervisor *hv);

/*
 * Resolves AUTO to KVM or TCG. KVM is chosen only when /dev/kvm opens read-write and a probe
 * guest really boots under it: QEMU is started with -accel kvm -cpu host on a kernel
 * (probe_kernel, or the newest readable /boot/vmlinuz-*) and its serial console must show the
 * kernel booting within timeout_s (0 = 15 s); QEMU is then killed. Otherwise TCG. KVM and TCG
 * requests are returned unchanged. *ret_reason (optional) always gets one short line saying why,
 * e.g. "kvm probe: no kernel output within 15 s; using tcg". Blocks up to timeout_s.
 */
CarrelAccel carrel_hypervisor_resolve_accel(CarrelAccel requested, const char *probe_kernel,
                                            guint timeout_s, char **ret_reason);

G_END_DECLS
