#include "cli/command.h"

int main(int argc, char** argv) {
  return memsnap::cli::run_cli(argc, argv);
}
