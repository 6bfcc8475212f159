/* The runtime's last error (last_error.h): gpupool's failures made to look like the
 * runtime's own, and a program's pending error put back after an internal failure that
 * gpupool recovered from. Depends on the runtime table and capture.h only. */
#include "last_error.h"

#include "capture.h"
#include "log.h"

void gp_last_error_set(const struct gp_runtime *rt, cudaError_t err)
{
	if (!rt)
		return;
	void *p = NULL;
	enum cudaStreamCaptureMode mode = gp_runtime_relax_begin(rt);
	if (err == cudaErrorMemoryAllocation) {
		/* a request no device can satisfy fails at once and leaves the error behind */
		(void)rt->Malloc(&p, (size_t)1 << 62);
	} else if (err == cudaErrorInvalidDevice) {
		(void)rt->SetDevice(-1);
	} else if (err == cudaErrorInvalidValue) {
		(void)rt->Malloc(NULL, 0);
	} else {
		/* no call of the runtime's leaves this one: the caller's answer carries it alone */
		gp_log(GP_LOG_DEBUG, "CUDA error %d cannot be left as the runtime's last error", (int)err);
	}
	gp_runtime_relax_end(rt, mode);
}

/* A program's own pending error is put back by repeating a failing call that produces it;
 * errors gpupool cannot reproduce are lost (logged at debug level). */
void gp_last_error_restore(const struct gp_runtime *rt, cudaError_t before)
{
	(void)rt->GetLastError();
	if (before == cudaSuccess)
		return;
	if (before == cudaErrorMemoryAllocation || before == cudaErrorInvalidValue)
		gp_last_error_set(rt, before);
	else if (before == cudaErrorInvalidDevice)
		(void)rt->SetDevice(-1);
	else
		gp_log(GP_LOG_DEBUG, "a pending CUDA error (%d) was replaced by a recovered internal failure",
		       (int)before);
}
