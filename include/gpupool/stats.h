/* gpupool statistics page: the layout of /dev/shm/gpupool.<pid>, for readers.
 *
 * One page per process that allocated through gpupool. Each device slot has exactly one
 * writer at a time (the holder of that device's pool lock) and a sequence counter: the
 * writer makes it odd before changing the slot and even after. A reader copies the slot,
 * and retries while the counter was odd or changed during the copy. Nothing in the page
 * is a lock: a process killed mid-update leaves an odd counter, never a hung reader.
 * All integers are native-endian; the page is only read on the host that wrote it.
 *
 * Layout rules. magic, version and size open the header and never move. Changing the
 * offset, size or meaning of a field, or the size of the page, increments
 * GPUPOOL_PAGE_VERSION. A reader checks magic, version and size (the header's and the
 * file's) before it reads anything else, and leaves out a page of a version it does not
 * know, with one line: an older reader never misreads a newer page. A reader may also take
 * older versions, mapping their fields to the current ones: gpupool-stat reads versions 2
 * to 5 (a version 2 slot is a version 3 slot without its uuid, a version 3 slot a version 4
 * slot's prefix, a version 4 slot a version 5 slot's prefix; src/stats/statpage.c); fields
 * an older page lacks read as zero. A
 * reserved word may become a field, zero meaning "not known", without a new version
 * (lib_version did). */
#ifndef GPUPOOL_STATS_H
#define GPUPOOL_STATS_H

#include <stdint.h>

#define GPUPOOL_PAGE_MAGIC 0x31504f4f4c505047ull /* "GPPLOOP1" little-endian */
/* 2: the driver layer's counters (driver_*); 3: each device's uuid; 4: memory held outside
 * the pools (unpooled_*), idle memory given to other processes (reclaim_*, decay); 5:
 * allocations that wait for memory (waiting_bytes, waits, wait_*), the floor a process keeps
 * cached, each device's name */
#define GPUPOOL_PAGE_VERSION 5u
#define GPUPOOL_MAX_DEVICES 16
#define GPUPOOL_COMM_LEN 16
#define GPUPOOL_VERSION_LEN 16
#define GPUPOOL_UUID_LEN 16
#define GPUPOOL_DEVICE_NAME_LEN 64
#define GPUPOOL_PAGE_PREFIX "/dev/shm/gpupool."

/* Gauges: a current value and its peak. X(name, unit, help). Units: "bytes", "count" or "ns".
 * GPUPOOL_GAUGES and GPUPOOL_COUNTERS list every field; the _3, _4 and _5 lists say which
 * version brought them and where they lie (struct gpupool_device_stats). */
#define GPUPOOL_GAUGES(X) GPUPOOL_GAUGES_3(X) GPUPOOL_GAUGES_4(X) GPUPOOL_GAUGES_5(X)
#define GPUPOOL_COUNTERS(X) GPUPOOL_COUNTERS_3(X) GPUPOOL_COUNTERS_4(X) GPUPOOL_COUNTERS_5(X)

#define GPUPOOL_GAUGES_3(X)                                                                   \
	X(requested_bytes, bytes, "bytes asked for by live allocations, before rounding")         \
	X(allocated_bytes, bytes, "bytes in live blocks, after rounding")                         \
	X(reserved_bytes, bytes, "bytes in segments taken from the CUDA runtime")                 \
	X(cached_bytes, bytes, "reserved bytes not in live blocks (free or pending)")             \
	X(largest_free_block, bytes, "largest free block ready for reuse")                        \
	X(live_blocks, count, "live (allocated) blocks")                                          \
	X(free_blocks, count, "free blocks, ready or pending")                                    \
	X(segments, count, "segments held")                                                       \
	X(pending_frees, count, "blocks freed with cudaFree waiting for a fence")                 \
	X(pending_bytes, bytes, "bytes in blocks waiting for a fence")

