/*
 * The libvirt domain XML of a session: a pure function of CarrelDomainSpec, so it is tested
 * byte for byte against golden files (tests/data/domain-xml).
 */
#include <stdarg.h>
#include <string.h>

#define CARREL_HYPERVISOR_PRIV_H_ALLOW
#include "hypervisor/hypervisor-priv.h"

/* Bound on every string of the spec (paths included); PATH_MAX on Linux. */
#define SPEC_MAX_TEXT 4096

static gboolean
check_text(const char *what, const char *value, gboolean required, gsize max_len, GError **error)
{
    if (!value || !*value) {
        if (!required)
            return TRUE;
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "%s is required", what);
        return FALSE;
    }
    if (strlen(value) > max_len) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "%s is longer than %" G_GSIZE_FORMAT " bytes", what, max_len);
        return FALSE;
    }
    /* Never quote the value here: it may hold a newline that would forge a log line. */
    if (!carrel_util_is_clean_text(value)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "%s contains control characters or invalid UTF-8", what);
        return FALSE;
    }
    return TRUE;
}

static gboolean
check_path(const char *what, const char *value, gboolean required, GError **error)
{
    if (!check_text(what, value, required, SPEC_MAX_TEXT, error))
        return FALSE;
    /* Relative paths would resolve against libvirtd's working directory, not ours. */
    if (value && *value && !g_path_is_absolute(value)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "%s '%s' is not an absolute path", what, value);
        return FALSE;
    }
    return TRUE;
}

static gboolean
validate_identity(const CarrelDomainSpec *spec, GError **error)
{
    if (!check_text("domain name", spec->domain_name, TRUE, CARREL_LIMIT_NAME_LEN, error))
        return FALSE;
    if (strchr(spec->domain_name, '/')) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "domain name '%s' contains '/'",
                    spec->domain_name);
        return FALSE;
    }
    if (!check_text("session id", spec->session_id, TRUE, SPEC_MAX_TEXT, error))
        return FALSE;
    /* list() only trusts ids of this shape, so a domain made with another would be lost. */
    if (!carrel_hypervisor_is_session_id(spec->session_id)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "session id '%s' is not of the form s-<12 hex>", spec->session_id);
        return FALSE;
    }
    if (spec->instance_id && !carrel_hypervisor_is_carrel_id(spec->instance_id, "i-")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "instance id '%s' is not of the form i-<12 hex>", spec->instance_id);
        return FALSE;
    }
    if (!check_text("uuid", spec->uuid, FALSE, SPEC_MAX_TEXT, error))
        return FALSE;
    if (spec->uuid && *spec->uuid && !g_uuid_string_is_valid(spec->uuid)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "uuid '%s' is not valid",
                    spec->uuid);
        return FALSE;
    }
    if (!check_text("genid", spec->genid, FALSE, SPEC_MAX_TEXT, error))
        return FALSE;
    if (spec->genid && *spec->genid && !g_uuid_string_is_valid(spec->genid)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "genid '%s' is not valid",
                    spec->genid);
        return FALSE;
    }
    return TRUE;
}

static gboolean
validate_resources(const CarrelDomainSpec *spec, GError **error)
{
    if (spec->accel != CARREL_ACCEL_KVM && spec->accel != CARREL_ACCEL_TCG) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "accelerator '%s' is not kvm or tcg", carrel_accel_to_string(spec->accel));
        return FALSE;
    }
    if (spec->vcpus == 0 || spec->vcpus > CARREL_LIMIT_VCPUS) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "vcpus '%u' is not between 1 and %d", spec->vcpus, CARREL_LIMIT_VCPUS);
        return FALSE;
    }
    if (spec->memory_mib < CARREL_LIMIT_MIN_MEMORY_MIB ||
        spec->memory_mib > CARREL_LIMIT_MEMORY_MIB) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "memory '%u' MiB is not between %d and %d", spec->memory_mib,
                    CARREL_LIMIT_MIN_MEMORY_MIB, CARREL_LIMIT_MEMORY_MIB);
        return FALSE;
    }
    if (spec->tb_cache_mib > CARREL_LIMIT_MEMORY_MIB) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "tb-cache '%u' MiB is above %d",
                    spec->tb_cache_mib, CARREL_LIMIT_MEMORY_MIB);
        return FALSE;
    }
    return TRUE;
}

