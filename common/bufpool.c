/* placeholder until written */
typedef int placeholder_bufpool_t;
