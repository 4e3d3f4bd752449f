/* placeholder until written */
typedef int placeholder_conn_t;
