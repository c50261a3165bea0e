/*
 * set-mac: gives the guest's one NIC the MAC the host chose for this session. A clone restored
 * from a warm template wakes up with the template's MAC in its virtio-net device; changing it
 * from inside makes the driver tell QEMU (VIRTIO_NET_CTRL_MAC_ADDR_SET), so guest and host agree.
 * set-net (guest-net-set.c) finds the same NIC here.
 */
#include <errno.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "guest.h"

#define SYS_CLASS_NET "/sys/class/net"
#define LIMIT_INTERFACES 256

static gboolean
parse_mac_bytes(const char *text, guint8 *mac)
{
    guint sum = 0;

    if (!text || strlen(text) != 17)
        return FALSE;
    for (int i = 0; i < 6; i++) {
        int hi = g_ascii_xdigit_value(text[i * 3]), lo = g_ascii_xdigit_value(text[i * 3 + 1]);

        if (hi < 0 || lo < 0 || (i < 5 && text[i * 3 + 2] != ':'))
            return FALSE;
        mac[i] = (guint8)(hi << 4 | lo);
        sum += mac[i];
    }
    /* A NIC address must be unicast (bit 0 of the first octet clear) and not all zero. */
    return sum != 0 && !(mac[0] & 1);
}

gboolean
carrel_guest_mac_parse(const char *text, guint8 ret_mac[6], GError **error)
{
    guint8 mac[6];

    if (!parse_mac_bytes(text, mac)) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "'%s' is not a unicast MAC address (xx:xx:xx:xx:xx:xx)",
                    text && g_utf8_validate(text, -1, NULL) ? text : "");
        return FALSE;
    }
    memcpy(ret_mac, mac, 6);
    return TRUE;
}

const char *
carrel_guest_pick_nic(GPtrArray *nics, GError **error)
{
    const char *found = NULL;
    guint count = 0;

    for (guint i = 0; i < nics->len; i++) {
        const CarrelGuestNic *nic = g_ptr_array_index(nics, i);

        /* Only Ethernet devices backed by hardware: not lo, bridges, veths or tunnels. */
        if (nic->type != ARPHRD_ETHER || !nic->has_device)
            continue;
        found = nic->name;
        count++;
    }
    if (count == 1)
        return found;
    g_set_error(error, CARREL_GUEST_ERROR,
                count ? CARREL_GUEST_ERROR_INVALID_ARG : CARREL_GUEST_ERROR_NOT_FOUND,
                count ? "%u network devices: which one is ambiguous" : "no network device found",
                count);
    return NULL;
}

void
carrel_guest_nic_free(CarrelGuestNic *nic)
{
    if (!nic)
        return;
    g_free(nic->name);
    g_free(nic);
}

static CarrelGuestNic *
read_nic(const char *name)
{
    g_autofree char *type_path = g_build_filename(SYS_CLASS_NET, name, "type", NULL);
    g_autofree char *device_path = g_build_filename(SYS_CLASS_NET, name, "device", NULL);
    g_autofree char *type = NULL;
    CarrelGuestNic *nic;

    if (strlen(name) >= IFNAMSIZ || !g_file_get_contents(type_path, &type, NULL, NULL))
        return NULL;
    nic = g_new0(CarrelGuestNic, 1);
    nic->name = g_strdup(name);
    nic->type = (int)g_ascii_strtoll(type, NULL, 10);
    nic->has_device = g_file_test(device_path, G_FILE_TEST_EXISTS);
    return nic;
}

static GPtrArray *
list_nics(GError **error)
{
    g_autoptr(GDir) dir = g_dir_open(SYS_CLASS_NET, 0, error);
    g_autoptr(GPtrArray) nics =
        g_ptr_array_new_with_free_func((GDestroyNotify)carrel_guest_nic_free);
    const char *name;

    if (!dir)
        return NULL;
    while ((name = g_dir_read_name(dir)) && nics->len < LIMIT_INTERFACES) {
        CarrelGuestNic *nic = read_nic(name);

        if (nic)
            g_ptr_array_add(nics, nic);
    }
    return g_steal_pointer(&nics);
}

char *
carrel_guest_find_nic(GError **error)
{
    g_autoptr(GPtrArray) nics = list_nics(error);
    const char *name = nics ? carrel_guest_pick_nic(nics, error) : NULL;

    return g_strdup(name);
}

static char *
format_mac(const guint8 *mac)
{
    return g_strdup_printf("%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4],
                           mac[5]);
}

/* SIOCSIFHWADDR on name; *ret_previous gets the address it had. */
static gboolean
set_hwaddr(const char *name, const guint8 *mac, char **ret_previous, GError **error)
{
    struct ifreq req = {0};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    gboolean ok;

    if (fd < 0) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_FAILED, "socket: %s",
                    g_strerror(errno));
        return FALSE;
    }
    g_strlcpy(req.ifr_name, name, sizeof(req.ifr_name));
    ok = ioctl(fd, SIOCGIFHWADDR, &req) == 0;
    if (ok)
        *ret_previous = format_mac((const guint8 *)req.ifr_hwaddr.sa_data);
    req.ifr_hwaddr.sa_family = ARPHRD_ETHER;
    memcpy(req.ifr_hwaddr.sa_data, mac, 6);
    ok = ok && ioctl(fd, SIOCSIFHWADDR, &req) == 0;
    if (!ok)
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_FAILED,
                    "setting the address of '%s': %s", name, g_strerror(errno));
    close(fd);
    return ok;
}

JsonNode *
carrel_guest_cmd_set_mac(const CarrelGuestOptions *options, GError **error)
{
    g_autoptr(JsonBuilder) builder = NULL;
    g_autofree char *previous = NULL;
    g_autofree char *now = NULL;
    g_autofree char *name = NULL;
    guint8 mac[6];

    if (!carrel_guest_mac_parse(options->argv[0], mac, error) ||
        !(name = carrel_guest_find_nic(error)) || !set_hwaddr(name, mac, &previous, error))
        return NULL;
    now = format_mac(mac);
    builder = carrel_guest_json_begin();
    json_builder_set_member_name(builder, "interface");
    json_builder_add_string_value(builder, name);
    json_builder_set_member_name(builder, "mac");
    json_builder_add_string_value(builder, now);
    json_builder_set_member_name(builder, "previous");
    json_builder_add_string_value(builder, previous);
    return carrel_guest_json_end(builder);
}
