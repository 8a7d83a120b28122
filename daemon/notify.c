/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * notify.c -- sd_notify(3) readiness and stop messages (see notify.h)
 */
#include "notify.h"

#include <string.h>

#include <systemd/sd-daemon.h>

#include "log.h"

/* notify_send -- one sd_notify message; a failure is only worth a warning */
static void notify_send(const char *what, const char *status)
{
	int ret = sd_notifyf(0, "%s\nSTATUS=%s", what, status);
	if (ret < 0)
		LOG_WARN("sd_notify(%s) failed: %s", what, strerror(-ret));
}

void notify_ready(const char *status)
{
	notify_send("READY=1", status);
}

void notify_stopping(void)
{
	notify_send("STOPPING=1", "shutting down: draining connections, writing back dirty data");
}
