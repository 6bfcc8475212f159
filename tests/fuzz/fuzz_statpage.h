/* The statistics-page fuzzing harness (fuzz_statpage.c): its libFuzzer entry point and the
 * pid its inputs claim, shared with the seed writer (seeds_statpage.c). Test code only. */
#ifndef GP_FUZZ_STATPAGE_H
#define GP_FUZZ_STATPAGE_H

#include <stddef.h>
#include <stdint.h>

/* Inputs are pages of this pid, as file "gpupool.5999999": above PID_MAX_LIMIT (2^22),
 * so never a live process, and the file, the fuzzer's own, counts as a stale page. */
#define GP_FUZZ_STATPAGE_PID 5999999
#define GP_FUZZ_STATPAGE_NAME "gpupool.5999999"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
