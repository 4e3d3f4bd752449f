/* placeholder until written */
typedef int placeholder_ram_t;
