/* placeholder until written */
typedef int placeholder_reactor_t;
