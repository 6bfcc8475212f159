/* The HTTP exporter of gpupool-stat (see stat_http.h): libmicrohttpd, loaded at run time
 * (mhd_dl.c), with one internal polling thread; /metrics rendered fresh per scrape into
 * memory (open_memstream), / a pointer to it, anything else 404, one request per connection.
 * Connections are bounded in time and number (stat_conns.c) so that slow clients cannot keep
 * scrapes out (docs/security.md, "The HTTP server under a slow-client attack"). Depends on
 * format.h, mhd_dl.h and stat_conns.h only. */
#include "stat_http.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mhd_dl.h"
#include "stat_conns.h"

int gp_stat_http_parse(const char *spec, struct sockaddr_storage *ss, char *why, size_t wl)
{
	char host[256] = "127.0.0.1";
	const char *port = spec, *colon = strrchr(spec, ':');
	if (colon) {
		const char *h = spec;
		size_t hl = (size_t)(colon - spec);
		if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') { /* [IPv6]:PORT */
			h++;
			hl -= 2;
		} else if (memchr(h, ':', hl)) { /* IPv6 without brackets: where is the port? */
			hl = 0;
		}
		if (hl == 0 || hl >= sizeof host) {
			snprintf(why, wl, "--listen %s: expected [ADDR:]PORT (ADDR 0.0.0.0 for every interface, "
				 "[ADDR] for IPv6)", spec);
			return -EINVAL;
		}
		memcpy(host, h, hl);
		host[hl] = '\0';
		port = colon + 1;
	}
	char *end;
	errno = 0;
	long p = strtol(port, &end, 10);
	if (errno || port[0] < '0' || port[0] > '9' || *end || p > 65535) {
		snprintf(why, wl, "--listen: %s: expected a port number (0-65535)", port);
		return -EINVAL;
	}
	struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM}, *res;
	int rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		snprintf(why, wl, "--listen: %s: %s", host, gai_strerror(rc));
		return -EINVAL;
	}
	memset(ss, 0, sizeof *ss);
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

#define CT_TEXT "text/plain; version=0.0.4; charset=utf-8"
#define CT_OPENMETRICS "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define INDEX_PAGE                                                                              \
	"<html><head><title>gpupool-stat</title></head><body><h1>gpupool-stat</h1>"              \
	"<p>GPU memory pool statistics of the processes running with libgpupool.so: "             \
	"<a href=\"/metrics\">/metrics</a></p></body></html>\n"

/* HTTP's names and codes (microhttpd.h has them as macros) */
#define HTTP_OK 200u
#define HTTP_NOT_FOUND 404u
#define HTTP_METHOD_NOT_ALLOWED 405u
#define HTTP_INTERNAL_SERVER_ERROR 500u

static const struct gp_mhd *M;

/* ---- connections: bounded in time and number (stat_conns.h) ----------------------- */

/* Written by libmicrohttpd's thread (on_connection, on_request) and the reaper (the caller's
 * thread, gp_stat_http_serve's loop), under lock. An entry exists from the connection's start
 * to its close, and libmicrohttpd closes the socket after telling us: a socket shut down
 * under the lock is still that connection's. A client that sends its request at once, as
 * every HTTP client does, has it read on the next turn of libmicrohttpd's loop, which accepts
 * one connection per turn in poll mode: slower connections are evicted before it. */
