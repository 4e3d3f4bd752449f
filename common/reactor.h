/*
 * Reactor: the event loop one worker thread runs.  It owns its file
 * descriptors, its io_uring ring and its buffer pool; nothing it owns is
 * touched by another thread.  Other threads reach it only with
 * reactor_send(), which queues a message the reactor runs itself.
 */
#ifndef REACTOR_H
#define REACTOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

struct reactor;
struct bufpool;
struct io_uring;

typedef void (*reactor_fd_cb)(void *arg, uint32_t events);
typedef void (*reactor_fn)(void *arg);

enum reactor_poll_mode { REACTOR_EVENT, REACTOR_BUSY_POLL, REACTOR_ADAPTIVE };

/* A submitted io_uring request: put &op in the SQE's user_data. */
struct reactor_uring_op {
	void (*cb)(struct reactor_uring_op *op, int res);
};

struct reactor *reactor_create(int index, enum reactor_poll_mode mode);
/*
 * An adaptive reactor keeps polling this long after its last piece of work
 * before it sleeps (global.adaptive_spin_us; docs/deploy-iser.md has the
 * measurements).  Set before reactor_run().
 */
#define REACTOR_ADAPTIVE_SPIN_US 50
void reactor_set_spin_us(struct reactor *r, unsigned us);
/*
 * A reactor for a library that lives in its caller's event loop (the
 * initiator): event mode, no io_uring ring (reactor_ring() is NULL, file I/O
 * is not its business) and outside the registry, so reactor_next() never
 * hands it a target connection.  reactor_index() is -1.
 */
struct reactor *reactor_create_private(void);
void reactor_destroy(struct reactor *r);
/* Run the loop on the calling thread until reactor_stop(). */
void reactor_run(struct reactor *r);
/*
 * For libraries that live in the caller's event loop: a private reactor's
 * epoll fd is readable whenever it has work (a reactor with io_uring rings
 * keeps them out of its epoll set: see reactor.c); reactor_poll_once() runs one
 * iteration (deferred calls, ready fds, io_uring completions, due timers),
 * waiting at most timeout_ms (0: not at all).  Returns the number of events
 * handled, or -errno.
 */
int reactor_fd(const struct reactor *r);
int reactor_poll_once(struct reactor *r, int timeout_ms);

/* Any thread: ask the loop to return (after the current iteration). */
void reactor_stop(struct reactor *r);
/* The reactor running on this thread, or NULL. */
struct reactor *reactor_self(void);
int reactor_index(const struct reactor *r);

/* File descriptors (EPOLLIN/EPOLLOUT/...); callbacks run on the reactor. */
int reactor_add_fd(struct reactor *r, int fd, uint32_t events, reactor_fd_cb cb, void *arg);
int reactor_mod_fd(struct reactor *r, int fd, uint32_t events);
void reactor_del_fd(struct reactor *r, int fd);

/*
 * Pollers: completion queues a busy or adaptive reactor reads directly
 * instead of waiting for their notification fd.  poll(arg) runs on every
 * iteration while the reactor spins and returns how much it found.  An
 * adaptive reactor about to sleep calls arm(arg), which re-enables the
 * notification and returns >0 if work slipped in meanwhile (then the
 * reactor does not sleep).  An event-mode reactor never calls either.
 */
struct reactor_poller;
struct reactor_poller *reactor_poller_add(struct reactor *r, int (*poll)(void *arg), int (*arm)(void *arg),
					  void *arg);
void reactor_poller_del(struct reactor *r, struct reactor_poller *p);
enum reactor_poll_mode reactor_mode(const struct reactor *r);

/* Run fn(arg) on this reactor soon (not from inside the caller's stack). */
int reactor_defer(struct reactor *r, reactor_fn fn, void *arg);
/* Any thread: run fn(arg) on reactor r.  Returns 0 or -ENOMEM. */
int reactor_send(struct reactor *r, reactor_fn fn, void *arg);

/*
 * The reactor's io_uring (NULL if io_uring could not be set up: callers fall
 * back to synchronous I/O and reactor_defer()).  Get an SQE with
 * reactor_uring_sqe(); the ring is submitted once per loop iteration.  Each
 * SQE taken must complete exactly once (no multishot requests): the reactor
 * counts them to know when it may sleep in the ring.
 */
struct io_uring *reactor_ring(struct reactor *r);
struct io_uring_sqe *reactor_uring_sqe(struct reactor *r);
/*
 * An SQE of the reactor's "big" ring (IORING_SETUP_SQE128 | CQE32), for
 * IORING_OP_URING_CMD passthrough whose command does not fit a 64-byte SQE
 * (NVMe).  The ring is made on first use, its completions reach op->cb with
 * cqe->res like the main ring's, and it is submitted once per loop
 * iteration.  NULL where there is none (a private reactor, a kernel without
 * the flags: said once) or it stays full: do the command synchronously.
 */
struct io_uring_sqe *reactor_uring_sqe_cmd(struct reactor *r);

/* Per-reactor registered buffer pool. */
struct bufpool *reactor_bufpool(struct reactor *r);

/* The reactors created so far, in turn: where a new connection goes. */
struct reactor *reactor_next(void);
/* Any thread: reactor_send(r, fn, arg) to every reactor; returns how many got it. */
unsigned reactor_send_all(reactor_fn fn, void *arg);

/* Monotonic time in nanoseconds. */
uint64_t reactor_now_ns(void);

/* A one-shot timer on this reactor; cancel before arg is freed. */
struct reactor_timer;
struct reactor_timer *reactor_timer_add(struct reactor *r, uint64_t delay_ms, reactor_fn fn, void *arg);
void reactor_timer_cancel(struct reactor *r, struct reactor_timer *t);

#endif
