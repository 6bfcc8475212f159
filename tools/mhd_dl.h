/* libmicrohttpd, loaded at run time (dlopen of libmicrohttpd.so.12) by gpupool-stat --listen,
 * so that gpupool-stat has no load-time dependency on it nor on the TLS stack it links (the
 * wheel's tools stay manylinux), and builds without its -dev package. Declares the few types,
 * constants and entry points --listen uses, as microhttpd.h of 0.9.x and 1.0.x (soname 12, one
 * ABI) has them; tests/tools/mhd_abi.c checks every one against the real header where it is
 * installed. Depends on libdl. */
#ifndef GP_MHD_DL_H
#define GP_MHD_DL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The library's soname, and the variable that names another file to load instead. */
#define GP_MHD_SONAME "libmicrohttpd.so.12"
#define GP_MHD_ENV "GPUPOOL_MICROHTTPD"

/* Opaque, as in microhttpd.h (the same tags: the two declarations agree). */
struct MHD_Daemon;
struct MHD_Connection;
struct MHD_Response;

/* enum MHD_Result: int-sized. */
#define GP_MHD_NO 0
#define GP_MHD_YES 1

/* enum MHD_FLAG */
#define GP_MHD_USE_ERROR_LOG 1u
#define GP_MHD_USE_INTERNAL_POLLING_THREAD 8u
#define GP_MHD_USE_IPv6 16u
#define GP_MHD_USE_POLL 64u

/* enum MHD_OPTION; each followed by its value(s) in MHD_start_daemon's arguments */
#define GP_MHD_OPTION_END 0                 /* - */
#define GP_MHD_OPTION_CONNECTION_MEMORY_LIMIT 1 /* size_t */
#define GP_MHD_OPTION_CONNECTION_LIMIT 2    /* unsigned int */
#define GP_MHD_OPTION_CONNECTION_TIMEOUT 3  /* unsigned int, seconds */
#define GP_MHD_OPTION_PER_IP_CONNECTION_LIMIT 5 /* unsigned int */
#define GP_MHD_OPTION_SOCK_ADDR 6           /* struct sockaddr * */
#define GP_MHD_OPTION_EXTERNAL_LOGGER 13    /* gp_mhd_log_fn, void * */
#define GP_MHD_OPTION_NOTIFY_CONNECTION 27  /* gp_mhd_notify_fn, void * */
#define GP_MHD_OPTION_LISTEN_BACKLOG_SIZE 28 /* unsigned int */

/* enum MHD_ValueKind */
#define GP_MHD_HEADER_KIND 1
/* enum MHD_ResponseMemoryMode */
#define GP_MHD_RESPMEM_PERSISTENT 0
#define GP_MHD_RESPMEM_MUST_FREE 1
/* enum MHD_ConnectionNotificationCode */
#define GP_MHD_CONNECTION_NOTIFY_STARTED 0
#define GP_MHD_CONNECTION_NOTIFY_CLOSED 1
/* enum MHD_ConnectionInfoType; the answer points at a member of union MHD_ConnectionInfo
 * (all at offset 0): a struct sockaddr * for the client's address, an int for the socket */
#define GP_MHD_CONNECTION_INFO_CLIENT_ADDRESS 2
#define GP_MHD_CONNECTION_INFO_CONNECTION_FD 6
/* enum MHD_DaemonInfoType; the answer points at an int (MHD_socket on POSIX) */
#define GP_MHD_DAEMON_INFO_LISTEN_FD 2

/* MHD_AccessHandlerCallback, MHD_NotifyConnectionCallback */
typedef int (*gp_mhd_access_fn)(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				const char *version, const char *upload_data, size_t *upload_data_size,
				void **con_cls);
typedef void (*gp_mhd_notify_fn)(void *cls, struct MHD_Connection *c, void **socket_context, int toe);
/* MHD_LogCallback */
typedef void (*gp_mhd_log_fn)(void *cls, const char *fmt, va_list ap);

struct gp_mhd {
	struct MHD_Daemon *(*start_daemon)(unsigned int flags, uint16_t port, void *apc, void *apc_cls,
					   gp_mhd_access_fn dh, void *dh_cls, ...);
	void (*stop_daemon)(struct MHD_Daemon *d);
	const void *(*get_daemon_info)(struct MHD_Daemon *d, int info_type, ...);
	const void *(*get_connection_info)(struct MHD_Connection *c, int info_type, ...);
	const char *(*lookup_connection_value)(struct MHD_Connection *c, int kind, const char *key);
	struct MHD_Response *(*create_response_from_buffer)(size_t size, void *buffer, int mode);
	int (*add_response_header)(struct MHD_Response *r, const char *header, const char *content);
	int (*queue_response)(struct MHD_Connection *c, unsigned int status_code, struct MHD_Response *r);
	void (*destroy_response)(struct MHD_Response *r);
};

/* The table, loaded on the first call from $GPUPOOL_MICROHTTPD when set (a file name or
 * path), else GP_MHD_SONAME; NULL when it cannot be loaded or lacks an entry point, with a
 * one-line reason in why[] ("libmicrohttpd.so.12: cannot open shared object file: ..."). Not
 * thread-safe: call it before starting a daemon. Never unloaded. */
const struct gp_mhd *gp_mhd_load(char *why, size_t wl);

#endif