static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gp_conns conns;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* libmicrohttpd sees the end on its next turn, and closes the connection */
static void doom(int fd) { shutdown(fd, SHUT_RDWR); }

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context, int toe)
{
	(void)cls;
	(void)socket_context;
	pthread_mutex_lock(&conns_lock);
	if (toe == GP_MHD_CONNECTION_NOTIFY_STARTED) {
		const void *fdp = M->get_connection_info(c, GP_MHD_CONNECTION_INFO_CONNECTION_FD);
		const void *ap = M->get_connection_info(c, GP_MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		const struct sockaddr *sa = NULL;
		int fd = -1;
		if (fdp)
			memcpy(&fd, fdp, sizeof fd);
		if (ap)
			memcpy(&sa, ap, sizeof sa);
		struct gp_conn *v = fd >= 0 ? gp_conns_add(&conns, c, fd, sa, now_ns()) : NULL;
		if (v)
			doom(v->fd);
	} else if (toe == GP_MHD_CONNECTION_NOTIFY_CLOSED) {
		gp_conns_remove(&conns, c);
	}
	pthread_mutex_unlock(&conns_lock);
}

static void mark_requested(struct MHD_Connection *c)
{
	pthread_mutex_lock(&conns_lock);
	gp_conns_requested(&conns, c);
	pthread_mutex_unlock(&conns_lock);
}

/* Shuts down the connections past their lifetime; returns the milliseconds until the next
 * one will be (at most 1001). */
static long reap(void)
{
	pthread_mutex_lock(&conns_lock);
	uint64_t next = gp_conns_expire(&conns, now_ns(), doom);
	pthread_mutex_unlock(&conns_lock);
	return (long)(next / 1000000u) + 1;
}

/* libmicrohttpd's messages (a refused connection is one): the first few only, so that a
 * flood of connections cannot flood the log. */
#define MHD_LOG_LINES 10
static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	static atomic_uint lines;
	(void)cls;
	unsigned n = atomic_fetch_add(&lines, 1);
	if (n >= MHD_LOG_LINES)
		return;
	char buf[512];
	vsnprintf(buf, sizeof buf, fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	fprintf(stderr, "gpupool-stat: libmicrohttpd: %s\n", buf);
	if (n + 1 == MHD_LOG_LINES)
		fprintf(stderr, "gpupool-stat: further messages of libmicrohttpd are not shown\n");
}

/* ---- requests -------------------------------------------------------------------- */

struct server {
	gp_stat_http_render_fn render;
	void *arg;
	struct gp_format_out out; /* one server thread: one scrape at a time */
};

static int reply(struct MHD_Connection *c, unsigned status, const char *type, struct MHD_Response *r)
{
	if (!r)
		return GP_MHD_NO;
	M->add_response_header(r, "Content-Type", type);
	M->add_response_header(r, "Connection", "close"); /* one request per connection */
	int ret = M->queue_response(c, status, r);
	M->destroy_response(r);
	return ret;
}

static int reply_static(struct MHD_Connection *c, unsigned status, const char *type, const char *body)
{
	return reply(c, status, type, M->create_response_from_buffer(strlen(body), (void *)body, GP_MHD_RESPMEM_PERSISTENT));
}

/* The Accept header of a scraper that takes OpenMetrics (Prometheus's does) names it. */
static bool wants_openmetrics(struct MHD_Connection *c)
{
	const char *accept = M->lookup_connection_value(c, GP_MHD_HEADER_KIND, "Accept");
	return accept && strstr(accept, "application/openmetrics-text") != NULL;
}

static int scrape(struct server *s, struct MHD_Connection *c)
{
	bool om = wants_openmetrics(c);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return reply_static(c, HTTP_INTERNAL_SERVER_ERROR, "text/plain", "out of memory\n");
	gp_format_to_file(&s->out, f);
	s->render(&s->out, om, s->arg);
	int rc = gp_format_flush(&s->out);
	if (fclose(f) != 0 || rc != 0) {
		free(buf);
		return reply_static(c, HTTP_INTERNAL_SERVER_ERROR, "text/plain", "out of memory\n");
	}
	struct MHD_Response *r = M->create_response_from_buffer(len, buf, GP_MHD_RESPMEM_MUST_FREE);
	if (!r)
		free(buf);
	return reply(c, HTTP_OK, om ? CT_OPENMETRICS : CT_TEXT, r);
}

static int on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
		      const char *version, const char *upload, size_t *upload_size, void **state)
{
	(void)version;
	(void)upload;
	(void)upload_size;
	(void)state;
	mark_requested(c);
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		struct MHD_Response *r = M->create_response_from_buffer(19, (void *)"method not allowed\n",
									GP_MHD_RESPMEM_PERSISTENT);
		if (r)
			M->add_response_header(r, "Allow", "GET, HEAD");
		return reply(c, HTTP_METHOD_NOT_ALLOWED, "text/plain", r);
	}
	if (strcmp(url, "/metrics") == 0)
		return scrape(cls, c);
	if (strcmp(url, "/") == 0)
		return reply_static(c, HTTP_OK, "text/html; charset=utf-8", INDEX_PAGE);
	return reply_static(c, HTTP_NOT_FOUND, "text/plain", "404 page not found\n");
}

