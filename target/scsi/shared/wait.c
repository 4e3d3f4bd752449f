/*
 * A wait for what task management or a logout does beyond this target: on
 * a shared LU (shared.h) the other gateways must have heard of a reset or
 * a released reservation before the initiator hears the answer, or a
 * command through another path could still meet the old state.  The jobs
 * holding a wait end on the engine's threads; the count and the callback
 * live on the waiter's reactor alone, so only the hand-off crosses threads.
 */
#include <stdlib.h>
#include <unistd.h>

#include "common/reactor.h"
#include "target/scsi/scsi_int.h"

struct scsi_wait {
	struct reactor *r;
	void (*done)(void *arg);
	void *arg;
	unsigned jobs;   /* started and not yet ended */
	bool dropped;    /* the waiter is gone: freed with the last job */
};

struct scsi_wait *scsi_wait_new(struct reactor *r, void (*done)(void *arg), void *arg)
{
	struct scsi_wait *w = calloc(1, sizeof(*w));
	if (w) {
		w->r = r;
		w->done = done;
		w->arg = arg;
	}
	return w;
}

bool scsi_wait_busy(const struct scsi_wait *w)
{
	return w && w->jobs;
}

void scsi_wait_drop(struct scsi_wait *w)
{
	if (!w)
		return;
	if (!w->jobs)
		free(w);
	else
		w->dropped = true;
}

void scsi_wait_hold(struct scsi_wait *w)
{
	if (w)
		w->jobs++;
}

static void ended(void *arg)
{
	struct scsi_wait *w = arg;
	if (--w->jobs)
		return;
	if (w->dropped)
		free(w);
	else
		w->done(w->arg);
}

void scsi_wait_end(struct scsi_wait *w)
{
	if (!w)
		return;
	if (!w->r) {
		ended(w); /* no reactor (unit tests): the caller's thread is the waiter's */
		return;
	}
	/* Only an allocation failure stops the hand-off; the waiter must hear, so wait for memory. */
	while (reactor_send(w->r, ended, w) != 0)
		usleep(1000);
}
