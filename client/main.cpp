// ccpool-client: the small program the LD_PRELOAD shim execs in place of a
// compiler. See client_main.h for its argv contract.
#include "client/client_main.h"

int main(int argc, char** argv) {
  return ccpool::client::client_main(argc, argv);
}
