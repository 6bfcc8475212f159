/* The HTTP exporter of gpupool-stat (see stat_http.h): libmicrohttpd with one internal
 * polling thread; /metrics rendered fresh per scrape into memory (open_memstream), / a
 * pointer to it, anything else 404. Depends on format.h and libmicrohttpd only; built
 * without it, --listen says so. */
#include "stat_http.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GP_HAVE_MICROHTTPD
#include <microhttpd.h>
#if MHD_VERSION < 0x00097002
typedef int MHD_Result_;
#else
typedef enum MHD_Result MHD_Result_;
#endif
#endif

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

#ifdef GP_HAVE_MICROHTTPD

#define CT_TEXT "text/plain; version=0.0.4; charset=utf-8"
#define CT_OPENMETRICS "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define INDEX_PAGE                                                                              \
	"<html><head><title>gpupool-stat</title></head><body><h1>gpupool-stat</h1>"              \
	"<p>GPU memory pool statistics of the processes running with libgpupool.so: "             \
	"<a href=\"/metrics\">/metrics</a></p></body></html>\n"

struct server {
	gp_stat_http_render_fn render;
	void *arg;
	struct gp_format_out out; /* one server thread: one scrape at a time */
};

static MHD_Result_ reply(struct MHD_Connection *c, unsigned status, const char *type, struct MHD_Response *r)
{
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_Result_ ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static MHD_Result_ reply_static(struct MHD_Connection *c, unsigned status, const char *type, const char *body)
{
	return reply(c, status, type,
		     MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT));
}

/* The Accept header of a scraper that takes OpenMetrics (Prometheus's does) names it. */
static bool wants_openmetrics(struct MHD_Connection *c)
{
	const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	return accept && strstr(accept, "application/openmetrics-text") != NULL;
}

static MHD_Result_ scrape(struct server *s, struct MHD_Connection *c)
{
	bool om = wants_openmetrics(c);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return reply_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "out of memory\n");
	gp_format_to_file(&s->out, f);
	s->render(&s->out, om, s->arg);
	int rc = gp_format_flush(&s->out);
	if (fclose(f) != 0 || rc != 0) {
		free(buf);
		return reply_static(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "out of memory\n");
	}
	return reply(c, MHD_HTTP_OK, om ? CT_OPENMETRICS : CT_TEXT,
		     MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE));
}

static MHD_Result_ on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_size, void **state)
{
	(void)version;
	(void)upload;
	(void)upload_size;
	(void)state;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
		struct MHD_Response *r = MHD_create_response_from_buffer(19, (void *)"method not allowed\n",
									 MHD_RESPMEM_PERSISTENT);
		if (r)
			MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", r);
	}
	if (strcmp(url, "/metrics") == 0)
		return scrape(cls, c);
	if (strcmp(url, "/") == 0)
		return reply_static(c, MHD_HTTP_OK, "text/html; charset=utf-8", INDEX_PAGE);
	return reply_static(c, MHD_HTTP_NOT_FOUND, "text/plain", "404 page not found\n");
}

int gp_stat_http_serve(const char *spec, gp_stat_http_render_fn render, void *arg)
{
	struct sockaddr_storage ss;
	char why[512];
	if (gp_stat_http_parse(spec, &ss, why, sizeof why) != 0) {
		fprintf(stderr, "gpupool-stat: %s\n", why);
		return 2;
	}
	/* The server thread inherits the mask: the signals come to sigwait below. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	static struct server srv;
	srv.render = render;
	srv.arg = arg;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
	uint16_t port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
						 : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	struct MHD_Daemon *d = MHD_start_daemon(flags, port, NULL, NULL, on_request, &srv,
						MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
						MHD_OPTION_CONNECTION_TIMEOUT, 30u,
						MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "gpupool-stat: cannot listen on %s\n", spec);
		return 1;
	}
	/* the port actually bound (PORT 0 picks one) */
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
	struct sockaddr_storage bound;
	socklen_t blen = sizeof bound;
	char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
	if (info && getsockname(info->listen_fd, (struct sockaddr *)&bound, &blen) == 0)
		getnameinfo((struct sockaddr *)&bound, blen, host, sizeof host, serv, sizeof serv,
			    NI_NUMERICHOST | NI_NUMERICSERV);
	fprintf(stderr, "gpupool-stat: serving http://%s%s%s:%s/metrics\n", bound.ss_family == AF_INET6 ? "[" : "",
		host, bound.ss_family == AF_INET6 ? "]" : "", serv);
	int sig = 0;
	while (sigwait(&stop, &sig) != 0)
		;
	MHD_stop_daemon(d);
	fprintf(stderr, "gpupool-stat: stopped (%s)\n", strsignal(sig));
	return 0;
}

#else

int gp_stat_http_serve(const char *spec, gp_stat_http_render_fn render, void *arg)
{
	(void)spec;
	(void)render;
	(void)arg;
	fprintf(stderr, "gpupool-stat: --listen: this gpupool-stat was built without libmicrohttpd "
			"(install libmicrohttpd-dev and rebuild)\n");
	return 2;
}

#endif
