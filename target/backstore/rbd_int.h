/* Between rbd.c (the image) and rbd_state.c (its LU's shared state in RADOS). */
#ifndef RBD_INT_H
#define RBD_INT_H

#include <rados/librados.h>

struct backstore;
struct rbd_state;

/* The shared state of image image_id in pool/ns (ns may be NULL), on connection rados. */
int rbd_state_open(rados_t rados, const char *pool, const char *ns, const char *image_id, struct rbd_state **out);
/* Unwatched, and no callback running, once this returns. */
void rbd_state_close(struct rbd_state *st);
struct rbd_state *rbd_state_of(const struct backstore *bs);
extern const struct bs_state_ops rbd_state_ops;

#endif
