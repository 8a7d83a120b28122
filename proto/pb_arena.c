/* SPDX-License-Identifier: BSD-3-Clause */
/* pb_arena.c -- a bump allocator for protobuf_c_message_unpack() */
#include "pb_arena.h"

#include <stdlib.h>

/* arena_alloc -- ProtobufCAllocator.alloc: the next aligned piece of the buffer, or malloc */
static void *arena_alloc(void *data, size_t size)
{
	struct pb_arena *a = data;
	size_t at = (a->used + 15) & ~(size_t)15;
	if (at <= a->cap && size <= a->cap - at) {
		a->used = at + size;
		return a->buf + at;
	}
	a->heap = true;
	return malloc(size);
}

/* arena_free -- ProtobufCAllocator.free: only what came from malloc */
static void arena_free(void *data, void *p)
{
	const struct pb_arena *a = data;
	uintptr_t u = (uintptr_t)p, b = (uintptr_t)a->buf;
	if (u >= b && u < b + a->cap)
		return;
	free(p);
}

void pb_arena_init(struct pb_arena *a, void *buf, size_t cap)
{
	*a = (struct pb_arena){
	    .alloc = {.alloc = arena_alloc, .free = arena_free, .allocator_data = a},
	    .buf = buf,
	    .cap = cap,
	};
}

void pb_arena_drop(struct pb_arena *a, ProtobufCMessage *msg)
{
	if (msg && a->heap)
		protobuf_c_message_free_unpacked(msg, &a->alloc);
}
