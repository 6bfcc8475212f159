/* tools/mhd_dl.h declares what gpupool-stat --listen uses of libmicrohttpd without its header;
 * here, where microhttpd.h is installed, every constant is checked against it at compile
 * time, and the run loads the library the way --listen does (exit 77 where it cannot be
 * loaded). Test code only. */
#include <stdio.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "mhd_dl.h"

#define SAME(ours, theirs) _Static_assert((ours) == (theirs), #ours " is not " #theirs)
SAME(GP_MHD_NO, MHD_NO);
SAME(GP_MHD_YES, MHD_YES);
SAME(GP_MHD_USE_ERROR_LOG, MHD_USE_ERROR_LOG);
SAME(GP_MHD_USE_INTERNAL_POLLING_THREAD, MHD_USE_INTERNAL_POLLING_THREAD);
SAME(GP_MHD_USE_IPv6, MHD_USE_IPv6);
SAME(GP_MHD_USE_POLL, MHD_USE_POLL);
SAME(GP_MHD_OPTION_END, MHD_OPTION_END);
SAME(GP_MHD_OPTION_CONNECTION_MEMORY_LIMIT, MHD_OPTION_CONNECTION_MEMORY_LIMIT);
SAME(GP_MHD_OPTION_CONNECTION_LIMIT, MHD_OPTION_CONNECTION_LIMIT);
SAME(GP_MHD_OPTION_CONNECTION_TIMEOUT, MHD_OPTION_CONNECTION_TIMEOUT);
SAME(GP_MHD_OPTION_PER_IP_CONNECTION_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT);
SAME(GP_MHD_OPTION_SOCK_ADDR, MHD_OPTION_SOCK_ADDR);
SAME(GP_MHD_OPTION_EXTERNAL_LOGGER, MHD_OPTION_EXTERNAL_LOGGER);
SAME(GP_MHD_OPTION_NOTIFY_CONNECTION, MHD_OPTION_NOTIFY_CONNECTION);
SAME(GP_MHD_OPTION_LISTEN_BACKLOG_SIZE, MHD_OPTION_LISTEN_BACKLOG_SIZE);
SAME(GP_MHD_HEADER_KIND, MHD_HEADER_KIND);
SAME(GP_MHD_RESPMEM_PERSISTENT, MHD_RESPMEM_PERSISTENT);
SAME(GP_MHD_RESPMEM_MUST_FREE, MHD_RESPMEM_MUST_FREE);
SAME(GP_MHD_CONNECTION_NOTIFY_STARTED, MHD_CONNECTION_NOTIFY_STARTED);
SAME(GP_MHD_CONNECTION_NOTIFY_CLOSED, MHD_CONNECTION_NOTIFY_CLOSED);
SAME(GP_MHD_CONNECTION_INFO_CLIENT_ADDRESS, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
SAME(GP_MHD_CONNECTION_INFO_CONNECTION_FD, MHD_CONNECTION_INFO_CONNECTION_FD);
SAME(GP_MHD_DAEMON_INFO_LISTEN_FD, MHD_DAEMON_INFO_LISTEN_FD);
/* the enums passed as int, the members read through the answers of the info calls */
SAME(sizeof(enum MHD_ValueKind), sizeof(int));
SAME(sizeof(enum MHD_ResponseMemoryMode), sizeof(int));
SAME(sizeof(enum MHD_ConnectionInfoType), sizeof(int));
SAME(sizeof(enum MHD_DaemonInfoType), sizeof(int));
SAME(sizeof(enum MHD_ConnectionNotificationCode), sizeof(int));
SAME(sizeof(MHD_socket), sizeof(int));
SAME(sizeof(((union MHD_ConnectionInfo *)0)->client_addr), sizeof(struct sockaddr *));
SAME(sizeof(((union MHD_ConnectionInfo *)0)->connect_fd), sizeof(int));
SAME(sizeof(((union MHD_DaemonInfo *)0)->listen_fd), sizeof(int));

int main(void)
{
	char why[512];
	const struct gp_mhd *m = gp_mhd_load(why, sizeof why);
	if (!m) {
		printf("mhd_abi: libmicrohttpd cannot be loaded (%s): skipped\n", why);
		return 77;
	}
	printf("mhd_abi: %s loaded, its constants agree with microhttpd.h %x\n", GP_MHD_SONAME, (unsigned)MHD_VERSION);
	return 0;
}
