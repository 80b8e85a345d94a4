#include "cli/commands.h"

int main(int argc, char** argv) {
  return memsnap::run_cli(argc, argv);
}
