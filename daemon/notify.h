/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * notify.h -- tell the service manager (systemd, Type=notify) how the daemon is
 *
 * The unit (deploy/rdaxd.service) is Type=notify: systemd counts rdaxd as
 * started only when notify_ready() has been sent, i.e. when every listener
 * accepts and every namespace is open, so units ordered after rdaxd.service
 * find it serving. notify_stopping() tells it the daemon is draining and
 * writing back (which may take long on a large dirty set). Both carry a
 * STATUS= line that `systemctl status rdaxd` shows.
 *
 * Outside systemd (no NOTIFY_SOCKET in the environment) every call does
 * nothing. A message that cannot be sent is logged as a warning and
 * otherwise ignored: the daemon serves either way.
 *
 * Context: the main thread (sd_notify(3) messages come from the main PID
 * under the default NotifyAccess=main). They do not block.
 */
#ifndef RDAXD_NOTIFY_H
#define RDAXD_NOTIFY_H

/* notify_ready -- READY=1 with STATUS=@status (e.g. the ready line) */
void notify_ready(const char *status);

/* notify_stopping -- STOPPING=1 with a STATUS= saying that the daemon drains and writes back */
void notify_stopping(void);

#endif
