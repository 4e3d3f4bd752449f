/* not yet written: skipped */
int main(void) { return 77; }
