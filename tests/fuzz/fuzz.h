/* The libFuzzer entry points every harness in tests/fuzz defines, and the check a harness
 * stops on. A harness is built twice (tests/fuzz/meson.build): with run_corpus.c as a
 * regression test over its corpus, and with -fsanitize=fuzzer as a libFuzzer binary. */
#ifndef GP_FUZZ_H
#define GP_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* One input: `size` bytes at `data`, not NUL-terminated. Returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property the harness checks failed: say which, then abort so that libFuzzer keeps the
 * input as a crash and run_corpus fails. */
#define FUZZ_CHECK(x) ((x) ? (void)0 : fuzz_fail(#x, __FILE__, __LINE__))

static inline void fuzz_fail(const char *what, const char *file, int line)
{
	fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
	abort();
}

#endif
