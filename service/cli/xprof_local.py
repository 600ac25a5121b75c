"""xprof's standalone server as `kernelwatch trace` starts it: its web pages on the loopback interface only.

xprof binds its web server to the host's wildcard address and has no setting for another, so a developer's
profiles (their kernels' names, shapes and source lines) were served to the whole network. This entry point is
``python -m xprof.server`` with that one choice replaced by 127.0.0.1, the capture-profile button hidden (nothing
here is a live process to capture) and the worker stubs pointed at the loopback. xprof's gRPC worker port, opened
by its compiled extension, still listens on every interface: xprof offers no setting for it (`kernelwatch trace`
says so)."""

from __future__ import annotations

import sys

LOOPBACK = "127.0.0.1"


def main(argv: list[str]) -> int:
    from xprof import server

    # xprof's own function choosing the address its web server binds (xprof.server._get_wildcard_address). An
    # xprof without it would bind every interface while `trace` says this host alone: refused instead.
    if not callable(getattr(server, "_get_wildcard_address", None)):
        print("kernelwatch trace: this xprof chooses its address another way, and would serve the traces to every "
              "network interface; use --no-serve and start xprof yourself", file=sys.stderr)
        return 2
    server._get_wildcard_address = lambda _port: LOOPBACK
    return int(server.main(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
