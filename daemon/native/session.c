/* SPDX-License-Identifier: BSD-3-Clause */
/* session.c -- per-connection protocol state: hello and the handle table */
#include "session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "log.h"

#define HANDLE_INDEX_BITS 16
#define HANDLE_INDEX_MASK ((1U << HANDLE_INDEX_BITS) - 1)

/* handle_pack -- the handle of slot @index at generation @gen (diagram in session.h) */
static uint32_t handle_pack(unsigned index, uint16_t gen)
{
	return ((uint32_t)gen << HANDLE_INDEX_BITS) | (uint32_t)(index + 1);
}

/* handle_slot -- the slot a handle names, or NULL (never open, wrong generation) */
static struct session_slot *handle_slot(struct session *s, uint32_t handle)
{
	unsigned index1 = handle & HANDLE_INDEX_MASK;
	if (index1 == 0 || index1 > s->nslots)
		return NULL;
	struct session_slot *slot = &s->slots[index1 - 1];
	if (!slot->v || slot->gen != (uint16_t)(handle >> HANDLE_INDEX_BITS))
		return NULL;
	return slot;
}

int session_new(struct store *store, const char *peer, struct session **out)
{
	if (!store || !out)
		return -EINVAL;
	struct session *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->store = store;
	snprintf(s->peer, sizeof(s->peer), "%s", peer ? peer : "?");
	*out = s;
	return 0;
}

void session_delete(struct session **sp)
{
	if (!sp || !*sp)
		return;
	struct session *s = *sp;
	for (unsigned i = 0; i < s->nslots; i++) {
		struct session_slot *slot = &s->slots[i];
		if (!slot->v)
			continue;
		if (slot->holds)
			LOG_ERROR("%s: volume \"%s\" closed with %u holds left", s->peer,
				  slot->v->name, slot->holds);
		LOG_DEBUG("%s: closing volume \"%s\" with the connection", s->peer, slot->v->name);
		store_volume_close(s->store, &slot->v);
	}
	free(s->slots);
	free(s);
	*sp = NULL;
}

int session_handle_add(struct session *s, struct volume *v, uint32_t *handle)
{
	if (!s || !v || !handle)
		return -EINVAL;
	unsigned index = s->nslots;
	for (unsigned i = 0; i < s->nslots; i++) {
		if (!s->slots[i].v) {
			index = i;
			break;
		}
	}
	if (index == s->nslots) {
		if (s->nslots >= SESSION_MAX_HANDLES)
			return -RDAX_E_TOO_BIG;
		unsigned cap = s->nslots ? s->nslots * 2 : 8;
		if (cap > SESSION_MAX_HANDLES)
			cap = SESSION_MAX_HANDLES;
		struct session_slot *a = realloc(s->slots, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		memset(a + s->nslots, 0, (cap - s->nslots) * sizeof(*a));
		s->slots = a;
		s->nslots = cap;
	}
	struct session_slot *slot = &s->slots[index];
	slot->gen++;
	slot->v = v;
	slot->open = true;
	slot->ro = false;
	slot->holds = 0;
	slot->gate = NULL;
	slot->epoch = 0;
	s->nopen++;
	*handle = handle_pack(index, slot->gen);
	return 0;
}

void session_handle_set_ro(struct session *s, uint32_t handle)
{
	struct session_slot *slot = s ? handle_slot(s, handle) : NULL;
	if (slot)
		slot->ro = true;
}

bool session_handle_ro(struct session *s, uint32_t handle)
{
	struct session_slot *slot = s ? handle_slot(s, handle) : NULL;
	return slot && slot->open && slot->ro;
}

void session_handle_fence(struct session *s, uint32_t handle, const struct gate_vol *gate,
			  uint64_t epoch)
{
	struct session_slot *slot = session_handle_slot(s, handle);
	if (!slot)
		return;
	slot->gate = gate;
	slot->epoch = epoch;
}

struct session_slot *session_handle_slot(struct session *s, uint32_t handle)
{
	struct session_slot *slot = s ? handle_slot(s, handle) : NULL;
	return slot && slot->open ? slot : NULL;
}

int session_handle_get(struct session *s, uint32_t handle, struct volume **v)
{
	struct session_slot *slot = s ? handle_slot(s, handle) : NULL;
	if (!slot || !slot->open)
		return -RDAX_E_NOT_OPEN;
	if (v)
		*v = slot->v;
	return 0;
}

int session_handle_hold(struct session *s, uint32_t handle, struct volume **v)
{
	struct session_slot *slot = s ? handle_slot(s, handle) : NULL;
	if (!slot || !slot->open)
		return -RDAX_E_NOT_OPEN;
	slot->holds++;
	if (v)
		*v = slot->v;
	return 0;
}

bool session_handle_release(struct session *s, uint32_t handle)
{
	struct session_slot *slot = s ? handle_slot(s, handle) : NULL;
	if (!slot || slot->holds == 0) {
		LOG_ERROR("release of handle %#x that holds nothing", handle);
		return false;
	}
	if (--slot->holds > 0 || slot->open)
		return false;
	store_volume_close(s->store, &slot->v);
	s->nopen--;
	return true;
}

int session_handle_close(struct session *s, uint32_t handle, struct volume **vp)
{
	struct session_slot *slot = s ? handle_slot(s, handle) : NULL;
	if (!slot || !slot->open || !vp)
		return -RDAX_E_NOT_OPEN;
	slot->open = false;
	if (slot->holds > 0) {
		*vp = NULL;
		return 0;
	}
	*vp = slot->v;
	slot->v = NULL;
	s->nopen--;
	return 0;
}

unsigned session_holds(const struct session *s)
{
	unsigned n = 0;
	for (unsigned i = 0; s && i < s->nslots; i++)
		n += s->slots[i].holds;
	return n;
}
