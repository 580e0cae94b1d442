"""Admin addresses: channels to each, the token metadata, and which admin is current."""

import grpc

from ._proto import registry_pb2_grpc


def _target(address: str) -> tuple:
    """`http://host:port` -> ("host:port", secure?)."""
    if address.startswith("https://"):
        return address[len("https://"):].rstrip("/"), True
    if address.startswith("http://"):
        return address[len("http://"):].rstrip("/"), False
    return address.rstrip("/"), False


class Admins:
    """The admin list, one lazily opened channel per address, and the rotation used for
    failover: the session and callbacks both move to the next admin when one fails."""

    def __init__(self, addresses, access_token: str, credentials=None) -> None:
        if not addresses:
            raise ValueError("at least one admin address is required")
        self.addresses = list(addresses)
        self._channels = {}
        self._index = 0
        self._credentials = credentials  # of https:// admins; None: the system's roots
        self.metadata = (("authorization", f"Bearer {access_token}"),) if access_token else ()

    @property
    def current(self) -> str:
        return self.addresses[self._index % len(self.addresses)]

    def advance(self) -> None:
        self._index = (self._index + 1) % len(self.addresses)

    def registry(self, address: str) -> registry_pb2_grpc.RegistryStub:
        channel = self._channels.get(address)
        if channel is None:
            target, secure = _target(address)
            channel = (
                grpc.aio.secure_channel(target, self._credentials or grpc.ssl_channel_credentials())
                if secure
                else grpc.aio.insecure_channel(target)
            )
            self._channels[address] = channel
        return registry_pb2_grpc.RegistryStub(channel)

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
