#pragma once
// Whether this process's stdout is a terminal, for output that redraws a line (progress bars).

namespace mantissa {

// isatty(stdout), unless the environment says otherwise: MANTISSA_STDOUT_IS_TTY=0 or 1. The
// ranks that `mantissa train --devices N` starts get it from the launcher: mpirun hands every
// rank a pseudo-terminal as stdout, also when the launcher's own stdout is a file or a pipe,
// so the ranks drew terminal bars (carriage returns, escape codes) into redirected logs.
bool stdout_is_terminal();

}  // namespace mantissa