/* Counters: monotonic totals since the process started using gpupool. */
#define GPUPOOL_COUNTERS_3(X)                                                                  \
	X(allocs, count, "allocation requests served by the pool")                                \
	X(frees, count, "frees of pool blocks")                                                   \
	X(requested_bytes_total, bytes, "bytes asked for, summed over all allocations")           \
	X(hits, count, "allocations served from cached blocks")                                   \
	X(misses, count, "allocations that needed a new segment")                                 \
	X(splits, count, "blocks split")                                                          \
	X(merges, count, "free blocks merged with a neighbour")                                   \
	X(segment_allocs, count, "real cudaMalloc calls made for segments")                       \
	X(segment_frees, count, "real cudaFree calls made for segments")                          \
	X(segment_alloc_failures, count, "real cudaMalloc calls that failed")                     \
	X(fences, count, "fences completed (marker events, or a device sync, fence_marker:0)")    \
	X(inline_fences, count, "fences run on an allocating thread")                             \
	X(stream_steals, count, "blocks taken from another stream's free list behind an event")   \
	X(releases, count, "cache releases (segments handed back to the runtime)")                \
	X(released_bytes, bytes, "bytes handed back to the runtime by cache releases")            \
	X(oom_retries, count, "allocations retried after releasing the cache")                    \
	X(ooms, count, "allocations that failed with out of memory")                              \
	X(limit_refusals, count, "segments not taken because of the memory limit")                \
	X(invalid_frees, count, "frees of unknown pointers or double frees")                      \
	X(passthrough_allocs, count, "allocations passed to the CUDA runtime unchanged")          \
	X(passthrough_frees, count, "frees passed to the CUDA runtime unchanged")                  \
	X(driver_allocs, count, "allocations through the driver API served by the pool")           \
	X(driver_frees, count, "frees through the driver API of pool blocks")                     \
	X(driver_passthrough_allocs, count, "driver API allocations passed to the driver unchanged")

/* Since version 4, after the version 3 fields. Unpooled memory: what the process holds that
 * gpupool counts against its limit but does not pool (the driver's virtual memory API, pools
 * the program made, managed and pitched allocations). Releasable: cached bytes in whole free
 * segments, which a release, a reclaim or the decay can hand back (as of the last look by
 * the release thread, at most a second old). */
#define GPUPOOL_GAUGES_4(X)                                                                   \
	X(unpooled_bytes, bytes, "bytes held outside the pool and counted: all kinds below")       \
	X(unpooled_vmm_bytes, bytes, "physical memory from cuMemCreate, until its last release and unmap")        \
	X(unpooled_mempool_bytes, bytes, "bytes reserved by memory pools the program made")         \
	X(unpooled_managed_bytes, bytes, "managed memory (cudaMallocManaged, cuMemAllocManaged)")   \
	X(unpooled_pitched_bytes, bytes, "pitched allocations passed to the CUDA runtime or driver") \
	X(releasable_bytes, bytes, "cached bytes in whole free segments, which can go back")

#define GPUPOOL_COUNTERS_4(X)                                                                 \
	X(unpooled_allocs, count, "allocations held outside the pool and counted")                 \
	X(unpooled_frees, count, "frees of allocations held outside the pool")                     \
	X(unpooled_refusals, count, "allocations outside the pool refused at the limit")           \
	X(reclaim_asks, count, "requests to other processes to give idle memory back")             \
	X(reclaim_answers, count, "answers from other processes that gave memory back")            \
	X(reclaim_received_bytes, bytes, "bytes other processes gave back for this process")       \
	X(reclaim_wait_ns, ns, "time spent waiting for other processes to give memory back")       \
	X(reclaims_served, count, "requests from other processes answered with memory")            \
	X(reclaims_refused, count, "requests from other processes not honoured")                   \
	X(reclaim_given_bytes, bytes, "bytes given back to the driver for other processes")        \
	X(framework_empties, count, "framework caches (PyTorch, CuPy) emptied for a request")       \
	X(decay_releases, count, "segments given back after sitting unused for decay_ms")          \
	X(decayed_bytes, bytes, "bytes given back after sitting unused for decay_ms")

/* Since version 5, after the version 4 slot (which is its prefix): allocations that wait for
 * memory another process or a later free will give, instead of failing at once. */
#define GPUPOOL_GAUGES_5(X)                                                                   \
	X(waiting_bytes, bytes, "bytes an allocation of this process waits for now")

