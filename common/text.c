/* placeholder until written */
typedef int placeholder_text_t;
