/* The unit tests' pseudo-random numbers: Marsaglia's xorshift64 (13, 7, 17), the generator
 * the benchmark and ANCHORS.md use, so a failing run repeats exactly from its seed. */
#ifndef GP_TEST_XORSHIFT_H
#define GP_TEST_XORSHIFT_H

#include <stdint.h>

#define XORSHIFT_SEED 88172645463325252ull

/* The next number of the sequence in *s (never 0 when *s starts non-zero). */
static inline uint64_t xorshift64(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#endif
