/*
 * a11y: the AT-SPI tree over D-Bus with GDBus (no libatspi). The accessibility bus's address is
 * the root window's AT_SPI_BUS property (at-spi-bus-launcher sets it), else org.a11y.Bus's
 * GetAddress on the session's bus. That bus (a dbus-daemon of the desktop user) only admits its
 * own user, so carrel-guest becomes that user before it connects: applications' answers are
 * then read with no more rights than they have themselves.
 */
#include <grp.h>
#include <gio/gio.h>
#include <pwd.h>
#include <string.h>
#include <unistd.h>
#include <X11/Xatom.h>

#include "guest-x11.h"

#define REGISTRY_NAME "org.a11y.atspi.Registry"
#define ROOT_PATH "/org/a11y/atspi/accessible/root"
#define IFACE_ACCESSIBLE "org.a11y.atspi.Accessible"
#define IFACE_COMPONENT "org.a11y.atspi.Component"
#define IFACE_ACTION "org.a11y.atspi.Action"
#define BUS_ADDRESS_MAX 4096
/* One application's answer; a hung one costs at most this per call. */
#define CALL_TIMEOUT_MS 1000
#define ATSPI_COORD_TYPE_SCREEN 0
#define PW_BUFFER_SIZE 16384

typedef struct {
    char *bus;
    char *path;
} Ref;

typedef struct {
    GDBusConnection *bus;
    gint64 deadline_us;
    gboolean timed_out;
} Source;

static void
ref_free(gpointer data)
{
    Ref *ref = data;

    g_free(ref->bus);
    g_free(ref->path);
    g_free(ref);
}

static GVariant *
call(Source *source, const Ref *ref, const char *iface, const char *method, GVariant *args,
     const GVariantType *reply_type, GError **error)
{
    gint64 left_ms = (source->deadline_us - g_get_monotonic_time()) / 1000;

    if (left_ms <= 0) {
        source->timed_out = TRUE;
        if (args)
            g_variant_unref(g_variant_ref_sink(args));
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_TIMEOUT,
                    "the accessibility tree took too long");
        return NULL;
    }
    return g_dbus_connection_call_sync(source->bus, ref ? ref->bus : REGISTRY_NAME,
                                       ref ? ref->path : ROOT_PATH, iface, method, args, reply_type,
                                       G_DBUS_CALL_FLAGS_NO_AUTO_START,
                                       (int)MIN(left_ms, CALL_TIMEOUT_MS), NULL, error);
}

static GPtrArray *
source_children(gpointer data, gconstpointer element, guint max, GError **error)
{
    g_autoptr(GVariant) reply = call(data, element, IFACE_ACCESSIBLE, "GetChildren", NULL,
                                     G_VARIANT_TYPE("(a(so))"), error);
    g_autoptr(GVariantIter) iter = NULL;
    GPtrArray *children;
    const char *bus, *path;

    if (!reply)
        return NULL;
    children = g_ptr_array_new_with_free_func(ref_free);
    g_variant_get(reply, "(a(so))", &iter);
    while (children->len < max && g_variant_iter_next(iter, "(&s&o)", &bus, &path)) {
        Ref *ref = g_new0(Ref, 1);

        ref->bus = g_strdup(bus);
        ref->path = g_strdup(path);
        g_ptr_array_add(children, ref);
    }
    return children;
}

static char *
get_name(Source *source, const Ref *ref)
{
    g_autoptr(GVariant) reply =
        call(source, ref, "org.freedesktop.DBus.Properties", "Get",
             g_variant_new("(ss)", IFACE_ACCESSIBLE, "Name"), G_VARIANT_TYPE("(v)"), NULL);
    g_autoptr(GVariant) value = NULL;

    if (!reply)
        return g_strdup("");
    g_variant_get(reply, "(v)", &value);
    if (!g_variant_is_of_type(value, G_VARIANT_TYPE_STRING))
        return g_strdup("");
    return g_variant_dup_string(value, NULL);
}

static guint64
get_states(Source *source, const Ref *ref)
{
    g_autoptr(GVariant) reply =
        call(source, ref, IFACE_ACCESSIBLE, "GetState", NULL, G_VARIANT_TYPE("(au)"), NULL);
    g_autoptr(GVariantIter) iter = NULL;
    guint32 word;
    guint64 states = 0;

    if (!reply)
        return 0;
    g_variant_get(reply, "(au)", &iter);
    for (guint i = 0; i < 2 && g_variant_iter_next(iter, "u", &word); i++)
        states |= (guint64)word << (32 * i);
    return states;
}

static void
get_extents(Source *source, const Ref *ref, CarrelGuestA11yInfo *info)
{
    g_autoptr(GVariant) reply =
        call(source, ref, IFACE_COMPONENT, "GetExtents",
             g_variant_new("(u)", ATSPI_COORD_TYPE_SCREEN), G_VARIANT_TYPE("((iiii))"), NULL);

    if (!reply)
        return;
    g_variant_get(reply, "((iiii))", &info->x, &info->y, &info->width, &info->height);
    info->has_bounds = TRUE;
}

