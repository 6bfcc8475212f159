/* The connections of gpupool-stat --listen, bounded in time and number (docs/security.md, "The
 * HTTP server under a slow-client attack"): a table of open connections with their client's
 * address group, accept time and whether a whole request came, and the policy that picks the
 * one to shut down. Pure bookkeeping: no sockets, no clock, no locks (stat_http.c holds a
 * mutex around every call and does the shutdown). Depends on libc only. */
#ifndef GP_STAT_CONNS_H
#define GP_STAT_CONNS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* A connection lives at most GP_CONNS_LIFETIME_S from its accept, whatever it sends. The
 * clients of one address group (gp_conns_group) hold at most GP_CONNS_PER_GROUP connections,
 * all clients GP_CONNS_MAX: the connection one over either evicts the group's (or everyone's)
 * oldest connection that has not sent a whole request, else its oldest. GP_CONNS_HARD
 * entries: the limit stat_http.c gives libmicrohttpd, above GP_CONNS_MAX so that evicted
 * connections waiting to be closed never take a newcomer's place. */
#define GP_CONNS_LIFETIME_S 10
#define GP_CONNS_MAX 64
#define GP_CONNS_PER_GROUP 8
#define GP_CONNS_HARD (2 * GP_CONNS_MAX)
#define GP_CONNS_GROUP_LEN 9

struct gp_conn {
	const void *key;  /* the caller's handle (libmicrohttpd's connection); NULL: free */
	int fd;
	uint64_t born_ns; /* accept time, on the caller's clock */
	unsigned char group[GP_CONNS_GROUP_LEN];
	bool requested;   /* a whole request came */
	bool doomed;      /* handed back to be shut down; its close is still to come */
};

struct gp_conns {
	struct gp_conn c[GP_CONNS_HARD];
	unsigned long evicted, expired; /* connections doomed by each rule, since the start */
};

/* The group of a client address: an IPv4 address on its own, except 127.0.0.0/8 as one (any
 * local user may connect from any address of it); an IPv6 address by its /64 (what one host
 * is given), an IPv4-mapped one as its IPv4 address; anything else (NULL) one group. */
void gp_conns_group(const struct sockaddr *sa, unsigned char g[GP_CONNS_GROUP_LEN]);
/* A new connection from sa. Returns the connection to shut down now (marked doomed), or
 * NULL: the evicted one when the group or the whole is over its limit, or the new one itself
 * when the table is full. */
struct gp_conn *gp_conns_add(struct gp_conns *t, const void *key, int fd, const struct sockaddr *sa,
			     uint64_t now_ns);
/* The connection sent a whole request. */
void gp_conns_requested(struct gp_conns *t, const void *key);
/* The connection is closed: its entry is free again. */
void gp_conns_remove(struct gp_conns *t, const void *key);
/* Marks doomed every connection past its lifetime and calls doom(fd) for each; returns the
 * nanoseconds until the next one will be (at most one second). */
uint64_t gp_conns_expire(struct gp_conns *t, uint64_t now_ns, void (*doom)(int fd));

#endif
