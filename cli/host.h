// Facts about this process that the CLI needs and the public API does not
// offer (yet): whether stdin / a stream is a terminal. Kept to the C and
// POSIX calls MinGW also provides, so there is no per-OS #ifdef.
#pragma once

#include <cstdint>

namespace waste::cli {

bool StdinIsTerminal();
bool StderrIsTerminal();
// fd 0, 1 or 2.
bool StreamIsTerminal(int fd);
// A newline on stdout when it is a terminal; async-signal-safe (write(2)),
// for a signal handler that leaves from the chat prompt.
void EndTerminalLineFromSignal();

}  // namespace waste::cli
