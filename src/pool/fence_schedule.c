/* The fence thread's schedule (fence_schedule.h): a pure step over its state and the clock
 * it is handed. Outside the pool's file order (docs/architecture.md): no pool state; depends
 * on fence_schedule.h only. */
#include "fence_schedule.h"

void gp_fence_schedule_init(struct gp_fence_schedule *s, uint64_t interval_ns)
{
	*s = (struct gp_fence_schedule){
		.interval_ns = interval_ns,
		.due_ns = GP_FENCE_NEVER,
		.poll_ns = GP_FENCE_POLL_MIN_NS,
		.backoff_ns = GP_FENCE_BACKOFF_MIN_NS,
	};
}

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > GP_FENCE_NEVER - b ? GP_FENCE_NEVER - 1 : a + b; }

static struct gp_fence_step sleep_until(uint64_t t) { return (struct gp_fence_step){GP_FENCE_SLEEP, t}; }

/* A marker is due `delay` ns after now; the polls after it start from the shortest delay. */
static void burst(struct gp_fence_schedule *s, uint64_t now, uint64_t delay)
{
	s->due_ns = sat_add(now, delay);
	s->mark = true;
	s->poll_ns = GP_FENCE_POLL_MIN_NS;
}

struct gp_fence_step gp_fence_schedule_next(struct gp_fence_schedule *s, uint64_t now, unsigned events)
{
	bool freed = events & GP_FENCE_EV_FREED;
	if (s->acted) {
		s->acted = false;
		if (events & GP_FENCE_EV_REFUSED) {
			burst(s, now, sat_add(s->backoff_ns, s->interval_ns));
			if (s->backoff_ns < GP_FENCE_BACKOFF_GROW_NS)
				s->backoff_ns *= 2;
			return sleep_until(s->due_ns);
		}
		s->backoff_ns = GP_FENCE_BACKOFF_MIN_NS;
		if (freed) {
			burst(s, now, s->interval_ns);
		} else if (events & GP_FENCE_EV_OUTSTANDING) {
			s->due_ns = sat_add(now, s->poll_ns);
			s->mark = false;
			s->poll_ns = s->poll_ns * 2 < GP_FENCE_POLL_MAX_NS ? s->poll_ns * 2 : GP_FENCE_POLL_MAX_NS;
		} else {
			s->due_ns = GP_FENCE_NEVER;
		}
		if (s->due_ns > now)
			return sleep_until(s->due_ns);
	} else if (s->due_ns == GP_FENCE_NEVER) {
		if (!freed)
			return sleep_until(GP_FENCE_NEVER);
		burst(s, now, s->interval_ns);
		if (s->due_ns > now)
			return sleep_until(s->due_ns);
	} else if (now < s->due_ns) {
		s->mark |= freed; /* woken early: the free joins the action due */
		return sleep_until(s->due_ns);
	}
	/* the action due */
	enum gp_fence_action a = s->mark || freed ? GP_FENCE_MARK : GP_FENCE_POLL;
	s->mark = false;
	s->acted = true;
	return (struct gp_fence_step){a, now};
}
