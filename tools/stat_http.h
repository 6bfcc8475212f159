/* gpupool-stat --listen: serves /metrics over HTTP with libmicrohttpd (loaded at run time), as
 * node_exporter and dcgm-exporter do. Owns the address syntax, the paths, the content types,
 * the bounds on connections and the wait for SIGINT/SIGTERM; knows nothing of pages: each
 * scrape calls the caller's render function (on one server thread, so scrapes never overlap). */
#ifndef GP_STAT_HTTP_H
#define GP_STAT_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "format.h"

/* Writes one scrape into o: OpenMetrics when openmetrics, else text format 0.0.4. */
typedef void (*gp_stat_http_render_fn)(struct gp_format_out *o, bool openmetrics, void *arg);

/* "[ADDR:]PORT": PORT (0-65535; 0 picks a free one) on 127.0.0.1, or on ADDR, an IPv4
 * address, a host name, or an IPv6 address in brackets ("[::1]:9400"). Returns 0, or
 * -EINVAL with a message in why. Needs no libmicrohttpd. */
int gp_stat_http_parse(const char *spec, struct sockaddr_storage *ss, char *why, size_t wl);

/* Listens on spec, prints "gpupool-stat: serving http://HOST:PORT/metrics" on stderr and
 * serves until SIGINT or SIGTERM (blocked in the caller from then on, and waited for).
 * Returns 0 after a clean stop, 1 when it cannot listen, 2 on a bad spec or when
 * libmicrohttpd cannot be loaded (one line on stderr says why). */
int gp_stat_http_serve(const char *spec, gp_stat_http_render_fn render, void *arg);

#endif