static void
get_action(Source *source, const Ref *ref, CarrelGuestA11yInfo *info)
{
    g_autoptr(GVariant) reply = call(source, ref, IFACE_ACTION, "GetName", g_variant_new("(i)", 0),
                                     G_VARIANT_TYPE("(s)"), NULL);

    if (reply)
        g_variant_get(reply, "(s)", &info->action);
}

static gboolean
source_describe(gpointer data, gconstpointer element, CarrelGuestA11yInfo *ret_info, GError **error)
{
    Source *source = data;
    const Ref *ref = element;
    g_autoptr(GVariant) role =
        call(source, ref, IFACE_ACCESSIBLE, "GetRoleName", NULL, G_VARIANT_TYPE("(s)"), error);
    g_autoptr(GVariant) ifaces = NULL;
    g_autofree const char **names = NULL;

    if (!role)
        return FALSE;
    g_variant_get(role, "(s)", &ret_info->role);
    ret_info->name = get_name(source, ref);
    ret_info->states = get_states(source, ref);
    ifaces =
        call(source, ref, IFACE_ACCESSIBLE, "GetInterfaces", NULL, G_VARIANT_TYPE("(as)"), NULL);
    if (ifaces)
        g_variant_get(ifaces, "(^a&s)", &names);
    if (names && g_strv_contains(names, IFACE_COMPONENT))
        get_extents(source, ref, ret_info);
    if (names && g_strv_contains(names, IFACE_ACTION))
        get_action(source, ref, ret_info);
    return TRUE;
}

static const CarrelGuestA11yOps dbus_ops = {
    .children = source_children,
    .describe = source_describe,
    .element_free = ref_free,
};

/* The AT_SPI_BUS property of the root window, or NULL. */
static char *
address_from_x(const CarrelGuestOptions *options)
{
    g_autoptr(CarrelGuestX11) x = carrel_guest_x11_open(options, NULL);
    CarrelGuestProperty p = {0};
    char *address = NULL;

    if (!x || !carrel_guest_x11_get_property(x, x->root, XInternAtom(x->dpy, "AT_SPI_BUS", False),
                                             XA_STRING, BUS_ADDRESS_MAX, FALSE, &p))
        return NULL;
    if (p.format == 8 && !p.truncated)
        address = g_strndup((const char *)p.data, p.n_bytes);
    carrel_guest_property_clear(&p);
    return address;
}

/* The accessibility bus's address from org.a11y.Bus on the session bus (as the user already). */
static char *
address_from_session_bus(const char *session_address, GError **error)
{
    g_autoptr(GDBusConnection) bus =
        g_dbus_connection_new_for_address_sync(session_address,
                                               G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                                   G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                               NULL, NULL, error);
    g_autoptr(GVariant) reply = NULL;
    char *address = NULL;

    if (!bus)
        return NULL;
    reply = g_dbus_connection_call_sync(bus, "org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus",
                                        "GetAddress", NULL, G_VARIANT_TYPE("(s)"),
                                        G_DBUS_CALL_FLAGS_NONE, 5000, NULL, error);
    if (reply)
        g_variant_get(reply, "(s)", &address);
    return address;
}

/* Becomes the desktop user for good (root only): the session's, else "agent", else "user". */
static gboolean
become_user(const CarrelGuestSession *session, GError **error)
{
    g_autofree char *buffer = g_malloc(PW_BUFFER_SIZE);
    struct passwd entry;
    struct passwd *found = NULL;

    if (getuid() != 0)
        return TRUE;
    if (session)
        getpwuid_r(session->uid, &entry, buffer, PW_BUFFER_SIZE, &found);
    if (!found)
        getpwnam_r("agent", &entry, buffer, PW_BUFFER_SIZE, &found);
    if (!found)
        getpwnam_r("user", &entry, buffer, PW_BUFFER_SIZE, &found);
    if (!found || found->pw_uid == 0) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND,
                    "no desktop user to read the accessibility tree as");
        return FALSE;
    }
    if (setgroups(1, &found->pw_gid) != 0 || setgid(found->pw_gid) != 0 ||
        setuid(found->pw_uid) != 0 || setuid(0) == 0) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_FORBIDDEN,
                    "cannot become the desktop user '%s'", found->pw_name);
        return FALSE;
    }
    return TRUE;
}

