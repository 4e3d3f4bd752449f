/*
 * SendTargets discovery (RFC 7143 sec. 13.12 and appendix C): a Text
 * request on a discovery session; the answer lists TargetName= followed by
 * its TargetAddress=addr[:port],tpgt entries.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "isc_internal.h"

void isc_discovery_free(struct isc_discovery *d)
{
	if (!d)
		return;
	for (unsigned i = 0; i < d->ntargets; i++)
		free(d->targets[i].portals);
	free(d->targets);
	free(d);
}

/* "192.0.2.1:3260,1", "[2001:db8::1]:3260,1", "host,1" */
static int parse_address(const char *v, uint16_t default_port, struct isc_portal *p)
{
	memset(p, 0, sizeof(*p));
	const char *comma = strrchr(v, ',');
	const char *end = comma ? comma : v + strlen(v);
	const char *hend;
	const char *h = v;
	if (*v == '[') {
		const char *rb = memchr(v, ']', (size_t)(end - v));
		if (!rb)
			return -EPROTO;
		h = v + 1;
		hend = rb;
		end = rb + 1 < end && rb[1] == ':' ? end : end;
	} else {
		hend = memchr(v, ':', (size_t)(end - v));
		if (!hend)
			hend = end;
	}
	if (hend == h || (size_t)(hend - h) >= sizeof(p->addr))
		return -EPROTO;
	memcpy(p->addr, h, (size_t)(hend - h));
	p->port = default_port;
	const char *colon = *v == '[' ? (hend[1] == ':' ? hend + 1 : NULL) : (hend < end ? hend : NULL);
	if (colon) {
		uint64_t port;
		char tmp[8];
		size_t n = (size_t)(end - colon - 1);
		if (!n || n >= sizeof(tmp))
			return -EPROTO;
		memcpy(tmp, colon + 1, n);
		tmp[n] = 0;
		if (!text_parse_u64(tmp, &port) || !port || port > 65535)
			return -EPROTO;
		p->port = (uint16_t)port;
	}
	if (comma) {
		uint64_t tag;
		if (!text_parse_u64(comma + 1, &tag) || tag > 65535)
			return -EPROTO;
		p->tpgt = (uint16_t)tag;
	}
	return 0;
}

static int build(struct isc_session *s, const struct text_list *kv, struct isc_discovery **out)
{
	struct isc_discovery *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	unsigned cap = 0;
	for (unsigned i = 0; i < kv->count; i++) {
		const char *k = kv->pairs[i].key, *v = kv->pairs[i].value;
		if (!strcmp(k, "TargetName")) {
			if (d->ntargets == cap) {
				cap = cap ? cap * 2 : 8;
				struct isc_target_info *n = realloc(d->targets, cap * sizeof(*n));
				if (!n)
					goto nomem;
				d->targets = n;
			}
			struct isc_target_info *t = &d->targets[d->ntargets++];
			memset(t, 0, sizeof(*t));
			snprintf(t->name, sizeof(t->name), "%s", v);
		} else if (!strcmp(k, "TargetAddress")) {
			if (!d->ntargets)
				continue; /* an address before any name: nothing to attach it to */
			struct isc_target_info *t = &d->targets[d->ntargets - 1];
			struct isc_portal p;
			if (parse_address(v, 3260, &p)) {
				isc_seterr(s, "ignored bad TargetAddress '%.100s'", v);
				continue;
			}
			struct isc_portal *np = realloc(t->portals, (t->nportals + 1) * sizeof(*np));
			if (!np)
				goto nomem;
			t->portals = np;
			t->portals[t->nportals++] = p;
		}
	}
	/* RFC 7143: no TargetAddress means the portal we asked. */
	for (unsigned i = 0; i < d->ntargets; i++) {
		struct isc_target_info *t = &d->targets[i];
		if (t->nportals)
			continue;
		t->portals = calloc(1, sizeof(*t->portals));
		if (!t->portals)
			goto nomem;
		snprintf(t->portals[0].addr, sizeof(t->portals[0].addr), "%.63s", s->host);
		t->portals[0].port = s->port;
		t->nportals = 1;
	}
	*out = d;
	return 0;
nomem:
	isc_discovery_free(d);
	return -ENOMEM;
}

int isc_send_targets_sync(struct isc_session *s, struct isc_discovery **out)
{
	if (s->state != ISC_S_FFP)
		return -ENOTCONN;
	struct isc_task *t = isc_task_alloc(s, ISC_K_TEXT);
	if (!t)
		return -ENOMEM;
	static const char req[] = "SendTargets=All";
	t->out_data = malloc(sizeof(req));
	if (!t->out_data) {
		isc_seterr(s, "out of memory");
		free(t);
		return -ENOMEM;
	}
	memcpy(t->out_data, req, sizeof(req));
	t->out_len = sizeof(req);
	struct pdu_text *q = (void *)t->bhs;
	q->flags = PDU_FLAG_FINAL;
	q->ttt = htobe32(PDU_RESERVED_TAG);
	/* The text arrives in t->text; collect it before the task is released. */
	struct text_buf *keep = malloc(sizeof(*keep));
	if (!keep) {
		free(t->out_data);
		free(t);
		return -ENOMEM;
	}
	text_buf_init(keep);
	struct isc_waiter w = { 0 };
	t->done_cb = isc_waiter_done;
	t->arg = &w;
	t->text_sink = keep;
	isc_task_queue(s, t);
	isc_task_pump(s);
	int rc = isc_waiter_wait(s, &w, 0);
	if (!rc) {
		struct text_list kv;
		char why[200];
		rc = text_parse(keep->data, keep->len, &kv, why, sizeof(why));
		if (rc)
			isc_seterr(s, "bad SendTargets answer: %s", why);
		else {
			rc = build(s, &kv, out);
			text_list_free(&kv);
		}
	}
	text_buf_free(keep);
	free(keep);
	return rc;
}

int isc_discover_sync(const char *host, uint16_t port, const struct isc_options *o, struct isc_discovery **out,
		      char *err, size_t errlen)
{
	struct isc_session *s = isc_session_new(o);
	if (!s) {
		int e = errno;
		snprintf(err, errlen, "%s", e == EINVAL ? "bad options (struct_size)" : strerror(e));
		return -e;
	}
	int rc = isc_connect_sync(s, host, port, NULL);
	if (!rc) {
		rc = isc_send_targets_sync(s, out);
		if (!rc)
			isc_logout_sync(s);
	}
	if (rc)
		snprintf(err, errlen, "%s", isc_errmsg(s));
	isc_session_free(s);
	return rc;
}

/* The name before 1.2 (initiator.h): programs built against 1.0 and 1.1 call it. */
int isc_discover(const char *host, uint16_t port, const struct isc_options *o, struct isc_discovery **out,
		 char *err, size_t errlen) __attribute__((alias("isc_discover_sync")));
