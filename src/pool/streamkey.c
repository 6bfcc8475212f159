/* The per-thread default stream keys (streamkey.h). Owns the serial; depends on nothing
 * but streamkey.h. */
#include "streamkey.h"

#include <stdatomic.h>

static _Thread_local gp_stream my_ptds;
static atomic_ulong ptds_serial;

gp_stream gp_streamkey_ptds(void)
{
	if (!my_ptds)
		my_ptds = gp_streamkey_make((gp_stream)(atomic_fetch_add(&ptds_serial, 1) + 1), GP_STREAMKEY_PTDS);
	return my_ptds;
}
