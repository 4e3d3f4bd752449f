/* Between rbd.c (the image) and rbd_state.c (its LU's shared state in RADOS). */
#ifndef RBD_INT_H
#define RBD_INT_H

#include <rados/librados.h>

struct backstore;

/* Where bs's image is: its connection, pool, namespace (NULL: none) and image id. */
void rbd_place(const struct backstore *bs, rados_t *rados, const char **pool, const char **ns, const char **id);
extern const struct bs_shared_ops rbd_shared_ops;

#endif
