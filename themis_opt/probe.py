"""Whether a ``tcp://HOST:PORT`` peer answers as a Dask scheduler, checked before Dask connects.

Dask's client trusts its peer: it reads the first 8 bytes of the answer as
the length of a message and allocates that much (2.82 EiB from a web server's
``HTTP/1.1``), and it waits for the answer without a limit once the TCP
connection stands. A Dask server writes its handshake as soon as it accepts a
connection, so reading that handshake's framing here, within the connection
timeout, tells a scheduler from anything else listening on the port without
sending it anything.
"""

from __future__ import annotations

import socket
import struct
import time

from themis_opt.errors import InputError

# A Dask handshake is one small msgpack message (about 200 bytes in Dask 2026.8): anything past
# 64 KiB is not one, and reading no further keeps a stranger from making this process allocate.
MAX_HANDSHAKE_BYTES = 2**16
MAX_HANDSHAKE_FRAMES = 64  # frames of that message (2 in Dask 2026.8)
_RETRY_S = 0.05  # first pause between attempts to connect (doubling): a scheduler may be starting


def check_dask_peer(spec: str, timeout: float) -> None:
    """Raise :class:`InputError` unless the peer at ``spec`` (``tcp://HOST:PORT``) sends a Dask
    handshake within ``timeout`` seconds.

    Parameters
    ----------
    spec
        The scheduler's address, already checked to be ``tcp://HOST:PORT``.
    timeout
        Seconds for the whole check: connecting (retried, as Dask retries) and the answer.

    Raises
    ------
    InputError
        On ``--scheduler``: no connection, no answer, or an answer that is not Dask's.
    """
    host, port = spec.removeprefix("tcp://").rsplit(":", 1)
    deadline = time.monotonic() + timeout

    def refuse(what: str) -> InputError:
        return InputError("--scheduler", f"no scheduler answered at {spec} within {timeout:g} s ({what})")

    pause = _RETRY_S  # Dask's own framing: native-order uint64 lengths
    while True:
        try:
            peer = socket.create_connection((host, int(port)), timeout=max(1e-3, deadline - time.monotonic()))
            break
        except OSError as error:
            if time.monotonic() + pause >= deadline:
                raise refuse(error.strerror or str(error) or type(error).__name__) from None
            time.sleep(pause)
            pause *= 2
    with peer:

        def read(count: int) -> bytes:
            data = b""
            while len(data) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise refuse("it connected, but sent no Dask handshake")
                peer.settimeout(left)
                try:
                    block = peer.recv(count - len(data))
                except TimeoutError:
                    raise refuse("it connected, but sent no Dask handshake") from None
                except OSError as error:
                    raise refuse(f"the connection failed: {error.strerror or error}") from None
                if not block:
                    raise refuse("it closed the connection without a Dask handshake")
                data += block
            return data

        (total,) = struct.unpack("Q", read(8))
        if not 16 <= total <= MAX_HANDSHAKE_BYTES:
            raise InputError("--scheduler", f"{spec} answered, but not as a Dask scheduler does (something else?)")
        message = read(total)
        (frames,) = struct.unpack_from("Q", message)
        if not 1 <= frames <= MAX_HANDSHAKE_FRAMES or 8 * (1 + frames) > total:
            raise InputError("--scheduler", f"{spec} answered, but not as a Dask scheduler does (something else?)")
        lengths = struct.unpack_from(f"{frames}Q", message, 8)
        if not total - 8 * (1 + frames) <= sum(lengths) <= MAX_HANDSHAKE_BYTES:  # frames past ``total`` come later
            raise InputError("--scheduler", f"{spec} answered, but not as a Dask scheduler does (something else?)")
