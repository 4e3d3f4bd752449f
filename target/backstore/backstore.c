/* placeholder until written */
typedef int placeholder_backstore_t;
