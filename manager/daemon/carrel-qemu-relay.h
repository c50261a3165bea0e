#pragma once

/* Starts carrel-qemu's monitor relay (carrel-qemu-relay.c) when cache_dir names the folder of
 * its CPU caches and argv has libvirt's monitor: returns the argv QEMU is to run with (its
 * monitor on the relay's socket), or argv itself (said on stderr where something failed).
 * process_argv: main's own, which the relay's process overwrites with its name. */
char **carrel_qemu_relay_start(char **process_argv, char **argv, const char *cache_dir);
