// gpupool_malloc's out-of-memory in a process with a C++ runtime, as under PyTorch: a
// std::runtime_error with gpupool's one-line message (PyTorch turns it into a RuntimeError),
// thrown through the library's C frames with nothing left locked: the same thread and
// another one go on allocating, and the statistics add up. Run with limit:64M.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <thread>

#include "gpupool.h"

#define CHECK(c)                                                                      \
	do {                                                                          \
		if (!(c)) {                                                           \
			std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
			std::exit(1);                                                 \
		}                                                                     \
	} while (0)

static const size_t MB = size_t(1) << 20;

template <typename F> static F api(const char *name)
{
	void *s = dlsym(RTLD_DEFAULT, name);
	CHECK(s != nullptr);
	F f;
	std::memcpy(&f, &s, sizeof f);
	return f;
}

static std::string oom(void *(*alloc)(ssize_t, int, void *), size_t size)
{
	try {
		void *p = alloc(ssize_t(size), 0, nullptr);
		std::fprintf(stderr, "no exception, got %p\n", p);
	} catch (const std::runtime_error &e) {
		return e.what();
	}
	return "";
}

int main()
{
	auto alloc = api<void *(*)(ssize_t, int, void *)>("gpupool_malloc");
	auto release = api<void (*)(void *, ssize_t, int, void *)>("gpupool_free");
	auto stats = api<int (*)(int, gpupool_device_stats *)>("gpupool_stats");
	int n = 0; // and the runtime in the process, as PyTorch has it
	CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n == 1);

	void *keep = alloc(ssize_t(40 * MB), 0, nullptr);
	CHECK(keep != nullptr);
	std::string msg = oom(alloc, 40 * MB);
	std::printf("what(): %s\n", msg.c_str());
	CHECK(msg.rfind("gpupool: device 0: out of memory allocating 40.0 MiB", 0) == 0);
	CHECK(msg.find("limit 64.0 MiB") != std::string::npos);

	// nothing left locked: this thread and another allocate, free, and fail again
	void *small = alloc(ssize_t(MB), 0, nullptr);
	CHECK(small != nullptr);
	std::string other;
	std::thread th([&] {
		void *q = alloc(ssize_t(MB), 0, nullptr);
		CHECK(q != nullptr);
		release(q, ssize_t(MB), 0, nullptr);
		other = oom(alloc, 100 * MB);
	});
	th.join();
	CHECK(other.find("out of memory allocating 100.0 MiB") != std::string::npos);
	release(small, ssize_t(MB), 0, nullptr);
	release(keep, ssize_t(40 * MB), 0, nullptr);

	gpupool_device_stats st;
	CHECK(stats(0, &st) == 0);
	CHECK(st.ooms == 2 && st.allocs == 3 && st.frees == 3 && st.live_blocks == 0 && st.allocated_bytes == 0);
	void *again = alloc(ssize_t(60 * MB), 0, nullptr); // the limit's worth, after the frees
	CHECK(again != nullptr);
	release(again, ssize_t(60 * MB), 0, nullptr);
	std::printf("ok\n");
	return 0;
}
