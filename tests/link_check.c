/* Nothing to run: this program exists to be linked with every object of one library and only
 * the libraries that one names (tests/CMakeLists.txt, link_check_*), so that a library reaching
 * into a folder it does not name (the core into a backend, say) fails the build. */
int main(void) { return 0; }
