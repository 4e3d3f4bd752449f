/*
 * Between rbd.c (the image) and rbd_state.c (its LU's shared state in
 * RADOS); and rbd_notify for the fleet's document (target/fleet/fleet.c).
 */
#ifndef RBD_INT_H
#define RBD_INT_H

#include <rados/librados.h>

struct backstore;

/* Where bs's image is: its connection, pool, namespace (NULL: none) and image id. */
void rbd_place(const struct backstore *bs, rados_t *rados, const char **pool, const char **ns, const char **id);
extern const struct bs_shared_ops rbd_shared_ops;
/*
 * Notify obj's watchers and wait at most timeout_ms: who acknowledged (with
 * what each said) and who did not, decoded (rados_free_notify_response
 * frees them).  A watcher that did not answer in time is no error.
 */
int rbd_notify(rados_ioctx_t io, const char *obj, const void *data, size_t len, unsigned timeout_ms,
	       struct notify_ack_t **acks, size_t *nacks, struct notify_timeout_t **tos, size_t *ntos);

#endif
