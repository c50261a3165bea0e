/*
 * set-net, the half that needs root in a VM: puts a CarrelGuestNetConfig on the one NIC with the
 * classic ioctls (the guest may have no iproute2) and writes /etc/resolv.conf. carreld runs it
 * when a session's network changes; the same values again leave the address alone and succeed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest.h"

#define RESOLV_CONF "/etc/resolv.conf"
#define PROC_NET_ROUTE "/proc/net/route"
/* Bounds on what we read from and loop over in the kernel: addresses listed, routes removed. */
#define LIMIT_ADDRESSES 256
#define LIMIT_ROUTES 64

/* One IPv4 address as SIOCGIFCONF lists it: its label is the NIC's name or an alias "eth0:1". */
typedef struct {
    char label[IFNAMSIZ];
    guint32 address;
} IfAddress;

static gboolean net_error(GError **error, int errsv, const char *format, ...) G_GNUC_PRINTF(3, 4);

/* EPERM (not root) and ENODEV (the NIC went away) get their own codes: the caller acts on them. */
static gboolean
net_error(GError **error, int errsv, const char *format, ...)
{
    g_autofree char *what = NULL;
    int code = CARREL_GUEST_ERROR_FAILED;
    va_list ap;

    if (errsv == EPERM || errsv == EACCES)
        code = CARREL_GUEST_ERROR_FORBIDDEN;
    else if (errsv == ENODEV || errsv == ENXIO)
        code = CARREL_GUEST_ERROR_NOT_FOUND;
    va_start(ap, format);
    what = g_strdup_vprintf(format, ap);
    va_end(ap);
    g_set_error(error, CARREL_GUEST_ERROR, code, "%s: %s", what, g_strerror(errsv));
    return FALSE;
}

static void
set_sin(struct sockaddr *sa, guint32 address)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(address)};

    memcpy(sa, &sin, sizeof(sin));
}

static guint32
get_sin(const struct sockaddr *sa)
{
    struct sockaddr_in sin;

    memcpy(&sin, sa, sizeof(sin));
    return ntohl(sin.sin_addr.s_addr);
}

static gboolean
bring_up(int fd, const char *nic, GError **error)
{
    struct ifreq req = {0};

    g_strlcpy(req.ifr_name, nic, sizeof(req.ifr_name));
    if (ioctl(fd, SIOCGIFFLAGS, &req) < 0)
        return net_error(error, errno, "reading the flags of '%s'", nic);
    if (req.ifr_flags & IFF_UP)
        return TRUE;
    req.ifr_flags |= IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &req) < 0)
        return net_error(error, errno, "bringing '%s' up", nic);
    return TRUE;
}

static gboolean
label_is_nic(const char *label, const char *nic)
{
    gsize len = strlen(nic);

    return strncmp(label, nic, len) == 0 && (label[len] == '\0' || label[len] == ':');
}

/* The IPv4 addresses on nic, secondary and alias ones included (of IfAddress). */
static GArray *
list_addresses(int fd, const char *nic, GError **error)
{
    g_autofree struct ifreq *reqs = g_new0(struct ifreq, LIMIT_ADDRESSES);
    struct ifconf conf = {.ifc_len = (int)sizeof(struct ifreq) * LIMIT_ADDRESSES, .ifc_req = reqs};
    g_autoptr(GArray) list = g_array_new(FALSE, TRUE, sizeof(IfAddress));

    if (ioctl(fd, SIOCGIFCONF, &conf) < 0) {
        net_error(error, errno, "listing the addresses of '%s'", nic);
        return NULL;
    }
    for (gsize i = 0; i < (gsize)conf.ifc_len / sizeof(struct ifreq); i++) {
        IfAddress entry = {0};

        memcpy(entry.label, reqs[i].ifr_name, IFNAMSIZ - 1);
        if (reqs[i].ifr_addr.sa_family != AF_INET || !label_is_nic(entry.label, nic))
            continue;
        entry.address = get_sin(&reqs[i].ifr_addr);
        g_array_append_val(list, entry);
    }
    return g_steal_pointer(&list);
}

/* SIOCSIFADDR 0.0.0.0 deletes the first address under a label (ifconfig's "0.0.0.0" does the
 * same); one at a time until none is left, as deleting a primary may promote a secondary. */
static gboolean
clear_addresses(int fd, const char *nic, GError **error)
{
    for (guint i = 0; i < LIMIT_ADDRESSES; i++) {
        g_autoptr(GArray) list = list_addresses(fd, nic, error);
        struct ifreq req = {0};

        if (!list)
            return FALSE;
        if (list->len == 0)
            return TRUE;
        memcpy(req.ifr_name, g_array_index(list, IfAddress, 0).label, IFNAMSIZ);
        set_sin(&req.ifr_addr, 0);
        if (ioctl(fd, SIOCSIFADDR, &req) < 0)
            return net_error(error, errno, "removing an address of '%s'", nic);
    }
    g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_LIMIT,
                "'%s' still has addresses after %d removals", nic, LIMIT_ADDRESSES);
    return FALSE;
}

/* Exactly config's address and netmask, and nothing else. */
static gboolean
has_only(int fd, const char *nic, GArray *list, const CarrelGuestNetConfig *config)
{
    const IfAddress *only;
    struct ifreq req = {0};

    if (list->len != 1)
        return FALSE;
    only = &g_array_index(list, IfAddress, 0);
    if (!g_str_equal(only->label, nic) || only->address != config->address)
        return FALSE;
    g_strlcpy(req.ifr_name, nic, sizeof(req.ifr_name));
    return ioctl(fd, SIOCGIFNETMASK, &req) == 0 &&
           get_sin(&req.ifr_netmask) == carrel_guest_ipv4_netmask(config->prefix);
}

