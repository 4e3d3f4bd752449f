/*
 * Who owns a work request (common/transport/rdma.c), with a QP whose post_send is
 * ours: no device, no rdma_cm.  What the provider took is the device's and
 * ends once, by its completion; what it refused goes back to the queue and
 * ends once, by the close; a completion the device reports a second time
 * (siw flushed an RDMA READ it had completed) is ignored, never read
 * through (under the sanitizers a read of the freed context would fail).
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <string.h>

#include "common/transport/rdma_int.h"

#include "unit_run.h"

static int post_rc, refuse_at, posts, cb_calls, cb_err, done_calls, close_calls;

/* rxe and siw: every WR goes in the send queue, then the doorbell may fail (bad stays NULL). */
static int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	(void)qp;
	*bad = NULL;
	for (int i = 0; wr; wr = wr->next, i++) {
		if (i == refuse_at) {
			*bad = wr;
			return post_rc;
		}
		posts++;
	}
	return post_rc;
}

static void fake_close(struct xp_conn *xc)
{
	close_calls++;
	xc->state = XP_CLOSING;
}

static const struct transport_ops fake_ops = { .close = fake_close };
static struct ibv_context ctx;
static struct ibv_qp qp;
static struct rdma_cm_id id;
static struct rdma_conn conn;
static uint8_t mem[4096], tx_mem[RDMA_QUEUE * RDMA_TX_SLOT];
static struct ibv_mr tx_mr = { .lkey = 7 };
static struct buf b = { .data = mem, .cap = sizeof(mem), .lkey = 5 };

static void data_cb(void *arg, int err)
{
	(void)arg;
	cb_calls++;
	cb_err = err;
}

static void pdu_done(struct xp_pdu *p, int err)
{
	(void)p;
	(void)err;
	done_calls++;
}

static struct rdma_conn *setup(void)
{
	struct rdma_conn *c = &conn;
	memset(c, 0, sizeof(*c));
	ctx.ops.post_send = fake_post_send;
	qp.context = &ctx;
	id.qp = &qp;
	c->id = &id;
	c->xc.ops = &fake_ops;
	c->xc.state = XP_UP;
	c->sq_size = c->sq_free = 64;
	c->ord = 16;
	c->signal_writes = true;   /* iWARP: every RDMA WRITE signaled, on the in-flight list */
	c->tx_mem = tx_mem;
	c->tx_mr = &tx_mr;
	for (uint32_t i = 0; i < RDMA_QUEUE; i++)
		c->tx_free[c->ntx_free++] = i;
	post_rc = 0;
	refuse_at = -1;
	posts = cb_calls = cb_err = done_calls = close_calls = 0;
	return c;
}

static void report(struct rdma_conn *c, uint64_t wr_id, enum ibv_wc_status st)
{
	struct ibv_wc wc = { .wr_id = wr_id, .status = st };
	iser_complete(c, &wc);
}

static void test_doorbell_failed(void)
{
	struct rdma_conn *c = setup();
	post_rc = ENOTCONN;
	CU_ASSERT_EQUAL(iser_data(c, WR_READ, &b, 0, 4096, 0x1000, 9, data_cb, NULL), 0);
	struct wr_ctx *w = c->fly;
	/* The provider took it: in flight, not back in the queue, and the connection closes. */
	CU_ASSERT_EQUAL(posts, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(w);
	CU_ASSERT_PTR_NULL(c->wrq_head);
	CU_ASSERT_EQUAL(c->wrs_out, 1);
	CU_ASSERT_EQUAL(close_calls, 1);
	iser_fail_queues(c);
	CU_ASSERT_EQUAL(cb_calls, 0);
	/* Its flush ends it; the same flush reported again is ignored. */
	report(c, (uintptr_t)w, IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(cb_calls, 1);
	CU_ASSERT_EQUAL(cb_err, -ECONNRESET);
	CU_ASSERT_PTR_NULL(c->fly);
	CU_ASSERT_EQUAL(c->wrs_out, 0);
	report(c, (uintptr_t)w, IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(cb_calls, 1);
	CU_ASSERT_EQUAL(c->wrs_out, 0);
}

static void test_refused_goes_back(void)
{
	struct rdma_conn *c = setup();
	post_rc = ENOMEM;
	refuse_at = 1;
	c->in_poll = true;   /* both queued, then one post */
	CU_ASSERT_EQUAL(iser_data(c, WR_WRITE, &b, 0, 2048, 0x1000, 9, data_cb, NULL), 0);
	CU_ASSERT_EQUAL(iser_data(c, WR_WRITE, &b, 2048, 2048, 0x1800, 9, data_cb, NULL), 0);
	c->in_poll = false;
	iser_post_wr(c, NULL);
	struct wr_ctx *w = c->fly;
	CU_ASSERT_EQUAL(posts, 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(w);
	CU_ASSERT_PTR_NULL(w->fnext);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c->wrq_head);
	CU_ASSERT_PTR_NULL(c->wrq_head->next);
	CU_ASSERT_EQUAL(c->wrs_out, 1);
	/* The refused one ends with the close, the posted one with its flush: each once. */
	iser_fail_queues(c);
	CU_ASSERT_EQUAL(cb_calls, 1);
	report(c, (uintptr_t)w, IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(cb_calls, 2);
	report(c, (uintptr_t)w, IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(cb_calls, 2);
	CU_ASSERT_EQUAL(c->wrs_out, 0);
}

static void test_send_reported_twice(void)
{
	struct rdma_conn *c = setup();
	struct xp_pdu p = { .done = pdu_done };
	iser_send(&c->xc, &p);
	CU_ASSERT_EQUAL(posts, 1);
	CU_ASSERT_EQUAL(c->ntx_free, RDMA_QUEUE - 1);
	uint32_t slot = c->tx_free[c->ntx_free];
	report(c, (uintptr_t)&c->tx_ctx[slot], IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(done_calls, 1);
	CU_ASSERT_EQUAL(c->ntx_free, RDMA_QUEUE);
	/* A second report would give the slot back twice (two PDUs in one slot). */
	report(c, (uintptr_t)&c->tx_ctx[slot], IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(done_calls, 1);
	CU_ASSERT_EQUAL(c->ntx_free, RDMA_QUEUE);
	CU_ASSERT_EQUAL(c->wrs_out, 0);
	CU_ASSERT_EQUAL(close_calls, 0);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("rdma", NULL, NULL);
	CU_add_test(s, "a failed doorbell: the WRs are the device's", test_doorbell_failed);
	CU_add_test(s, "a refused WR goes back to the queue", test_refused_goes_back);
	CU_add_test(s, "a send reported twice ends once", test_send_reported_twice);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