static gboolean
validate_boot(const CarrelDomainSpec *spec, GError **error)
{
    gboolean direct = spec->boot == CARREL_BOOT_DIRECT;

    if ((int)spec->boot < 0 || spec->boot >= CARREL_BOOT_LAST) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "boot mode '%d' is unknown",
                    (int)spec->boot);
        return FALSE;
    }
    if (!direct &&
        ((spec->kernel_path && *spec->kernel_path) || (spec->initrd_path && *spec->initrd_path) ||
         (spec->cmdline && *spec->cmdline))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "kernel, initrd and cmdline need direct boot, not '%s'",
                    carrel_boot_to_string(spec->boot));
        return FALSE;
    }
    if (!check_path("kernel path", spec->kernel_path, direct, error))
        return FALSE;
    if (!check_path("initrd path", spec->initrd_path, FALSE, error))
        return FALSE;
    return check_text("kernel cmdline", spec->cmdline, FALSE, CARREL_LIMIT_CMDLINE_LEN, error);
}

static gboolean
validate_storage(const CarrelDomainSpec *spec, GError **error)
{
    if (!check_path("disk path", spec->disk_path, TRUE, error))
        return FALSE;
    if (!check_text("disk format", spec->disk_format, TRUE, SPEC_MAX_TEXT, error))
        return FALSE;
    /* The format is always stated, never probed: a probed raw disk could name a backing file. */
    if (!g_str_equal(spec->disk_format, "qcow2") && !g_str_equal(spec->disk_format, "raw")) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "disk format '%s' is not qcow2 or raw", spec->disk_format);
        return FALSE;
    }
    if (!check_path("emulator", spec->emulator, FALSE, error) ||
        !check_path("memory file", spec->memory_file, FALSE, error) ||
        !check_path("CPU cache", spec->cpu_cache, FALSE, error))
        return FALSE;
    /* Only carrel-qemu maps it: libvirt's own QEMU would start with anonymous RAM. */
    if ((spec->memory_file || spec->cpu_cache) && !spec->emulator) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a %s needs carrel-qemu as the emulator",
                    spec->memory_file ? "memory file" : "CPU cache");
        return FALSE;
    }
    return check_path("console log path", spec->console_log_path, TRUE, error);
}

static gboolean
validate_network(const CarrelDomainSpec *spec, GError **error)
{
    if (!spec->mac)
        return TRUE;
    if (!carrel_util_is_mac(spec->mac)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "mac is not a unicast address of the form 02:1a:2b:3c:4d:5e");
        return FALSE;
    }
    if (spec->tap && (!carrel_util_is_valid_name(spec->tap) || strlen(spec->tap) > 15 ||
                      g_str_has_prefix(spec->tap, "vnet"))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a NIC's tap name must be a valid name of at most 15 bytes");
        return FALSE;
    }
    if (!carrel_util_is_valid_name(spec->network)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG,
                    "a NIC needs a network with a valid name");
        return FALSE;
    }
    return TRUE;
}

static void append_markup(GString *out, const char *format, ...) G_GNUC_PRINTF(2, 3);

/* Appends format with every string argument XML-escaped. */
static void
append_markup(GString *out, const char *format, ...)
{
    va_list args;
    g_autofree char *text = NULL;

    va_start(args, format);
    text = g_markup_vprintf_escaped(format, args);
    va_end(args);
    g_string_append(out, text);
}

