"""A command run on a pseudo-terminal, for the tests of what only a terminal gets (escape codes,
the alternate screen, colour): run(argv, env=None, when=None, sig=None) starts argv[0] (a path)
with os.environ and env, reads everything it writes until it closes the terminal, sends sig
once `when` (bytes) has appeared in the output when both are given, and returns (output bytes,
wait status). Used by stat_cli.sh and tests/e2e/e2e_stat_users.sh (sys.path gets this folder)."""
import os
import pty


def run(argv, env=None, when=None, sig=None):
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(argv[0], argv, dict(os.environ, **(env or {})))
    out = b""
    while True:
        if sig and when in out:
            os.kill(pid, sig)
            sig = None
        try:
            b = os.read(fd, 65536)
        except OSError:
            break
        if not b:
            break
        out += b
    _, st = os.waitpid(pid, 0)
    return out, st