static gboolean
set_address(int fd, const char *nic, const CarrelGuestNetConfig *config, GError **error)
{
    g_autoptr(GArray) list = list_addresses(fd, nic, error);
    struct ifreq req = {0};

    if (!list)
        return FALSE;
    /* The same values again: keep the address, and the connections bound to it. */
    if (has_only(fd, nic, list, config))
        return TRUE;
    if (!clear_addresses(fd, nic, error))
        return FALSE;
    g_strlcpy(req.ifr_name, nic, sizeof(req.ifr_name));
    set_sin(&req.ifr_addr, config->address);
    if (ioctl(fd, SIOCSIFADDR, &req) < 0)
        return net_error(error, errno, "setting the address of '%s'", nic);
    /* SIOCSIFADDR gave the address its class's mask; the kernel derives the broadcast from this. */
    set_sin(&req.ifr_netmask, carrel_guest_ipv4_netmask(config->prefix));
    if (ioctl(fd, SIOCSIFNETMASK, &req) < 0)
        return net_error(error, errno, "setting the netmask of '%s'", nic);
    return TRUE;
}

static void
init_default_route(struct rtentry *route)
{
    memset(route, 0, sizeof(*route));
    set_sin(&route->rt_dst, 0);
    set_sin(&route->rt_genmask, 0);
}

/* SIOCDELRT with neither gateway nor device removes the main table's first default route, any
 * gateway, any metric: repeat until there is none (ESRCH). */
static gboolean
clear_default_routes(int fd, GError **error)
{
    for (guint i = 0; i < LIMIT_ROUTES; i++) {
        struct rtentry route;

        init_default_route(&route);
        if (ioctl(fd, SIOCDELRT, &route) < 0)
            return errno == ESRCH ? TRUE : net_error(error, errno, "removing the default route");
    }
    g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_LIMIT,
                "still a default route after %d removals", LIMIT_ROUTES);
    return FALSE;
}

static gboolean
add_default_route(int fd, const char *nic, guint32 gateway, GError **error)
{
    g_autofree char *text = carrel_guest_ipv4_to_string(gateway);
    struct rtentry route;
    char dev[IFNAMSIZ];

    init_default_route(&route);
    g_strlcpy(dev, nic, sizeof(dev));
    set_sin(&route.rt_gateway, gateway);
    route.rt_flags = RTF_UP | RTF_GATEWAY;
    route.rt_dev = dev;
    /* EEXIST: the same route, added since we cleared them; what we wanted. */
    if (ioctl(fd, SIOCADDRT, &route) < 0 && errno != EEXIST)
        return net_error(error, errno, "adding the default route via '%s' on '%s'", text, nic);
    return TRUE;
}

/* The same values again: keep the route, or packets sent meanwhile would find none. */
static gboolean
has_default_route(const char *nic, guint32 gateway)
{
    g_autofree char *table = NULL;
    gsize len;

    return carrel_guest_read_bounded(PROC_NET_ROUTE, CARREL_GUEST_LIMIT_PROC_FILE, &table, &len,
                                     NULL) &&
           carrel_guest_net_default_route_is(table, nic, gateway);
}

static gboolean
replace_default_route(int fd, const char *nic, guint32 gateway, GError **error)
{
    if (has_default_route(nic, gateway))
        return TRUE;
    return clear_default_routes(fd, error) && add_default_route(fd, nic, gateway, error);
}

static gboolean
apply(const char *nic, const CarrelGuestNetConfig *config, GError **error)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    gboolean ok;

    if (fd < 0)
        return net_error(error, errno, "socket");
    if (config->none)
        ok = clear_default_routes(fd, error) && clear_addresses(fd, nic, error);
    else /* up first: only an up link gets the subnet's route, which the gateway needs */
        ok = bring_up(fd, nic, error) && set_address(fd, nic, config, error) &&
             replace_default_route(fd, nic, config->gateway, error);
    close(fd);
    return ok;
}

gboolean
carrel_guest_net_write_resolv_conf(const char *path, const CarrelGuestNetConfig *config,
                                   GError **error)
{
    g_autofree char *text = carrel_guest_net_resolv_conf(config);
    g_autoptr(GError) local = NULL;
    mode_t mask = umask(022); /* every user's resolver must read it, whatever umask we got */
    gboolean ok;

    /* A temporary file renamed over path: readers see the old file or the new, never half. The
     * rename also replaces a symlink (resolvconf, systemd-resolved) instead of writing through
     * it: from now on carreld decides the guest's name server. */
    ok = g_file_set_contents_full(
        path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE, 0644, &local);
    umask(mask);
    if (ok)
        return TRUE;
    g_set_error(error, CARREL_GUEST_ERROR,
                g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_ACCES) ||
                        g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_PERM)
                    ? CARREL_GUEST_ERROR_FORBIDDEN
                    : CARREL_GUEST_ERROR_FAILED,
                "writing '%s': %s", path, local->message);
    return FALSE;
}

JsonNode *
carrel_guest_cmd_set_net(const CarrelGuestOptions *options, GError **error)
{
    g_autofree char *nic = NULL;
    CarrelGuestNetConfig config;

    /* Network first, name server last: a failure leaves resolv.conf as it was. */
    if (!carrel_guest_net_config_parse((const char *const *)options->argv, &config, error) ||
        !(nic = carrel_guest_find_nic(error)) || !apply(nic, &config, error) ||
        !carrel_guest_net_write_resolv_conf(RESOLV_CONF, &config, error))
        return NULL;
    return carrel_guest_net_config_to_json(nic, &config);
}