static void
append_identity(GString *xml, const CarrelDomainSpec *spec)
{
    const char *type = spec->accel == CARREL_ACCEL_KVM ? "kvm" : "qemu";

    if (spec->memory_file || spec->cpu_cache)
        append_markup(xml, "<domain type='%s' xmlns:qemu='%s'>\n", type, CARREL_XMLNS_QEMU);
    else
        append_markup(xml, "<domain type='%s'>\n", type);
    append_markup(xml, "  <name>%s</name>\n", spec->domain_name);
    if (spec->uuid && *spec->uuid)
        append_markup(xml, "  <uuid>%s</uuid>\n", spec->uuid);
    if (spec->genid && *spec->genid)
        append_markup(xml, "  <genid>%s</genid>\n", spec->genid);
    /* The session id in our namespace is what reconciliation trusts, never the name alone. */
    append_markup(xml,
                  "  <metadata>\n"
                  "    <carrel:session xmlns:carrel='%s'>\n"
                  "      <carrel:id>%s</carrel:id>\n",
                  CARREL_XMLNS_SESSION, spec->session_id);
    if (spec->instance_id)
        append_markup(xml, "      <carrel:instance>%s</carrel:instance>\n", spec->instance_id);
    g_string_append(xml, "    </carrel:session>\n"
                         "  </metadata>\n");
    append_markup(xml,
                  "  <memory unit='MiB'>%u</memory>\n"
                  "  <currentMemory unit='MiB'>%u</currentMemory>\n"
                  "  <vcpu placement='static'>%u</vcpu>\n",
                  spec->memory_mib, spec->memory_mib, spec->vcpus);
}

static void
append_os(GString *xml, const CarrelDomainSpec *spec)
{
    /* UEFI: libvirt picks an OVMF build that fits the machine type from the firmware descriptors.
     */
    g_string_append(xml, spec->boot == CARREL_BOOT_UEFI ? "  <os firmware='efi'>\n" : "  <os>\n");
    g_string_append(xml, "    <type arch='x86_64' machine='pc'>hvm</type>\n");
    if (spec->boot == CARREL_BOOT_DIRECT) {
        append_markup(xml, "    <kernel>%s</kernel>\n", spec->kernel_path);
        if (spec->initrd_path && *spec->initrd_path)
            append_markup(xml, "    <initrd>%s</initrd>\n", spec->initrd_path);
        if (spec->cmdline && *spec->cmdline)
            append_markup(xml, "    <cmdline>%s</cmdline>\n", spec->cmdline);
    } else {
        g_string_append(xml, "    <boot dev='hd'/>\n");
    }
    g_string_append(xml, "  </os>\n");
}

static void
append_platform(GString *xml, const CarrelDomainSpec *spec)
{
    gboolean tcg = spec->accel == CARREL_ACCEL_TCG;

    g_string_append(xml, "  <features>\n    <acpi/>\n    <apic/>\n");
    /* QEMU's default translation cache is 1 GiB per VM; the option only exists under TCG. */
    if (tcg && spec->tb_cache_mib > 0)
        append_markup(xml, "    <tcg>\n      <tb-cache unit='MiB'>%u</tb-cache>\n    </tcg>\n",
                      spec->tb_cache_mib);
    g_string_append(xml, "  </features>\n");
    /*
     * A named model keeps saved memory states (hibernate, snapshots, warm templates) restorable
     * after QEMU or host changes. Under KVM, host-model: the AUTO probe proved the host CPU
     * works, while host-passthrough would tie saved states to this exact CPU. Under TCG, the two
     * features libvirt finds on in QEMU's qemu64 and writes into every saved state's CPU, named
     * here as well: a boot's -cpu is then a restore's, and carrel-qemu's relay answers both from
     * one cache (else the first restore after a template's warm boot asks QEMU everything again).
     */
    if (tcg)
        g_string_append(xml, "  <cpu mode='custom' match='exact' check='none'>\n"
                             "    <model fallback='forbid'>qemu64</model>\n"
                             "    <feature policy='require' name='hypervisor'/>\n"
                             "    <feature policy='require' name='lahf_lm'/>\n"
                             "  </cpu>\n");
    else
        g_string_append(xml, "  <cpu mode='host-model' check='partial'/>\n");
    g_string_append(xml, "  <clock offset='utc'/>\n"
                         "  <on_poweroff>destroy</on_poweroff>\n"
                         "  <on_reboot>restart</on_reboot>\n"
                         "  <on_crash>destroy</on_crash>\n"
                         /* A guest that suspends itself would look hung to agents and reviewers. */
                         "  <pm>\n"
                         "    <suspend-to-mem enabled='no'/>\n"
                         "    <suspend-to-disk enabled='no'/>\n"
                         "  </pm>\n");
}

