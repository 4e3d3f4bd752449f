/* placeholder until written */
typedef int placeholder_tcp_t;
