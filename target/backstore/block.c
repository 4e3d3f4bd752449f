/* placeholder until written */
typedef int placeholder_block_t;
