/* The connections of gpupool-stat --listen and the policy that bounds them (stat_conns.h).
 * Depends on libc only. */
#include "stat_conns.h"

#include <netinet/in.h>
#include <stddef.h>
#include <string.h>

#define NS_PER_S 1000000000ull

void gp_conns_group(const struct sockaddr *sa, unsigned char g[GP_CONNS_GROUP_LEN])
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	memset(g, 0, GP_CONNS_GROUP_LEN);
	const unsigned char *v4 = NULL;
	if (sa && sa->sa_family == AF_INET) {
		v4 = (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr;
	} else if (sa && sa->sa_family == AF_INET6) {
		const unsigned char *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		if (memcmp(a, mapped, sizeof mapped) == 0) {
			v4 = a + 12;
		} else {
			g[0] = 6;
			memcpy(g + 1, a, 8);
		}
	}
	if (v4) {
		g[0] = 4;
		memcpy(g + 1, v4, 4);
		if (v4[0] == 127)
			memset(g + 2, 0, 3);
	}
}

/* The connection to evict for `newest`: among those of its group (group: true) or all, not
 * yet doomed, the oldest that has not sent a whole request, else the oldest. */
static struct gp_conn *victim(struct gp_conns *t, const struct gp_conn *newest, bool group)
{
	struct gp_conn *best = NULL;
	for (size_t i = 0; i < GP_CONNS_HARD; i++) {
		struct gp_conn *e = &t->c[i];
		if (!e->key || e->doomed || e == newest ||
		    (group && memcmp(e->group, newest->group, GP_CONNS_GROUP_LEN) != 0))
			continue;
		if (!best || (best->requested && !e->requested) ||
		    (best->requested == e->requested && e->born_ns < best->born_ns))
			best = e;
	}
	return best;
}

struct gp_conn *gp_conns_add(struct gp_conns *t, const void *key, int fd, const struct sockaddr *sa,
			     uint64_t now_ns)
{
	static struct gp_conn refused;
	struct gp_conn *e = NULL;
	for (size_t i = 0; i < GP_CONNS_HARD && !e; i++)
		if (!t->c[i].key)
			e = &t->c[i];
	if (!e) {
		refused = (struct gp_conn){.key = key, .fd = fd, .born_ns = now_ns, .doomed = true};
		t->evicted++;
		return &refused;
	}
	*e = (struct gp_conn){.key = key, .fd = fd, .born_ns = now_ns};
	gp_conns_group(sa, e->group);
	int in_group = 0, all = 0;
	for (size_t i = 0; i < GP_CONNS_HARD; i++) {
		const struct gp_conn *o = &t->c[i];
		if (!o->key || o->doomed)
			continue;
		all++;
		in_group += memcmp(o->group, e->group, GP_CONNS_GROUP_LEN) == 0;
	}
	struct gp_conn *v = in_group > GP_CONNS_PER_GROUP ? victim(t, e, true)
			    : all > GP_CONNS_MAX          ? victim(t, e, false)
							  : NULL;
	if (v) {
		v->doomed = true;
		t->evicted++;
	}
	return v;
}

static struct gp_conn *find(struct gp_conns *t, const void *key)
{
	for (size_t i = 0; key && i < GP_CONNS_HARD; i++)
		if (t->c[i].key == key)
			return &t->c[i];
	return NULL;
}

void gp_conns_requested(struct gp_conns *t, const void *key)
{
	struct gp_conn *e = find(t, key);
	if (e)
		e->requested = true;
}

void gp_conns_remove(struct gp_conns *t, const void *key)
{
	struct gp_conn *e = find(t, key);
	if (e)
		*e = (struct gp_conn){0};
}

uint64_t gp_conns_expire(struct gp_conns *t, uint64_t now_ns, void (*doom)(int fd))
{
	uint64_t life = GP_CONNS_LIFETIME_S * NS_PER_S, next = NS_PER_S;
	for (size_t i = 0; i < GP_CONNS_HARD; i++) {
		struct gp_conn *e = &t->c[i];
		if (!e->key || e->doomed)
			continue;
		uint64_t age = now_ns > e->born_ns ? now_ns - e->born_ns : 0;
		if (age >= life) {
			e->doomed = true;
			t->expired++;
			doom(e->fd);
		} else if (life - age < next) {
			next = life - age;
		}
	}
	return next;
}
