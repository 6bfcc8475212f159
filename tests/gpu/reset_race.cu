/* reset_race [ROUNDS [DELAY_US]]: cudaDeviceReset while another thread allocates and a
 * 20 ms kernel is in flight, ROUNDS times (default 20); DELAY_US (default 0) is slept
 * between the kernel's launch and the reset, so that more of the other thread's
 * allocations fall right before and during it. After each reset, 32 allocations must be
 * device memory (cudaPointerGetAttributes: cudaMemoryTypeDevice) and writable, and
 * cudaDeviceSynchronize must return 0: CUDA leaves calls made on a device during its reset
 * to the caller, but the damage ends with the reset. Under gpupool a segment grown during
 * the reset once stayed in the new pool: all 32 allocations after the reset were dead
 * memory, then error 709 from a fence's cudaDeviceSynchronize. The other thread never
 * touches or frees what it got (stale after a reset: freeing it could free a new owner's
 * memory at the same address, natively too). Exit 0 pass, 1 fail, 77 skip (no GPU). */
#include <pthread.h>
#include <unistd.h>

#include "common.h"

static volatile int stop;
static unsigned long others;

static void *allocator(void *arg)
{
	(void)arg;
	(void)cudaSetDevice(0);
	for (unsigned i = 0; !stop; i++) {
		void *x = NULL;
		/* a small block, and now and then a medium one: a new pool grows segments */
		if (cudaMalloc(&x, i % 8 ? 4096 : (size_t)3 << 20) == cudaSuccess)
			others++;
		(void)cudaGetLastError();
		usleep(50);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 20;
	unsigned delay_us = argc > 2 ? (unsigned)atoi(argv[2]) : 0;
	gp_require_gpu();
	pthread_t t;
	EXPECT(pthread_create(&t, NULL, allocator, NULL) == 0, "cannot start the allocating thread");
	for (int r = 0; r < rounds; r++) {
		uint32_t *k = NULL;
		CK(cudaMalloc(&k, 1 << 20));
		gp_fill(k, 1 << 20, 0x1234, 20000.0, 0); /* 20 ms, in flight during the reset */
		if (delay_us)
			usleep(delay_us);
		CK(cudaDeviceReset());
		void *p[32];
		for (int i = 0; i < 32; i++) {
			size_t n = (size_t)4096 * (size_t)(i + 1);
			CK(cudaMalloc(&p[i], n));
			struct cudaPointerAttributes at;
			cudaError_t e = cudaPointerGetAttributes(&at, p[i]);
			EXPECT(e == cudaSuccess && at.type == cudaMemoryTypeDevice,
			       "round %d: allocation %d (%p) after the reset is not device memory (%d, type %d)", r, i,
			       p[i], (int)e, e == cudaSuccess ? (int)at.type : -1);
			CK(cudaMemset(p[i], i, n));
		}
		cudaError_t s = cudaDeviceSynchronize();
		EXPECT(s == cudaSuccess, "round %d: cudaDeviceSynchronize after the reset -> %s (%d)", r,
		       cudaGetErrorString(s), (int)s);
		for (int i = 0; i < 32; i++)
			CK(cudaFree(p[i]));
	}
	stop = 1;
	pthread_join(t, NULL);
	printf("reset_race: %d rounds (delay %u us): 32 allocations after each reset were device memory, "
	       "cudaDeviceSynchronize 0; the other thread made %lu allocations (shim %s)\n",
	       rounds, delay_us, others, gp_shim_loaded() ? "on" : "off");
	return 0;
}
