/* placeholder until written */
typedef int placeholder_discovery_t;