static void
append_storage(GString *xml, const CarrelDomainSpec *spec)
{
    /*
     * cache='writeback': guest flushes reach the disk (unlike 'unsafe', which loses data on a
     * host crash), it works on filesystems without O_DIRECT such as tmpfs (unlike 'none'), and
     * the page cache shares the read-only template layer between all sessions built on it.
     * discard='unmap' lets a guest's fstrim give overlay space back. error_policy='enospace'
     * (QEMU's own default, stated so it cannot change under us): a write that finds the host's
     * disk full pauses the guest (carrel shows why, see carrel_hypervisor_get_pause_reason)
     * instead of failing in it; resuming retries the write. Other errors reach the guest.
     */
    append_markup(xml,
                  "    <disk type='file' device='disk'>\n"
                  "      <driver name='qemu' type='%s' cache='writeback' discard='unmap' "
                  "error_policy='enospace'/>\n"
                  "      <source file='%s'/>\n"
                  "      <target dev='vda' bus='virtio'/>\n"
                  "    </disk>\n",
                  spec->disk_format, spec->disk_path);
    /*
     * The serial console goes to a file through virtlogd, which caps its size and rotates it:
     * the guest controls what is written there. <console> is the same port, as libvirt expects.
     */
    append_markup(xml,
                  "    <serial type='file'>\n"
                  "      <source path='%s'/>\n"
                  "      <target port='0'/>\n"
                  "    </serial>\n"
                  "    <console type='file'>\n"
                  "      <source path='%s'/>\n"
                  "      <target type='serial' port='0'/>\n"
                  "    </console>\n",
                  spec->console_log_path, spec->console_log_path);
}

static void
append_interface(GString *xml, const CarrelDomainSpec *spec)
{
    if (!spec->mac)
        return;
    /*
     * The network is carrel's isolated one (no forward: egress none) or its egress one (the
     * proxy's, see net-egress.c). No option ROM: no guest
     * boots from the network, and iPXE would only add memory and a PXE attempt under firmware.
     */
    append_markup(xml,
                  "    <interface type='network'>\n"
                  "      <mac address='%s'/>\n"
                  "      <source network='%s'/>\n",
                  spec->mac, spec->network);
    if (spec->tap)
        append_markup(xml, "      <target dev='%s'/>\n", spec->tap);
    append_markup(xml, "      <model type='virtio'/>\n"
                       "      <rom enabled='no'/>\n"
                       "    </interface>\n");
}

