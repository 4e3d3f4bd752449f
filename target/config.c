/* placeholder until written */
typedef int placeholder_config_t;
