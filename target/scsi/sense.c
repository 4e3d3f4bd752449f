/* placeholder until written */
typedef int placeholder_sense_t;