#define GPUPOOL_COUNTERS_5(X)                                                                 \
	X(waits, count, "allocations that waited for memory")                                     \
	X(wait_ns, ns, "time spent waiting for memory")                                           \
	X(waits_served, count, "waits that ended with the memory")                                \
	X(waits_timed_out, count, "waits that ended in out of memory")

#define GPUPOOL_GAUGE_FIELD_(name, unit, help) uint64_t name, name##_peak;
#define GPUPOOL_COUNTER_FIELD_(name, unit, help) uint64_t name;

/* One device's counters. The pool keeps these up to date in place. */
struct gpupool_device_stats {
	uint64_t seq;         /* odd while the writer is changing this slot */
	int32_t device;       /* CUDA device ordinal */
	uint32_t active;      /* 1 once a pool exists for this device */
	uint64_t limit_bytes; /* configured limit on reserved bytes; 0 = none */
	/* The device's UUID, 16 raw bytes as cudaDeviceProp.uuid and cuDeviceGetUuid give them
	 * (nvidia-smi and dcgm-exporter print them as GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx);
	 * all zero while not known. Since version 3, before the figures (which follow it 16
	 * bytes later than in version 2). */
	char uuid[GPUPOOL_UUID_LEN];
	GPUPOOL_GAUGES_3(GPUPOOL_GAUGE_FIELD_)
	GPUPOOL_COUNTERS_3(GPUPOOL_COUNTER_FIELD_)
	/* version 4: the version 3 slot is this slot's prefix */
	GPUPOOL_GAUGES_4(GPUPOOL_GAUGE_FIELD_)
	GPUPOOL_COUNTERS_4(GPUPOOL_COUNTER_FIELD_)
	/* The device as the driver reported it (cudaMemGetInfo) at the release thread's last
	 * look, about once a second: a per-GPU view for readers, which make no CUDA context of
	 * their own. 0: not known. */
	uint64_t device_total_bytes;
	uint64_t device_free_bytes;
	uint64_t device_seen_ns; /* CLOCK_REALTIME of that look */
	/* The chunk size of the pool's virtual-memory segments (bytes: the driver's allocation
	 * granularity); 0: whole segments only (or a writer before this field, a reserved word
	 * then). */
	uint64_t vmm_granularity;
	uint64_t reserved_[3]; /* zero: a future field, "not known" (see Layout rules) */
	/* version 5: the version 4 slot is this slot's prefix */
	GPUPOOL_GAUGES_5(GPUPOOL_GAUGE_FIELD_)
	GPUPOOL_COUNTERS_5(GPUPOOL_COUNTER_FIELD_)
	uint64_t wait_started_ns; /* CLOCK_REALTIME when the oldest wait in progress began; 0: none */
	uint64_t floor_bytes;     /* memory this process keeps cached whatever others ask; 0: none */
	/* The GPU's name as cudaGetDeviceProperties and cuDeviceGetName give it ("NVIDIA H100
	 * 80GB HBM3"), NUL-terminated, written when the pool is made; "" while not known. */
	char device_name[GPUPOOL_DEVICE_NAME_LEN];
};

struct gpupool_page {
	uint64_t magic;           /* GPUPOOL_PAGE_MAGIC */
	uint32_t version;         /* GPUPOOL_PAGE_VERSION */
	uint32_t size;            /* sizeof(struct gpupool_page) */
	int32_t pid;              /* writer's process id */
	uint32_t ndevices;        /* slots in use: dev[0..ndevices) */
	uint64_t start_time_ns;   /* CLOCK_REALTIME when the page was created */
	char comm[GPUPOOL_COMM_LEN]; /* writer's command name, NUL-terminated */
	/* Release request: a reader increments release_request; the library releases its
	 * cached memory on its next allocation call and then stores the value it acted on
	 * in release_done. */
	uint64_t release_request;
	uint64_t release_done;
	/* The writer's gpupool version ("0.1.0"), NUL-terminated. It took two of the reserved
	 * words, which writers before 0.1.0 left zero: "" there; the layout is unchanged. */
	char lib_version[GPUPOOL_VERSION_LEN];
	uint64_t reserved_[4];
	struct gpupool_device_stats dev[GPUPOOL_MAX_DEVICES];
};

#endif
