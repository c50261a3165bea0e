/* Sessions' network: carrel's isolated libvirt network, made on first use and checked each time. */
#include "core/core-priv.h"
#include "net/net.h"

gboolean
carrel_manager_ensure_network(CarrelManager *mgr, GError **error)
{
    g_autofree char *xml = NULL;
    g_autofree char *running = NULL;

    xml = carrel_net_isolated_network_xml(CARREL_NET_ISOLATED_NAME, CARREL_NET_ISOLATED_BRIDGE,
                                          error);
    /* What runs is checked, not what was asked for: another tool may own a network of this name,
     * and a sandbox must never be attached to one that forwards. */
    if (!xml ||
        !carrel_hypervisor_ensure_network(mgr->hv, CARREL_NET_ISOLATED_NAME, xml, &running,
                                          error) ||
        !carrel_net_check_isolated(running, error)) {
        g_prefix_error(error, "session network '%s': ", CARREL_NET_ISOLATED_NAME);
        return FALSE;
    }
    return TRUE;
}

/* Guest side of a clone's MAC: carrel-guest set-mac on the one NIC. */
gboolean
carrel_manager_set_guest_mac(CarrelManager *mgr, const char *domain, const char *mac,
                             GError **error)
{
    const char *argv[] = {CARREL_GUEST_TOOL_PATH, "set-mac", mac, NULL};
    CarrelGuestExec run = {.argv = argv, .timeout_s = 15, .max_output = 4096};
    g_auto(CarrelExecResult) result = {0};

    if (!carrel_hypervisor_agent_exec(mgr->hv, domain, &run, &result, error))
        return FALSE;
    /* The guest's words are not quoted: its output is untrusted. */
    if (result.exit_code != 0) {
        g_set_error(error, CARREL_ERROR, CARREL_ERROR_FAILED, "carrel-guest set-mac exited %d%s",
                    result.exit_code,
                    result.exit_code == 127 ? " (this guest has no carrel-guest)" : "");
        return FALSE;
    }
    return TRUE;
}
