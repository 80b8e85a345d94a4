// The command line: one function per command, glue between arguments, the
// library and the renderers.
#pragma once

namespace memsnap {

// Parses argv, runs one command, prints; returns the exit status. Errors
// become one "memsnap: <message>" line on stderr and status 1.
int run_cli(int argc, char** argv);

}  // namespace memsnap
