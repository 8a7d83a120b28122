/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pb_arena.h -- a bump allocator for protobuf_c_message_unpack()
 *
 * Messages that are read and dropped at once (a request body in the
 * daemon, a data reply in librdax) need not cost a malloc and a free each:
 * unpack them into a buffer on the caller's stack. Pieces are 16-byte
 * aligned; when the buffer is full the rest comes from malloc, and only
 * then must the message be freed (pb_arena_drop), whose frees the arena
 * ignores inside the buffer.
 */
#ifndef RDAX_PB_ARENA_H
#define RDAX_PB_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Refers to itself (alloc.allocator_data): initialise in place, never copy. */
struct pb_arena {
	ProtobufCAllocator alloc; /* pass &arena.alloc to *_unpack() */
	uint8_t *buf;
	size_t cap, used;
	bool heap; /* something came from malloc */
};

/* pb_arena_init -- an empty arena over @buf (@cap bytes, 16-byte aligned) */
void pb_arena_init(struct pb_arena *a, void *buf, size_t cap);

/*
 * pb_arena_drop -- done with @msg (unpacked with @a's allocator, may be
 * NULL): frees what malloc gave it; nothing to do when it fit in the buffer
 */
void pb_arena_drop(struct pb_arena *a, ProtobufCMessage *msg);

#endif