int gp_stat_http_serve(const char *spec, gp_stat_http_render_fn render, void *arg)
{
	struct sockaddr_storage ss;
	char why[512];
	if (gp_stat_http_parse(spec, &ss, why, sizeof why) != 0) {
		fprintf(stderr, "gpupool-stat: %s\n", why);
		return 2;
	}
	if (!(M = gp_mhd_load(why, sizeof why))) {
		fprintf(stderr, "gpupool-stat: --listen needs libmicrohttpd, which cannot be loaded (%s): install "
				"libmicrohttpd12 (Debian, Ubuntu) or libmicrohttpd (Fedora), or name the file in "
				"$" GP_MHD_ENV "\n", why);
		return 2;
	}
	/* The server thread inherits the mask: the signals come to sigtimedwait below. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	static struct server srv;
	srv.render = render;
	srv.arg = arg;
	unsigned flags = GP_MHD_USE_INTERNAL_POLLING_THREAD | GP_MHD_USE_POLL | GP_MHD_USE_ERROR_LOG |
			 (ss.ss_family == AF_INET6 ? GP_MHD_USE_IPv6 : 0);
	uint16_t port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
						 : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	/* libmicrohttpd's own limits stay above stat_conns.h's (which evict instead of refusing):
	 * they bind only while evicted connections wait for their close, one turn */
	struct MHD_Daemon *d = M->start_daemon(
		flags, port, NULL, NULL, on_request, &srv, GP_MHD_OPTION_EXTERNAL_LOGGER, mhd_log, (void *)NULL,
		GP_MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, GP_MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned)GP_CONNS_LIFETIME_S, GP_MHD_OPTION_CONNECTION_LIMIT, (unsigned)GP_CONNS_HARD,
		GP_MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)(2 * GP_CONNS_PER_GROUP),
		GP_MHD_OPTION_NOTIFY_CONNECTION, on_connection, (void *)NULL, GP_MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "gpupool-stat: cannot listen on %s\n", spec);
		return 1;
	}
	/* the port actually bound (PORT 0 picks one) */
	const void *lfd = M->get_daemon_info(d, GP_MHD_DAEMON_INFO_LISTEN_FD);
	int listen_fd = -1;
	if (lfd)
		memcpy(&listen_fd, lfd, sizeof listen_fd);
	struct sockaddr_storage bound = {0};
	socklen_t blen = sizeof bound;
	char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
	if (listen_fd >= 0 && getsockname(listen_fd, (struct sockaddr *)&bound, &blen) == 0)
		getnameinfo((struct sockaddr *)&bound, blen, host, sizeof host, serv, sizeof serv,
			    NI_NUMERICHOST | NI_NUMERICSERV);
	fprintf(stderr, "gpupool-stat: serving http://%s%s%s:%s/metrics\n", bound.ss_family == AF_INET6 ? "[" : "",
		host, bound.ss_family == AF_INET6 ? "]" : "", serv);
	int sig;
	for (;;) {
		long ms = reap();
		struct timespec wait = {ms / 1000, ms % 1000 * 1000000L};
		if ((sig = sigtimedwait(&stop, NULL, &wait)) > 0)
			break;
	}
	M->stop_daemon(d);
	fprintf(stderr, "gpupool-stat: stopped (%s)\n", strsignal(sig));
	return 0;
}
