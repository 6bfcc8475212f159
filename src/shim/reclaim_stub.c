/* Until the reclaim step is built: nothing is asked of other processes, so an allocation
 * that found the GPU full fails at once. Depends on nothing. */
#include "reclaim.h"

int gp_reclaim_before_oom(int device, size_t bytes)
{
	(void)device, (void)bytes;
	return 0;
}
