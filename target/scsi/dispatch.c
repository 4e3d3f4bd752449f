/* placeholder until written */
typedef int placeholder_dispatch_t;