/* Devices that do not depend on the spec: the same desktop hardware for every session. */
static const char desktop_devices[] =
    "    <channel type='unix'>\n"
    "      <target type='virtio' name='org.qemu.guest_agent.0'/>\n"
    "    </channel>\n"
    "    <channel type='spicevmc'>\n"
    "      <target type='virtio' name='com.redhat.spice.0'/>\n"
    "    </channel>\n"
    /* Absolute pointer: input-send-event coordinates land exactly; ps2 stays implicit. */
    "    <input type='tablet' bus='virtio'/>\n"
    "    <input type='keyboard' bus='virtio'/>\n"
    /*
     * SPICE listens on loopback only; remote viewers come through the daemon's authenticated
     * websocket proxy. File transfer is off so files enter the guest only through the audited
     * API. The display is locked from the start: this password expired in 1970, so nobody can
     * connect until carrel sets a real one, valid for seconds, for a viewer (without a password
     * libvirt turns SPICE ticketing off, and QEMU then refuses to set one at all).
     * Images are compressed losslessly with what spice-html5 decodes (LZ or QUIC, never GLZ or
     * JPEG): uncompressed, one full screen is 3 MB, and a viewer that drains slowly under load
     * held the proxy past its bound until spice-server gave up on the display (~10 s).
     */
    "    <graphics type='spice' autoport='yes' listen='127.0.0.1' passwd='locked'"
    " passwdValidTo='1970-01-01T00:00:01'>\n"
    "      <listen type='address' address='127.0.0.1'/>\n"
    "      <image compression='auto_lz'/>\n"
    "      <jpeg compression='never'/>\n"
    "      <filetransfer enable='no'/>\n"
    "    </graphics>\n"
    /* The screen's change signal for carreld's recorder (hypervisor-vnc.c): a unix socket
     * that libvirt places in its own folder, so only root reaches it; no port. */
    "    <graphics type='vnc'>\n"
    "      <listen type='socket'/>\n"
    "    </graphics>\n"
    "    <video>\n"
    /*
     * QXL memory is guest RAM to the host: saved, restored and resident with each clone. vgamem
     * (the frame, 16 MiB: 1920x1200 at 32 bits) and ram (twice it, the least QEMU takes: frame
     * plus the X driver's command and image memory) stay; vram (offscreen surfaces, which the
     * qxl X driver keeps in guest memory when vram is full) goes from libvirt's 64 MiB to 8.
     * Measured on tiny where reads allocate: a clone's RSS 470 -> 380 MB after its reclaim.
     */
    "      <model type='qxl' ram='32768' vram='8192' vgamem='16384' heads='1' primary='yes'/>\n"
    "    </video>\n"
    /* No USB controller: nothing needs it (virtio input), so no UHCI for a guest to poke at. */
    "    <controller type='usb' model='none'/>\n";

/* After the balloon, whose place in this order (its PCI slot) a saved state keeps. */
static const char desktop_devices_last[] = "    <rng model='virtio'>\n"
                                           "      <backend model='random'>/dev/urandom</backend>\n"
                                           "    </rng>\n";

/*
 * Free page reporting: memory the guest frees goes back to the host (QEMU discards it), so a
 * session's RSS follows what its guest uses instead of its peak (measured on tiny: 300 MB freed
 * in the guest, host RSS 270 MB lower 6 s later). The balloon itself gives a restored clone's
 * RAM back (core-warm.c). Not with a memory file, which a discard would punch holes into.
 */
static void
append_balloon(GString *xml, const CarrelDomainSpec *spec)
{
    g_string_append(xml, spec->memory_file
                             ? "    <memballoon model='virtio'/>\n"
                             : "    <memballoon model='virtio' freePageReporting='on'/>\n");
}

/* The memory file and the CPU cache reach carrel-qemu in its environment. */
static void
append_qemu_env(GString *xml, const CarrelDomainSpec *spec)
{
    g_autofree char *value = NULL;

    if (!spec->memory_file && !spec->cpu_cache)
        return;
    g_string_append(xml, "  <qemu:commandline>\n");
    if (spec->memory_file) {
        value = g_strconcat(spec->memory_file_shared ? CARREL_UTIL_QEMU_MEMORY_SHARED
                                                     : CARREL_UTIL_QEMU_MEMORY_PRIVATE,
                            spec->memory_file, NULL);
        append_markup(xml, "    <qemu:env name='%s' value='%s'/>\n", CARREL_UTIL_QEMU_MEMORY_ENV,
                      value);
    }
    if (spec->cpu_cache)
        append_markup(xml, "    <qemu:env name='%s' value='%s'/>\n", CARREL_UTIL_QEMU_CPU_CACHE_ENV,
                      spec->cpu_cache);
    g_string_append(xml, "  </qemu:commandline>\n");
}