static GDBusConnection *
connect_bus(const CarrelGuestOptions *options, GError **error)
{
    g_autofree char *address = address_from_x(options);
    g_autoptr(CarrelGuestSession) session = NULL;
    int number = 0;
    g_autoptr(GError) local = NULL;
    GDBusConnection *bus;

    if (carrel_guest_display_number(options->display, &number))
        session = carrel_guest_proc_find_session(number);
    if (!become_user(session, error))
        return NULL;
    if (!address) {
        g_autofree char *session_address = NULL;

        for (guint i = 0; session && session->env && session->env[i]; i++) {
            if (g_str_has_prefix(session->env[i], "DBUS_SESSION_BUS_ADDRESS="))
                session_address = g_strdup(strchr(session->env[i], '=') + 1);
        }
        /* The address a systemd user session (and tiny's) uses, when the session's oldest
         * process started before its bus. */
        if (!session_address)
            session_address = g_strdup_printf("unix:path=/run/user/%u/bus", (guint)getuid());
        address = address_from_session_bus(session_address, &local);
    }
    if (!address) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_NOT_FOUND,
                    "no accessibility bus on display '%s' (no AT_SPI_BUS on the root window, no "
                    "org.a11y.Bus on the session bus%s%s): is at-spi2-core running?",
                    options->display, local ? ": " : "", local ? local->message : "");
        return NULL;
    }
    bus = g_dbus_connection_new_for_address_sync(address,
                                                 G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT |
                                                     G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION,
                                                 NULL, NULL, &local);
    if (!bus)
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_DISPLAY,
                    "cannot connect to the accessibility bus: %s", local->message);
    return bus;
}

static JsonNode *
cmd_tree(const CarrelGuestOptions *options, Source *source, GError **error)
{
    g_autofree char *active = NULL;
    JsonNode *reply;

    if (!options->a11y_all) {
        g_autoptr(GError) local = NULL;

        /* No active window (focus on the root, between two windows): the whole desktop. */
        active = carrel_guest_a11y_find_active(&dbus_ops, source, &local);
        if (local) {
            g_propagate_error(error, g_steal_pointer(&local));
            return NULL;
        }
    }
    if (options->a11y_app)
        reply = carrel_guest_a11y_tree_app(&dbus_ops, source, options->a11y_app, options->depth,
                                           options->max_nodes, error);
    else
        reply = carrel_guest_a11y_tree(&dbus_ops, source, active, options->depth,
                                       options->max_nodes, error);
    if (reply && source->timed_out)
        json_object_set_boolean_member(json_node_get_object(reply), "truncated", TRUE);
    return reply;
}

static JsonNode *
cmd_node(const CarrelGuestOptions *options, Source *source, GError **error)
{
    const char *id = options->argv[0];
    Ref *ref = carrel_guest_a11y_resolve(&dbus_ops, source, id, error);
    CarrelGuestA11yInfo info = {0};
    g_autoptr(JsonBuilder) b = NULL;
    gboolean ok;

    if (!ref)
        return NULL;
    ok = source_describe(source, ref, &info, error);
    ref_free(ref);
    if (!ok)
        return NULL;
    b = carrel_guest_json_begin();
    json_builder_set_member_name(b, "node");
    json_builder_add_value(b, carrel_guest_a11y_node_to_json(id, &info));
    carrel_guest_a11y_info_clear(&info);
    return carrel_guest_json_end(b);
}

static JsonNode *
cmd_action(const CarrelGuestOptions *options, Source *source, GError **error)
{
    const char *id = options->argv[0];
    Ref *ref = carrel_guest_a11y_resolve(&dbus_ops, source, id, error);
    CarrelGuestA11yInfo info = {0};
    g_autoptr(GVariant) reply = NULL;
    g_autoptr(JsonBuilder) b = NULL;
    gboolean done = FALSE;

    if (!ref)
        return NULL;
    get_action(source, ref, &info);
    if (info.action)
        reply = call(source, ref, IFACE_ACTION, "DoAction", g_variant_new("(i)", 0),
                     G_VARIANT_TYPE("(b)"), error);
    ref_free(ref);
    if (!info.action) {
        g_set_error(error, CARREL_GUEST_ERROR, CARREL_GUEST_ERROR_INVALID_ARG,
                    "element '%s' has no action", id);
        return NULL;
    }
    if (!reply) {
        carrel_guest_a11y_info_clear(&info);
        return NULL;
    }
    g_variant_get(reply, "(b)", &done);
    b = carrel_guest_json_begin();
    json_builder_set_member_name(b, "id");
    json_builder_add_string_value(b, id);
    json_builder_set_member_name(b, "action");
    json_builder_add_string_value(b, info.action);
    json_builder_set_member_name(b, "done");
    json_builder_add_boolean_value(b, done);
    carrel_guest_a11y_info_clear(&info);
    return carrel_guest_json_end(b);
}

JsonNode *
carrel_guest_cmd_a11y(const CarrelGuestOptions *options, GError **error)
{
    Source source = {.deadline_us = g_get_monotonic_time() + options->timeout_ms * 1000};
    JsonNode *reply = NULL;
    g_autoptr(GArray) path = NULL;

    /* A malformed id is refused before anything in the guest is touched. */
    if (options->command != CARREL_GUEST_COMMAND_A11Y_TREE &&
        !(path = carrel_guest_a11y_id_parse(options->argv[0], error)))
        return NULL;
    if (!(source.bus = connect_bus(options, error)))
        return NULL;
    if (options->command == CARREL_GUEST_COMMAND_A11Y_TREE)
        reply = cmd_tree(options, &source, error);
    else if (options->command == CARREL_GUEST_COMMAND_A11Y_NODE)
        reply = cmd_node(options, &source, error);
    else
        reply = cmd_action(options, &source, error);
    g_object_unref(source.bus);
    return reply;
}
