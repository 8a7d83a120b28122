/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_frame.c -- the frame header's bytes on the wire: little-endian
 * fields at the offsets frame.h gives, reserved bytes zero, decode the
 * inverse of encode
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "errors.h"
#include "frame.h"

/* frame_header_encode__layout -- every field at its offset, least significant byte first */
static void frame_header_encode__layout(void **state)
{
	struct frame_header h = {
	    .magic = FRAME_MAGIC,
	    .version = 0x0102,
	    .type = 0x0304,
	    .request_id = 0x1112131415161718ULL,
	    .body_len = 0x21222324,
	    .payload_len = 0x31323334,
	};
	uint8_t buf[FRAME_HEADER_SIZE];
	memset(buf, 0xee, sizeof(buf)); /* the reserved bytes must be cleared */
	frame_header_encode(&h, buf);
	const uint8_t want[FRAME_HEADER_SIZE] = {
	    (uint8_t)FRAME_MAGIC,
	    (uint8_t)(FRAME_MAGIC >> 8),
	    (uint8_t)(FRAME_MAGIC >> 16),
	    (uint8_t)(FRAME_MAGIC >> 24),
	    0x02,
	    0x01,
	    0x04,
	    0x03,
	    0x18,
	    0x17,
	    0x16,
	    0x15,
	    0x14,
	    0x13,
	    0x12,
	    0x11,
	    0x24,
	    0x23,
	    0x22,
	    0x21,
	    0x34,
	    0x33,
	    0x32,
	    0x31,
	    /* reserved: zero */
	};
	assert_memory_equal(buf, want, sizeof(want));
}

/* frame_header_decode__inverse_of_encode -- over values with every byte distinct */
static void frame_header_decode__inverse_of_encode(void **state)
{
	for (uint64_t seed = 1; seed < 2000; seed++) {
		uint64_t x = seed * 0x9e3779b97f4a7c15ULL;
		struct frame_header h = {
		    .magic = (uint32_t)x,
		    .version = (uint16_t)(x >> 7),
		    .type = (uint16_t)(x >> 23),
		    .request_id = x ^ (x << 13),
		    .body_len = (uint32_t)(x >> 29),
		    .payload_len = (uint32_t)(x >> 31),
		}, back;
		uint8_t buf[FRAME_HEADER_SIZE];
		frame_header_encode(&h, buf);
		frame_header_decode(buf, &back);
		assert_memory_equal(&h, &back, sizeof(h));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(frame_header_encode__layout),
	    cmocka_unit_test(frame_header_decode__inverse_of_encode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