char *
carrel_hypervisor_build_domain_xml(const CarrelDomainSpec *spec, GError **error)
{
    g_autoptr(GString) xml = NULL;

    if (!spec) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_INVALID_ARG, "domain spec is required");
        return NULL;
    }
    if (!validate_identity(spec, error) || !validate_resources(spec, error) ||
        !validate_boot(spec, error) || !validate_storage(spec, error) ||
        !validate_network(spec, error))
        return NULL;

    xml = g_string_sized_new(4096);
    append_identity(xml, spec);
    append_os(xml, spec);
    append_platform(xml, spec);
    g_string_append(xml, "  <devices>\n");
    if (spec->emulator && *spec->emulator)
        append_markup(xml, "    <emulator>%s</emulator>\n", spec->emulator);
    append_storage(xml, spec);
    append_interface(xml, spec);
    g_string_append(xml, desktop_devices);
    append_balloon(xml, spec);
    g_string_append(xml, desktop_devices_last);
    g_string_append(xml, "  </devices>\n");
    append_qemu_env(xml, spec);
    g_string_append(xml, "</domain>\n");
    return g_string_free(g_steal_pointer(&xml), FALSE);
}

char *
carrel_hypervisor_build_snapshot_xml(const char *memory_path, const char *top_path)
{
    /* External memory and disk: the memory as a save image, vda onto the top carrel made. */
    return g_markup_printf_escaped(
        "<domainsnapshot><memory snapshot='external' file='%s'/><disks>"
        "<disk name='vda' snapshot='external' type='file'><source file='%s'/></disk>"
        "</disks></domainsnapshot>",
        memory_path, top_path);
}

/* "+64055" or "64055" as an id. */
static gboolean
parse_id(const char *text, guint *ret_id)
{
    guint64 value = 0;

    if (*text == '+')
        text++;
    if (!g_ascii_string_to_unsigned(text, 10, 0, G_MAXUINT32 - 1, &value, NULL))
        return FALSE;
    *ret_id = (guint)value;
    return TRUE;
}

gboolean
carrel_hypervisor_parse_qemu_owner(const char *caps_xml, guint *ret_uid, guint *ret_gid,
                                   GError **error)
{
    static const char label_open[] = "<baselabel type='qemu'>";
    const char *dac = caps_xml ? strstr(caps_xml, "<model>dac</model>") : NULL;
    const char *end = dac ? strstr(dac, "</secmodel>") : NULL;
    const char *label = dac ? strstr(dac, label_open) : NULL;
    const char *label_end = label ? strstr(label, "</baselabel>") : NULL;
    g_autofree char *text = NULL;
    g_auto(GStrv) ids = NULL;

    /* A confined QEMU opens only the files libvirt put into its profile or labelled. */
    if (caps_xml && (strstr(caps_xml, "<model>apparmor</model>") ||
                     strstr(caps_xml, "<model>selinux</model>"))) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_UNSUPPORTED,
                    "libvirt confines QEMU (AppArmor or SELinux): it would not open a file "
                    "libvirt does not know");
        return FALSE;
    }
    if (!label || !label_end || (end && label > end)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "libvirt names no DAC label for QEMU (does it run QEMU as root?)");
        return FALSE;
    }
    text = g_strndup(label + strlen(label_open), (gsize)(label_end - label - strlen(label_open)));
    ids = g_strsplit(text, ":", 3);
    if (g_strv_length(ids) != 2 || !parse_id(ids[0], ret_uid) || !parse_id(ids[1], ret_gid)) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED,
                    "libvirt's DAC label for QEMU is not UID:GID: '%s'", text);
        return FALSE;
    }
    return TRUE;
}
