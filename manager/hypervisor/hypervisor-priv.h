/* hypervisor: internals shared by the module's own files and its unit test; not for other modules.
 */
#pragma once

#ifndef CARREL_HYPERVISOR_PRIV_H_ALLOW
#error "hypervisor-priv.h is private to the hypervisor module"
#endif

#include "hypervisor/hypervisor.h"

struct _CarrelHypervisor {
    const CarrelHypervisorOps *ops;
    char *uri;
    gpointer backend_data; /* owned by the backend; released by ops->close */
};

/* Wraps a backend: takes ownership of backend_data (released through ops->close). */
CarrelHypervisor *carrel_hypervisor_new_backend(const CarrelHypervisorOps *ops, const char *uri,
                                                gpointer backend_data);

/* True when text is a session id as carrel makes them: "s-" + 12 lowercase hex characters. */
gboolean carrel_hypervisor_is_session_id(const char *text);

/* True for prefix + 12 lowercase hex characters (instance ids use "i-"). */
gboolean carrel_hypervisor_is_carrel_id(const char *text, const char *prefix);

/*
 * Scans domain XML (a whole <domain>, or the <session> element libvirt returns for our
 * metadata) for the domain name and carrel's session id. Inside a <domain>, only a <session>
 * declaring CARREL_XMLNS_SESSION counts; a root <session> is taken as ours, since libvirt
 * selected it by that namespace and returns it without. The text is treated as untrusted:
 * it is bounded, parsed with GMarkup, and the id is returned only when it has the session-id
 * shape. Either output is NULL when absent. FALSE with INVALID_ARG when the XML is malformed.
 */
gboolean carrel_hypervisor_scan_xml(const char *xml, char **ret_name, char **ret_session_id,
                                    char **ret_instance_id, GError **error);

/* Largest XML text carrel_hypervisor_scan_xml accepts. */
#define CARREL_HYPERVISOR_SCAN_MAX_BYTES (256 * 1024)

/*
 * Boots kernel under qemu with the given accelerator and cpu model, reading the serial console
 * until it proves that the guest really runs ("Linux version", then "VFS:" or "Kernel panic")
 * or timeout_s passes. QEMU is always killed and reaped before returning. *ret_reason gets one
 * short line saying what happened.
 */
gboolean carrel_hypervisor_probe_boot(const char *qemu, const char *accel, const char *cpu,
                                      const char *kernel, guint timeout_s, char **ret_reason);
