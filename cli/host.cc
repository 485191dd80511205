#include "host.h"

#include <cstdio>

#if __has_include(<unistd.h>)
#include <unistd.h>
#define WASTE_CLI_HAVE_UNISTD 1
#endif

namespace waste::cli {

bool StdinIsTerminal() {
#ifdef WASTE_CLI_HAVE_UNISTD
  return ::isatty(STDIN_FILENO) != 0;
#else
  return false;
#endif
}

bool StreamIsTerminal(int fd) {
#ifdef WASTE_CLI_HAVE_UNISTD
  return ::isatty(fd) != 0;
#else
  (void)fd;
  return false;
#endif
}

bool StderrIsTerminal() { return StreamIsTerminal(2); }

void EndTerminalLineFromSignal() {
#ifdef WASTE_CLI_HAVE_UNISTD
  if (::isatty(STDOUT_FILENO) == 1) (void)!::write(STDOUT_FILENO, "\n", 1);
#endif
}

}  // namespace waste::cli
